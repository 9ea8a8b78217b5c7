import { generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';
import type { Connection, Model } from 'mongoose';
import type { Collection } from 'mongodb';
import { z } from 'zod';
import type { Config } from '../../platform/config.js';
import type { SecretBox } from '../../platform/secret-box.js';
import type { ActivityLog } from '../../platform/activity-log.js';
import type { Logger } from '../../platform/logger.js';
import { AppError, badRequest, conflict, isDuplicateKey, notFound } from '../../platform/errors.js';
import { newId, randomHex } from '../../platform/ids.js';
import { startRounds } from '../../platform/rounds.js';
import {
  addressSchema, checkSchema, domainEventSchema, domainSchema, ownerSchema,
  type DkimKeyDoc, type DomainCheckDoc, type DomainEventDoc, type DomainOwnerDoc, type DomainStatus, type MailAddressDoc, type MailDomainDoc,
} from './models.js';
import { checkRecord, expectedRecords, verdictOf, type CheckedRecord, type DkimPublicKey, type DnsReader, type ExpectedRecord, type RecordSettings } from './records.js';

/** A domain name an org can bring: lowercase labels of letters, digits and hyphens, at least two of them. */
export const domainName = z.string().trim().toLowerCase().max(253).transform((name) => name.replace(/\.$/, ''))
  .pipe(z.string().regex(/^(?=.{4,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$/, 'must be a domain name, e.g. example.com'));
/** The part before the @ of an address on a custom domain: letters, digits, and . _ + - inside. */
export const localPart = z.string().trim().toLowerCase()
  .pipe(z.string().regex(/^[a-z0-9](?:[a-z0-9_+-]|\.(?!\.)){0,62}[a-z0-9]$|^[a-z0-9]$/, 'must be 1-64 letters, digits and . _ + - (not first or last, no two dots in a row), e.g. support'));

export const MAX_DOMAINS_PER_ORG = 50;
/** DKIM keys of 2048 bits: what receivers expect today (1024 is being refused by some). */
const DKIM_BITS = 2048;

/** A domain with its standing: what the API, the console and the tools show. */
export interface DomainView {
  domain: MailDomainDoc;
  status: DomainStatus;
  records: (ExpectedRecord & { status?: CheckedRecord['status']; found?: string[] })[];
  checkedAt?: Date;
  verifiedAt?: Date;
  failingSince?: Date;
  problem?: string;
}

export interface MailDomainsDeps {
  conn: Connection;
  config: Config;
  secrets: SecretBox;
  logs: ActivityLog;
  log: Logger;
  dns: DnsReader;
  /** Told of each domain.verified and domain.failing (the org's webhooks); the outbox sweep tells it again what a crash left. */
  onEvent: (event: DomainEventDoc) => Promise<void>;
}

/** Off the event loop: an RSA 2048 key takes tens of milliseconds or more to make, which no request should wait behind. */
const makeRsaKey = promisify(generateKeyPair);

const sealContext = (domainId: string, selector: string) => `mail-domain-dkim:${domainId}:${selector}`;

/**
 * An org's own mail domains: the records to publish, DNS checks of them, the standing they give
 * (pending, verified, failing), DKIM keys and their rotation, and the addresses identities take on a
 * verified domain. Mail to and from an address on a domain that is not verified now goes nowhere.
 */
export class MailDomains {
  readonly domains: Model<MailDomainDoc>;
  readonly checks: Model<DomainCheckDoc>;
  readonly owners: Model<DomainOwnerDoc>;
  readonly addresses: Model<MailAddressDoc>;
  readonly events: Model<DomainEventDoc>;
  private readonly checkClaims: Collection<{ _id: string; at: Date }>;
  private readonly settings: RecordSettings;

  constructor(private readonly deps: MailDomainsDeps) {
    const { conn, config } = deps;
    this.domains = conn.models.MailDomain ?? conn.model<MailDomainDoc>('MailDomain', domainSchema, 'mail_domains');
    this.checks = conn.models.MailDomainCheck ?? conn.model<DomainCheckDoc>('MailDomainCheck', checkSchema, 'mail_domain_checks');
    this.owners = conn.models.MailDomainOwner ?? conn.model<DomainOwnerDoc>('MailDomainOwner', ownerSchema, 'mail_domain_owners');
    this.addresses = conn.models.MailAddress ?? conn.model<MailAddressDoc>('MailAddress', addressSchema, 'mail_addresses');
    this.events = conn.models.MailDomainEvent ?? conn.model<DomainEventDoc>('MailDomainEvent', domainEventSchema, 'mail_domain_events');
    this.checkClaims = conn.collection('mail_domain_check_claims') as unknown as Collection<{ _id: string; at: Date }>;
    const ours = config.MAIL_DOMAIN.toLowerCase();
    this.settings = { mxHost: (config.MAIL_MX_HOST ?? ours).toLowerCase(), spfInclude: (config.MAIL_SPF_INCLUDE ?? `_spf.${ours}`).toLowerCase() };
  }

  // --- the org's domains ---------------------------------------------------------------------------

  async create(orgId: string, name: string, by: { identityId?: string } = {}): Promise<DomainView> {
    const ours = this.deps.config.MAIL_DOMAIN.toLowerCase();
    if (name === ours || name.endsWith(`.${ours}`)) throw badRequest(`body.domain: ${name} is this service's own mail domain; bring a domain of your own`);
    if ((await this.domains.countDocuments({ orgId })) >= MAX_DOMAINS_PER_ORG) {
      throw new AppError(409, 'too_many_domains', `An org can have at most ${MAX_DOMAINS_PER_ORG} mail domains; delete one first`);
    }
    const id = newId('dom');
    const key = await this.newKey(id);
    const domain: MailDomainDoc = { _id: id, orgId, name, verificationToken: randomHex(16), dkimKeys: [key], newestSelector: key.selector, createdAt: new Date() };
    try {
      await this.domains.create(domain);
    } catch (err) {
      if (isDuplicateKey(err)) throw conflict(`${name} is already one of this org's domains`);
      throw err;
    }
    await this.deps.logs.record({
      orgId, ...(by.identityId ? { identityId: by.identityId } : {}), action: 'mail.domain_added', category: 'mail',
      description: `Mail domain ${name} added; waiting for its DNS records`, targetType: 'mail_domain', targetId: id,
    });
    return this.viewOf(domain, null);
  }

  async list(orgId: string): Promise<DomainView[]> {
    const domains = await this.domains.find({ orgId }).sort({ createdAt: 1, _id: 1 }).lean();
    const checks = new Map((await this.checks.find({ _id: { $in: domains.map((d) => d._id) } }).lean()).map((c) => [c._id, c]));
    return domains.map((d) => this.viewOf(d, checks.get(d._id) ?? null));
  }

  /** One of the org's domains; another org's is not found. `check`: read its records from DNS now. */
  async get(orgId: string, id: string, options: { check?: boolean } = {}): Promise<DomainView> {
    const domain = await this.owned(orgId, id);
    if (options.check) return this.viewOf(domain, await this.check(domain));
    return this.viewOf(domain, await this.checks.findById(id).lean());
  }

  async remove(orgId: string, id: string, by: { identityId?: string } = {}): Promise<void> {
    const domain = await this.owned(orgId, id);
    // Addresses first: from here on mail to them is refused, and nothing points at a domain that is gone.
    await this.addresses.deleteMany({ domainId: id });
    await this.owners.deleteOne({ _id: domain.name, domainId: id });
    await this.checks.deleteOne({ _id: id });
    await this.domains.deleteOne({ _id: id, orgId });
    await this.deps.logs.record({
      orgId, ...(by.identityId ? { identityId: by.identityId } : {}), action: 'mail.domain_deleted', category: 'mail', severity: 'warning',
      description: `Mail domain ${domain.name} deleted with its addresses`, targetType: 'mail_domain', targetId: id,
    });
  }

  /**
   * A new DKIM key under a new selector. The current key keeps signing until DNS shows the new one; from
   * then on the new one signs and the old record may be removed. Keys older than the signing one go.
   */
  async rotateDkim(orgId: string, id: string, by: { identityId?: string } = {}): Promise<DomainView> {
    const domain = await this.owned(orgId, id);
    const check = await this.checks.findById(id).lean();
    const signing = this.signingIndex(domain, check);
    const fresh = await this.newKey(id);
    const keys = [...domain.dkimKeys.slice(Math.max(0, signing)), fresh];
    // A compare-and-set on the newest key: two rotations at once leave one new key, not a lost one.
    const updated = await this.domains.findOneAndUpdate({ _id: id, orgId, newestSelector: domain.newestSelector },
      { $set: { dkimKeys: keys, newestSelector: fresh.selector } }, { returnDocument: 'after' }).lean();
    if (!updated) throw conflict('The domain changed meanwhile; retry');
    await this.deps.logs.record({
      orgId, ...(by.identityId ? { identityId: by.identityId } : {}), action: 'mail.domain_dkim_rotated', category: 'mail',
      description: `New DKIM key ${keys.at(-1)!.selector} for ${domain.name}; it signs once DNS shows it`, targetType: 'mail_domain', targetId: id,
    });
    return this.viewOf(updated, check);
  }

  private async newKey(domainId: string): Promise<DkimKeyDoc> {
    const { publicKey, privateKey } = await makeRsaKey('rsa', { modulusLength: DKIM_BITS });
    const selector = `ag${new Date().toISOString().slice(0, 10).replaceAll('-', '')}${randomHex(2)}`;
    return {
      selector,
      publicKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
      privateKey: this.deps.secrets.seal(privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), sealContext(domainId, selector)),
      createdAt: new Date(),
    };
  }

  private async owned(orgId: string, id: string): Promise<MailDomainDoc> {
    const domain = await this.domains.findOne({ _id: id, orgId }).lean();
    if (!domain) throw notFound('Domain not found');
    return domain;
  }

  // --- records and their checks --------------------------------------------------------------------

  /**
   * Which key signs: the newest whose record the last check found published (-1: none yet). Keys after
   * it are being rotated in; keys before it are retired.
   */
  private signingIndex(domain: MailDomainDoc, check: DomainCheckDoc | null): number {
    const published = new Set((check?.records ?? []).filter((r) => r.purpose === 'dkim' && r.status === 'ok').map((r) => r.selector));
    for (let i = domain.dkimKeys.length - 1; i >= 0; i--) if (published.has(domain.dkimKeys[i]!.selector)) return i;
    return -1;
  }

  private expected(domain: MailDomainDoc, check: DomainCheckDoc | null): ExpectedRecord[] {
    const signing = this.signingIndex(domain, check);
    // Before any key is published, the newest is the one to publish; after, the signing one and any newer.
    const keys: DkimPublicKey[] = (signing < 0 ? domain.dkimKeys.slice(-1) : domain.dkimKeys.slice(signing))
      .map((key, i) => ({ selector: key.selector, publicKey: key.publicKey, rotating: signing >= 0 && i > 0 }));
    return expectedRecords(domain.name, domain.verificationToken, keys, this.settings);
  }

  private viewOf(domain: MailDomainDoc, check: DomainCheckDoc | null): DomainView {
    const found = new Map((check?.records ?? []).map((r) => [`${r.purpose}:${r.name}`, r]));
    return {
      domain,
      status: check?.status ?? 'pending',
      records: this.expected(domain, check).map((r) => {
        const seen = found.get(`${r.purpose}:${r.name}`);
        return seen ? { ...r, status: seen.status, found: seen.found } : r;
      }),
      ...(check ? { checkedAt: check.checkedAt } : {}),
      ...(check?.verifiedAt ? { verifiedAt: check.verifiedAt } : {}),
      ...(check?.failingSince ? { failingSince: check.failingSince } : {}),
      ...(check?.problem ? { problem: check.problem } : {}),
    };
  }

  /**
   * Reads every record from DNS, and the standing that gives: verified once every required record is
   * right and no other org verified the name first; failing when a verified domain loses one; unchanged
   * when DNS did not answer. A change of standing is announced once (domain.verified, domain.failing),
   * whichever process saw it first: the event's id is the change's number.
   */
  async check(domain: MailDomainDoc): Promise<DomainCheckDoc> {
    const previous = await this.checks.findById(domain._id).lean();
    const records = await Promise.all(this.expected(domain, previous).map((r) => checkRecord(this.deps.dns, r)));
    // A key that DNS now shows may make the next key list differ (rotation): check those records too.
    const recheck = this.expected(domain, { ...(previous ?? emptyCheck(domain)), records }).filter((r) => !records.some((c) => c.purpose === r.purpose && c.name === r.name));
    records.push(...await Promise.all(recheck.map((r) => checkRecord(this.deps.dns, r))));
    const was = previous?.status ?? 'pending';
    let verdict = verdictOf(records);
    let problem: string | undefined;
    if (verdict === 'verified' && !(await this.holdName(domain))) {
      verdict = 'failing';
      problem = `Another organisation verified ${domain.name} first; it must delete it, or its records must stop pointing at it, before this one can`;
    }
    // A domain never verified stays pending whatever is wrong; one that was verified is failing.
    const status: DomainStatus = verdict === 'verified' ? 'verified' : verdict === 'failing' ? (was === 'pending' ? 'pending' : 'failing') : was;
    const now = new Date();
    const changed = status !== was && status !== 'pending';
    const check: DomainCheckDoc = {
      _id: domain._id, orgId: domain.orgId, status, records, checkedAt: now, changes: (previous?.changes ?? 0) + (changed ? 1 : 0),
      ...(status === 'verified' ? { verifiedAt: was === 'verified' ? previous?.verifiedAt ?? now : now } : {}),
      ...(status === 'failing' ? { failingSince: was === 'failing' ? previous?.failingSince ?? now : now } : {}),
      ...(problem ? { problem } : {}),
    };
    await this.checks.replaceOne({ _id: domain._id }, check, { upsert: true });
    if (changed) await this.announce(domain, check);
    return check;
  }

  /** Whether this domain holds its name (a unique insert); a holder that is not verified any more gives it up. */
  private async holdName(domain: MailDomainDoc): Promise<boolean> {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await this.owners.create({ _id: domain.name, domainId: domain._id, orgId: domain.orgId, at: new Date() });
        return true;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      const holder = await this.owners.findById(domain.name).lean();
      if (!holder) continue;
      if (holder.domainId === domain._id) return true;
      const standing = await this.checks.findById(holder.domainId).lean();
      const holderExists = await this.domains.exists({ _id: holder.domainId });
      if (holderExists && standing?.status === 'verified') return false;
      await this.owners.deleteOne({ _id: domain.name, domainId: holder.domainId });
    }
    return false;
  }

  private async announce(domain: MailDomainDoc, check: DomainCheckDoc): Promise<void> {
    const type = check.status === 'verified' ? 'domain.verified' as const : 'domain.failing' as const;
    const event: DomainEventDoc = {
      _id: `${domain._id}.${check.changes}`, orgId: domain.orgId, domainId: domain._id, type, at: check.checkedAt, undispatched: true,
      data: {
        domainId: domain._id, domain: domain.name, status: check.status,
        ...(type === 'domain.failing' ? { records: check.records.filter((r) => r.required && r.status !== 'ok').map((r) => ({ purpose: r.purpose, name: r.name, status: r.status, found: r.found })) } : {}),
      },
    };
    try {
      await this.events.create(event);
    } catch (err) {
      if (isDuplicateKey(err)) return; // another process saw the same change and announces it
      throw err;
    }
    const verified = type === 'domain.verified';
    await this.deps.logs.record({
      orgId: domain.orgId, action: verified ? 'mail.domain_verified' : 'mail.domain_failing', category: 'mail', severity: verified ? 'info' : 'warning',
      description: verified ? `Mail domain ${domain.name} verified: its addresses send and receive` : `Mail domain ${domain.name} is failing its DNS check: its addresses neither send nor receive until it is fixed`,
      targetType: 'mail_domain', targetId: domain._id,
    });
    this.deps.log.info({ domainId: domain._id, status: check.status }, verified ? 'mail domain verified' : 'mail domain failing');
    await this.dispatch(event);
  }

  private async dispatch(event: DomainEventDoc): Promise<void> {
    try {
      await this.deps.onEvent(event);
      await this.events.updateOne({ _id: event._id }, { $unset: { undispatched: 1 } });
    } catch (err) {
      this.deps.log.warn({ err: (err as Error).message, eventId: event._id }, 'domain event dispatch deferred to the outbox sweep');
    }
  }

  /** The outbox: events recorded more than `olderThanMs` ago and not handed over, handed over. */
  async redispatch(olderThanMs: number): Promise<number> {
    const pending = await this.events.find({ undispatched: true, at: { $lt: new Date(Date.now() - olderThanMs) } }).sort({ at: 1 }).limit(100).lean();
    for (const event of pending) await this.dispatch(event);
    return pending.length;
  }

  /**
   * The scheduled re-check: every domain once per MAIL_DOMAIN_CHECK_EVERY_MS across the deployment (a
   * unique claim per domain and period, so N processes check each domain once). Returns how many it checked.
   */
  async recheckDue(shouldStop: () => boolean = () => false): Promise<number> {
    const every = this.deps.config.MAIL_DOMAIN_CHECK_EVERY_MS;
    const period = Math.floor(Date.now() / every);
    const periodStart = new Date(period * every);
    let checked = 0;
    let after = '';
    for (;;) {
      // Ids first, and the batch's last checks in one read: a round in which nothing is due (most rounds,
      // in every process) claims nothing and reads no domain whole.
      const batch = (await this.domains.find({ _id: { $gt: after } }, { _id: 1 }).sort({ _id: 1 }).limit(100).lean()).map((d) => d._id);
      const fresh = new Set((await this.checks.find({ _id: { $in: batch }, checkedAt: { $gte: periodStart } }, { _id: 1 }).lean()).map((c) => c._id));
      for (const id of batch.filter((d) => !fresh.has(d))) {
        if (shouldStop()) return checked;
        try {
          await this.checkClaims.insertOne({ _id: `${id}:${period}`, at: new Date() });
        } catch (err) {
          if (isDuplicateKey(err)) continue;
          throw err;
        }
        const domain = await this.domains.findById(id).lean();
        if (!domain) continue; // deleted meanwhile
        await this.check(domain);
        checked++;
      }
      if (batch.length < 100) break;
      after = batch.at(-1)!;
    }
    if (checked) await this.checkClaims.deleteMany({ at: { $lt: new Date(Date.now() - 2 * every) } });
    return checked;
  }

  /** Runs recheckDue every minute (or MAIL_DOMAIN_CHECK_EVERY_MS if shorter); returns the stop function. */
  startRechecks(): () => Promise<void> {
    let stopped = false;
    const stop = startRounds({
      everyMs: Math.min(this.deps.config.MAIL_DOMAIN_CHECK_EVERY_MS, 60_000),
      runNow: true,
      round: () => this.recheckDue(() => stopped),
      onError: (err) => this.deps.log.error({ err: err.message }, 'mail domain re-check failed; the next round tries again'),
    });
    return async () => {
      stopped = true;
      await stop();
    };
  }

  // --- addresses -----------------------------------------------------------------------------------

  /** An address on a verified domain of the org, for one of its identities (the caller checked it is the org's). */
  async addAddress(orgId: string, domainId: string, local: string, identityId: string): Promise<MailAddressDoc> {
    const domain = await this.owned(orgId, domainId);
    const check = await this.checks.findById(domainId).lean();
    if (check?.status !== 'verified') {
      throw new AppError(409, 'domain_not_verified', `${domain.name} is not verified (${check?.status ?? 'pending'}): publish its records and check it (GET /v0/domains/${domainId}) first`);
    }
    const address: MailAddressDoc = { _id: `${local}@${domain.name}`, identityId, orgId, domainId, createdAt: new Date() };
    try {
      await this.addresses.create(address);
    } catch (err) {
      if (isDuplicateKey(err)) throw conflict(`${address._id} is taken`);
      throw err;
    }
    await this.deps.logs.record({
      orgId, identityId, action: 'mail.address_added', category: 'mail', description: `Address ${address._id} added`, targetType: 'mail_address', targetId: address._id,
    });
    return address;
  }

  async removeAddress(orgId: string, domainId: string, address: string, onlyIdentity?: string): Promise<void> {
    const result = await this.addresses.deleteOne({ _id: address.toLowerCase(), domainId, orgId, ...(onlyIdentity ? { identityId: onlyIdentity } : {}) });
    if (!result.deletedCount) throw notFound('Address not found');
    await this.deps.logs.record({ orgId, action: 'mail.address_removed', category: 'mail', description: `Address ${address} removed`, targetType: 'mail_address', targetId: address });
  }

  /** Addresses on a domain: every one (`identityId` undefined), or one identity's. */
  async addressesOn(orgId: string, domainId: string, identityId?: string): Promise<MailAddressDoc[]> {
    await this.owned(orgId, domainId);
    return this.addresses.find({ domainId, ...(identityId ? { identityId } : {}) }).sort({ _id: 1 }).lean();
  }

  /** An identity's addresses on custom domains, with whether each can be used now. */
  async addressesOf(identityId: string): Promise<(MailAddressDoc & { usable: boolean })[]> {
    const addresses = await this.addresses.find({ identityId }).sort({ _id: 1 }).lean();
    const verified = await this.verifiedIds(addresses.map((a) => a.domainId));
    return addresses.map((a) => ({ ...a, usable: verified.has(a.domainId) }));
  }

  private async verifiedIds(domainIds: string[]): Promise<Set<string>> {
    if (!domainIds.length) return new Set();
    return new Set((await this.checks.find({ _id: { $in: [...new Set(domainIds)] }, status: 'verified' }, { _id: 1 }).lean()).map((c) => c._id));
  }

  /**
   * The first of `candidates` (in their order) that is `identityId`'s address on a domain verified now,
   * in two reads whatever their number; undefined when none is.
   */
  async firstOwned(identityId: string, candidates: string[]): Promise<string | undefined> {
    const lower = candidates.map((a) => a.toLowerCase());
    if (!lower.length) return undefined;
    const owned = await this.addresses.find({ _id: { $in: lower }, identityId }).lean();
    const verified = await this.verifiedIds(owned.map((a) => a.domainId));
    const usable = new Set(owned.filter((a) => verified.has(a.domainId)).map((a) => a._id));
    return lower.find((a) => usable.has(a));
  }

  /** The identity an address on a verified custom domain belongs to; undefined for any other address. */
  async ownerOf(address: string): Promise<MailAddressDoc | undefined> {
    const found = await this.addresses.findById(address.toLowerCase()).lean();
    if (!found) return undefined;
    return (await this.verifiedIds([found.domainId])).has(found.domainId) ? found : undefined;
  }

  /** Whether `name` is a custom domain verified now (mail for it is ours to take). */
  async isVerified(name: string): Promise<boolean> {
    const holder = await this.owners.findById(name.toLowerCase()).lean();
    return !!holder && (await this.verifiedIds([holder.domainId])).has(holder.domainId);
  }

  /** The key that signs mail from a verified domain: its DKIM selector and private key; undefined otherwise. */
  async signingKey(name: string): Promise<{ domainName: string; keySelector: string; privateKey: string } | undefined> {
    const holder = await this.owners.findById(name.toLowerCase()).lean();
    if (!holder) return undefined;
    const [domain, check] = await Promise.all([this.domains.findById(holder.domainId).lean(), this.checks.findById(holder.domainId).lean()]);
    if (!domain || check?.status !== 'verified') return undefined;
    const key = domain.dkimKeys[this.signingIndex(domain, check)];
    if (!key) return undefined;
    return { domainName: domain.name, keySelector: key.selector, privateKey: this.deps.secrets.openText(key.privateKey, sealContext(domain._id, key.selector)) };
  }
}

const emptyCheck = (domain: MailDomainDoc): DomainCheckDoc => ({ _id: domain._id, orgId: domain.orgId, status: 'pending', records: [], checkedAt: new Date(0), changes: 0 });
