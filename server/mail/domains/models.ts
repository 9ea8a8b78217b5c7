import { Schema } from 'mongoose';
import type { SealedSecret } from '../../platform/secret-box.js';
import type { CheckedRecord } from './records.js';

// Custom mail domains keep their state in documents each written by one side only, so a background
// re-check never races an org's own edit (the embedded engine can lose concurrent updates to one document):
// - `mail_domains`: what the org did (added the domain, rotated a DKIM key);
// - `mail_domain_checks`: what DNS said last (written by checks alone);
// - `mail_domain_owners`: which domain verified a name first, one per name (a unique insert);
// - `mail_addresses`: addresses taken on verified domains, one per address (a unique insert);
// - `mail_domain_events`: domain.verified and domain.failing, once per change of standing.

export interface DkimKeyDoc {
  selector: string;
  /** The `p=` value of the TXT record: base64 of the public key's DER SubjectPublicKeyInfo. */
  publicKey: string;
  /** The PKCS#8 PEM private key, sealed under the master key. */
  privateKey: SealedSecret;
  createdAt: Date;
}

export interface MailDomainDoc {
  _id: string;
  orgId: string;
  /** Lowercase, without a trailing dot. */
  name: string;
  verificationToken: string;
  /** Oldest first: the newest is the one being rotated in until DNS shows it. */
  dkimKeys: DkimKeyDoc[];
  /** The newest key's selector: what a rotation compares and sets, so two at once leave one new key. */
  newestSelector: string;
  createdAt: Date;
}

export const domainSchema = new Schema<MailDomainDoc>({
  _id: String,
  orgId: { type: String, required: true },
  name: { type: String, required: true },
  verificationToken: { type: String, required: true },
  dkimKeys: { type: [{ _id: false, selector: String, publicKey: String, privateKey: Schema.Types.Mixed, createdAt: Date }], required: true },
  newestSelector: { type: String, required: true },
  createdAt: { type: Date, required: true },
}, { versionKey: false });
// One domain name once per org; two orgs may both claim it, only one can verify it (mail_domain_owners).
domainSchema.index({ orgId: 1, name: 1 }, { unique: true });

export type DomainStatus = 'pending' | 'verified' | 'failing';

export interface DomainCheckDoc {
  /** The domain's id. */
  _id: string;
  orgId: string;
  status: DomainStatus;
  records: CheckedRecord[];
  checkedAt: Date;
  verifiedAt?: Date;
  failingSince?: Date;
  /** Changes of standing so far: the next one's event id is `<domainId>.<changes + 1>`. */
  changes: number;
  /** Why a domain whose records are right is still not verified (another org verified the name first). */
  problem?: string;
}

export const checkSchema = new Schema<DomainCheckDoc>({
  _id: String,
  orgId: { type: String, required: true },
  status: { type: String, required: true },
  records: { type: Schema.Types.Mixed, required: true },
  checkedAt: { type: Date, required: true },
  verifiedAt: Date,
  failingSince: Date,
  changes: { type: Number, required: true },
  problem: String,
}, { versionKey: false, minimize: false });
// The scheduled re-check reads the least recently checked first.
checkSchema.index({ checkedAt: 1 });

export interface DomainOwnerDoc { _id: string; domainId: string; orgId: string; at: Date }

export const ownerSchema = new Schema<DomainOwnerDoc>({
  _id: String,
  domainId: { type: String, required: true },
  orgId: { type: String, required: true },
  at: { type: Date, required: true },
}, { versionKey: false });

export interface MailAddressDoc {
  /** The address, lowercase. */
  _id: string;
  identityId: string;
  orgId: string;
  domainId: string;
  createdAt: Date;
}

export const addressSchema = new Schema<MailAddressDoc>({
  _id: String,
  identityId: { type: String, required: true, index: true },
  orgId: { type: String, required: true },
  domainId: { type: String, required: true, index: true },
  createdAt: { type: Date, required: true },
}, { versionKey: false });

export const DOMAIN_EVENT_TYPES = ['domain.verified', 'domain.failing'] as const;
export type DomainEventType = (typeof DOMAIN_EVENT_TYPES)[number];

export interface DomainEventDoc {
  /** `<domainId>.<n>`: the n-th change of the domain's standing, the same id whichever process saw it. */
  _id: string;
  orgId: string;
  domainId: string;
  type: DomainEventType;
  data: Record<string, unknown>;
  at: Date;
  /** Set until the org's webhooks were handed the event; the webhook engine's outbox sweep hands over the rest. */
  undispatched?: true;
}

export const domainEventSchema = new Schema<DomainEventDoc>({
  _id: String,
  orgId: { type: String, required: true },
  domainId: { type: String, required: true },
  type: { type: String, required: true },
  data: { type: Schema.Types.Mixed, required: true },
  at: { type: Date, required: true },
  undispatched: Boolean,
}, { versionKey: false, minimize: false });
domainEventSchema.index({ undispatched: 1, at: 1 }, { sparse: true });
