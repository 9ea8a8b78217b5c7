import type { Connection, Model } from 'mongoose';
import type { SealedSecret, SecretBox } from '../platform/secret-box.js';
import type { Meter } from '../usage/index.js';
import type { UsageTracker } from '../platform/usage.js';
import type { ActivityLog } from '../platform/activity-log.js';
import { AppError, fromZodError, notFound, isDuplicateKey } from '../platform/errors.js';
import { newId, randomHex } from '../platform/ids.js';
import { backupClaimSchema, credentialSchema, VAULT_COLLECTION, type BackupClaimDoc, type VaultCredentialDoc } from './credential-model.js';
import { normaliseData, readableData, type CredentialType, type SealedTotp } from './credential-types.js';
import { totpCode } from './totp.js';

export interface VaultOwner { orgId: string; identityId: string }

export interface PutCredentialInput {
  type: CredentialType;
  data?: unknown;
  metadata?: Record<string, unknown>;
  /** null clears an expiry; undefined keeps what is there. */
  expiresAt?: Date | null;
}

const notExpired = (now: Date) => ({ $or: [{ expiresAt: null }, { expiresAt: { $gt: now } }] });
const credentialNotFound = () => notFound('Credential not found');

/** Metadata only: what the list shows and every response carries. */
export function presentCredential(doc: VaultCredentialDoc) {
  return {
    credentialId: doc._id,
    name: doc.name,
    type: doc.type,
    metadata: doc.metadata ?? {},
    expiresAt: doc.expiresAt?.toISOString() ?? null,
    lastUsedAt: doc.lastUsedAt?.toISOString() ?? null,
    lastRotatedAt: doc.lastRotatedAt?.toISOString() ?? null,
    createdAt: doc.createdAt.toISOString(),
    updatedAt: doc.updatedAt.toISOString(),
  };
}

/**
 * An identity's credentials, each sealed under its own data key (SecretBox). Every read goes through
 * here so that expiry, lastUsedAt and the activity log cannot be skipped by a route or a tool.
 */
const vaultUsage = (credentialId: string) => `vault:${credentialId}`;

/** What a credential keeps in storage, as usage counts it: its sealed data. */
const sealedBytes = (sealed: SealedSecret): number => Buffer.byteLength(sealed.ciphertext, 'base64');

export class VaultService {
  readonly model: Model<VaultCredentialDoc>;
  private readonly claims: Model<BackupClaimDoc>;

  /** @param meter the org's storage usage: a credential's sealed bytes count, and its plan's storage quota holds. */
  constructor(conn: Connection, private readonly secrets: SecretBox, private readonly logs: ActivityLog, private readonly usage: UsageTracker, private readonly meter: Meter) {
    this.model = conn.models.VaultCredential ?? conn.model<VaultCredentialDoc>('VaultCredential', credentialSchema, VAULT_COLLECTION);
    this.claims = conn.models.VaultBackupClaim ?? conn.model<BackupClaimDoc>('VaultBackupClaim', backupClaimSchema, 'vault_backup_claims');
  }

  /** Overlays lastUsedAt from the UsageTracker. */
  private async withUsage<T extends { _id: string }>(docs: T[]): Promise<Array<T & { lastUsedAt: Date | null }>> {
    const usage = await this.usage.read(docs.map((d) => vaultUsage(d._id)));
    return docs.map((d) => ({ ...d, lastUsedAt: usage.get(vaultUsage(d._id))?.lastUsedAt ?? null }));
  }

  private context(identityId: string, credentialId: string) {
    return `vault:${identityId}:${credentialId}`;
  }

  private seal(owner: VaultOwner, credentialId: string, type: CredentialType, data: unknown) {
    const normalised = normaliseData(type, data);
    if (!normalised.ok) throw fromZodError(normalised.error, 'body.data');
    const backupCodes = type === 'TOTP' ? (normalised.value as unknown as SealedTotp).backupCodes.length : 0;
    const sealed = this.secrets.seal(JSON.stringify(normalised.value), this.context(owner.identityId, credentialId));
    return { sealed, backupCodeCount: backupCodes, backupGeneration: backupCodes > 0 ? randomHex(12) : null };
  }

  private open(doc: VaultCredentialDoc): Record<string, unknown> {
    return JSON.parse(this.secrets.openText(doc.sealed, this.context(doc.identityId, doc._id)));
  }

  private async log(owner: VaultOwner, action: string, name: string, type: string | undefined, extra: { description: string; status?: 'success' | 'failure'; metadata?: Record<string, unknown> }) {
    await this.logs.record({
      orgId: owner.orgId, identityId: owner.identityId, action, category: 'vault', description: extra.description,
      status: extra.status ?? 'success', targetType: 'credential', targetId: name,
      metadata: { name, ...(type ? { type } : {}), ...(extra.metadata ?? {}) },
    });
  }

  /** Creates or replaces `name`. Replacing the data stamps lastRotatedAt; a metadata-only write does not. */
  async put(owner: VaultOwner, name: string, input: PutCredentialInput): Promise<{ credential: VaultCredentialDoc; created: boolean }> {
    for (let attempt = 0; ; attempt++) {
      const now = new Date();
      const existing = await this.model.findOne({ identityId: owner.identityId, name }).lean();
      if (!existing) {
        if (input.data === undefined) throw new AppError(400, 'validation_error', 'body.data: is required to create a credential', { issues: [{ path: 'body.data', message: 'is required to create a credential' }] });
        const credentialId = newId('cred');
        const sealed = this.seal(owner, credentialId, input.type, input.data);
        await this.meter.enforce(owner.orgId, 'storageBytes', sealedBytes(sealed.sealed));
        try {
          const created = await this.model.create({
            _id: credentialId, ...owner, name, type: input.type, ...sealed,
            metadata: input.metadata ?? {}, expiresAt: input.expiresAt ?? null, lastRotatedAt: null, createdAt: now, updatedAt: now,
          });
          this.meter.record(owner.orgId, 'storageBytes', sealedBytes(sealed.sealed));
          await this.log(owner, 'vault.created', name, input.type, { description: `Credential ${name} stored` });
          return { credential: { ...created.toObject(), lastUsedAt: null }, created: true };
        } catch (err) {
          if (!isDuplicateKey(err) || attempt >= 3) throw err;
          continue; // another writer created it first: replace theirs instead
        }
      }
      if (input.data === undefined && input.type !== existing.type) {
        throw new AppError(400, 'validation_error', `body.data: changing the type from ${existing.type} to ${input.type} needs new data`, { issues: [{ path: 'body.data', message: 'required when the type changes' }] });
      }
      const set: Record<string, unknown> = { type: input.type, updatedAt: now };
      const resealed = input.data !== undefined ? this.seal(owner, existing._id, input.type, input.data) : undefined;
      const grown = resealed ? sealedBytes(resealed.sealed) - sealedBytes(existing.sealed) : 0;
      if (resealed) {
        await this.meter.enforce(owner.orgId, 'storageBytes', grown);
        Object.assign(set, resealed, { lastRotatedAt: now });
      }
      if (input.metadata !== undefined) set.metadata = input.metadata;
      if (input.expiresAt !== undefined) set.expiresAt = input.expiresAt;
      if (input.data !== undefined) this.forgetClaims(existing.backupGeneration);
      const updated = await this.model.findOneAndUpdate({ _id: existing._id, identityId: owner.identityId }, { $set: set }, { returnDocument: 'after' }).lean();
      if (!updated) continue; // deleted meanwhile: create afresh
      this.meter.record(owner.orgId, 'storageBytes', grown);
      await this.log(owner, 'vault.updated', name, input.type, {
        description: input.data !== undefined ? `Credential ${name} replaced` : `Credential ${name} metadata updated`,
        metadata: { dataReplaced: input.data !== undefined },
      });
      return { credential: (await this.withUsage([updated]))[0]!, created: false };
    }
  }

  async list(owner: VaultOwner): Promise<VaultCredentialDoc[]> {
    const rows = await this.withUsage(await this.model.find({ identityId: owner.identityId }).select({ sealed: 0 }).sort({ name: 1 }).lean());
    await this.log(owner, 'vault.listed', '*', undefined, { description: `Listed ${rows.length} credential(s)`, metadata: { count: rows.length } });
    return rows as VaultCredentialDoc[];
  }

  /**
   * Marks a live credential as used and returns it; an expired one is 410 (its data is not opened),
   * an unknown one 404. lastUsedAt is kept by the UsageTracker, not on the credential: on FerretDB a
   * write here could undo a concurrent replacement of the credential's data.
   */
  private async use(owner: VaultOwner, name: string, action: string): Promise<VaultCredentialDoc> {
    const now = new Date();
    const live = await this.model.findOne({ identityId: owner.identityId, name, ...notExpired(now) }).lean();
    const doc = live ? { ...live, lastUsedAt: now } : null;
    if (doc) this.usage.record(vaultUsage(doc._id));
    if (doc) return doc;
    const found = await this.model.findOne({ identityId: owner.identityId, name }).select({ sealed: 0 }).lean();
    if (!found) throw credentialNotFound();
    const expiresAt = found.expiresAt!;
    await this.log(owner, action, name, found.type, { description: `Refused access to expired credential ${name}`, status: 'failure', metadata: { reason: 'expired' } });
    throw new AppError(410, 'credential_expired', `Credential ${name} expired at ${expiresAt.toISOString()}; store new data to use it again`, { expiresAt: expiresAt.toISOString() });
  }

  async get(owner: VaultOwner, name: string) {
    const doc = await this.use(owner, name, 'vault.read');
    const data = readableData(doc.type, this.open(doc), doc.backupCodeCount - await this.backupCodesRemaining(doc));
    await this.log(owner, 'vault.read', name, doc.type, { description: `Credential ${name} read` });
    return { ...presentCredential(doc), data };
  }

  async delete(owner: VaultOwner, name: string): Promise<void> {
    const doc = await this.model.findOneAndDelete({ identityId: owner.identityId, name }).lean();
    if (!doc) throw credentialNotFound();
    this.meter.record(owner.orgId, 'storageBytes', -sealedBytes(doc.sealed));
    this.forgetClaims(doc.backupGeneration);
    await this.log(owner, 'vault.deleted', name, doc.type, { description: `Credential ${name} deleted` });
  }

  async totp(owner: VaultOwner, name: string, atMs?: number) {
    const doc = await this.use(owner, name, 'vault.totp');
    if (doc.type !== 'TOTP') throw new AppError(400, 'not_totp', `Credential ${name} is a ${doc.type}, not a TOTP credential`);
    const params = this.open(doc) as unknown as SealedTotp;
    const { code, remaining } = totpCode(params, atMs ?? Date.now());
    await this.log(owner, 'vault.totp', name, doc.type, { description: `TOTP code generated for ${name}` });
    return { code, remaining, ...(doc.backupCodeCount > 0 ? { backupCodesRemaining: await this.backupCodesRemaining(doc) } : {}) };
  }

  private async backupCodesRemaining(doc: Pick<VaultCredentialDoc, 'backupCodeCount' | 'backupGeneration'>): Promise<number> {
    if (!doc.backupGeneration) return 0;
    return Math.max(0, doc.backupCodeCount - await this.claims.countDocuments({ generation: doc.backupGeneration }));
  }

  /** Claims of a replaced or deleted set of codes can never match again; removing them is housekeeping. */
  private forgetClaims(generation: string | null): void {
    if (generation) this.claims.deleteMany({ generation }).catch(() => {});
  }

  /**
   * Hands out the next unused backup code, in order. Each code is claimed by inserting its index under
   * the set's generation id; a duplicate-key error means someone else got that one, so try the next.
   */
  async consumeBackupCode(owner: VaultOwner, name: string) {
    const doc = await this.use(owner, name, 'vault.totp_backup');
    if (doc.type !== 'TOTP') throw new AppError(400, 'not_totp', `Credential ${name} is a ${doc.type}, not a TOTP credential`);
    const exhausted = () => new AppError(409, 'no_backup_codes', `Credential ${name} has no unused backup codes left`);
    const generation = doc.backupGeneration;
    if (!generation) throw exhausted();
    let index = doc.backupCodeCount - await this.backupCodesRemaining(doc);
    for (; index < doc.backupCodeCount; index++) {
      try {
        await this.claims.create({ _id: `${generation}:${index}`, credentialId: doc._id, generation, claimedAt: new Date() });
        break;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
    }
    if (index >= doc.backupCodeCount) throw exhausted();
    const code = (this.open(doc) as unknown as SealedTotp).backupCodes[index]!;
    // Claims are contiguous from 0, so this is what is left behind this code (distinct per concurrent caller).
    const backupCodesRemaining = doc.backupCodeCount - index - 1;
    await this.log(owner, 'vault.totp_backup_used', name, doc.type, { description: `Backup code used for ${name}`, metadata: { backupCodesRemaining } });
    return { code, backupCodesRemaining };
  }
}
