import type { Connection, Model } from 'mongoose';
import type { Config } from '../platform/config.js';
import type { ApiKeyService } from '../platform/auth/api-keys.js';
import { DEFAULT_IDENTITY_SCOPES } from '../platform/auth/scopes.js';
import { newIdentityId } from '../platform/ids.js';
import { afterCursor, pageOf, type Cursor } from '../platform/pagination.js';
import type { ActivityLog } from '../platform/activity-log.js';
import { identityUsage, type UsageTracker } from '../platform/usage.js';
import { conflict, notFound, isDuplicateKey } from '../platform/errors.js';
import { identitySchema, type IdentityDoc } from './identity-model.js';
import { TtlCache } from '../platform/ttl-cache.js';
import type { ChangeFeed } from '../platform/change-feed.js';
import { inboxAddress, randomSlug } from './names.js';

export interface CreatedIdentity {
  identity: IdentityDoc;
  rawKey: string;
}


/** Identities of an org: creation with a fresh inbox and key, listing, rename, scopes, revoke, rotate. */
export class IdentityService {
  readonly model: Model<IdentityDoc>;
  /**
   * Live identities, read on every identity-key request (AUTH_CACHE_TTL_MS). A change is published on the
   * change feed, which drops the copy here at once and in every other process within one poll.
   */
  private readonly live: TtlCache<IdentityDoc | null>;

  constructor(conn: Connection, private readonly config: Config, private readonly keys: ApiKeyService, private readonly logs: ActivityLog, private readonly usage: UsageTracker, private readonly changes: ChangeFeed) {
    this.model = conn.models.Identity ?? conn.model<IdentityDoc>('Identity', identitySchema, 'identities');
    this.live = new TtlCache(config.AUTH_CACHE_TTL_MS);
    changes.on('identity', (identityId) => this.live.delete(identityId));
    changes.onReset(() => this.live.deleteWhere(() => true));
  }

  async create(owner: { orgId: string; userId: string }, options: { name?: string; displayName?: string } = {}): Promise<CreatedIdentity> {
    const identityId = newIdentityId();
    const key = await this.keys.issue('identity', { ...owner, identityId });
    // The inbox address is random; a collision on the unique index simply draws again.
    for (let attempt = 0; ; attempt++) {
      const slug = randomSlug();
      const name = options.name ?? slug;
      try {
        const identity = await this.model.create({
          _id: identityId, ...owner, name, displayName: options.displayName ?? name,
          emailAddress: inboxAddress(slug, this.config.MAIL_DOMAIN), scopes: [...DEFAULT_IDENTITY_SCOPES],
          keyId: key.keyId, apiKeyPrefix: key.prefix, createdAt: new Date(),
        });
        await this.logs.record({
          orgId: owner.orgId, identityId, action: 'identity.created', category: 'identity',
          description: `Identity ${name} created`, targetType: 'identity', targetId: identityId,
          metadata: { emailAddress: identity.emailAddress },
        });
        return { identity: identity.toObject(), rawKey: key.rawKey };
      } catch (err) {
        if (!isDuplicateKey(err) || attempt >= 5) throw err;
      }
    }
  }

  async liveScopes(identityId: string): Promise<string[] | null> {
    return (await this.getLive(identityId))?.scopes ?? null;
  }

  recordUse(identityId: string): void {
    this.usage.record(identityUsage(identityId));
  }

  async usageOf(identityIds: string[]) {
    return this.usage.read(identityIds.map(identityUsage));
  }

  /** A live identity of this org; another org's or a revoked identity is simply not found. */
  async getOwned(orgId: string, identityId: string): Promise<IdentityDoc> {
    const identity = await this.model.findOne({ _id: identityId, orgId, revokedAt: null }).lean();
    if (!identity) throw notFound('Identity not found');
    return identity;
  }

  /**
   * Concurrent misses share one read (TtlCache.through): when the entry expires under load, the requests
   * in flight cost one `findOne`, not one each (50 clients on one key sent 50 every AUTH_CACHE_TTL_MS,
   * queued behind each other in the bounded connection pool). A revoked or unknown identity is not kept.
   */
  getLive(identityId: string): Promise<IdentityDoc | null> {
    return this.live.through(identityId, async () => this.model.findOne({ _id: identityId, revokedAt: null }).lean(), (found) => found !== null);
  }

  async findLiveByEmail(emailAddress: string): Promise<IdentityDoc | null> {
    return this.model.findOne({ emailAddress: emailAddress.toLowerCase(), revokedAt: null }).lean();
  }

  async list(orgId: string, limit: number, cursor?: Cursor) {
    const rows = await this.model.find({ orgId, revokedAt: null, ...afterCursor('createdAt', cursor) })
      .sort({ createdAt: -1, _id: -1 }).limit(limit + 1).lean();
    return pageOf(rows, limit, (row) => ({ at: row.createdAt, id: row._id }));
  }

  async listAll(orgId: string): Promise<IdentityDoc[]> {
    return this.model.find({ orgId, revokedAt: null }).sort({ createdAt: 1, _id: 1 }).lean();
  }

  async update(orgId: string, identityId: string, change: { name?: string; displayName?: string; addScopes?: string[]; removeScopes?: string[] }): Promise<IdentityDoc> {
    // Compare-and-set on the scope list, so two admins changing scopes at once never undo each other on
    // MongoDB (FerretDB 1.x does not make the compare-and-set atomic; see docs/operators/ferretdb.md).
    let current!: IdentityDoc;
    let updated: IdentityDoc | null = null;
    for (let attempt = 0; !updated; attempt++) {
      if (attempt === 10) throw conflict('The identity changed concurrently too often; retry');
      current = await this.getOwned(orgId, identityId);
      const scopes = new Set(current.scopes);
      for (const s of change.addScopes ?? []) scopes.add(s);
      for (const s of change.removeScopes ?? []) scopes.delete(s);
      const set: Partial<IdentityDoc> = { scopes: [...scopes] };
      if (change.name !== undefined) set.name = change.name;
      if (change.displayName !== undefined) set.displayName = change.displayName;
      else if (change.name !== undefined && current.displayName === current.name) set.displayName = change.name;
      updated = await this.model.findOneAndUpdate({ _id: identityId, orgId, revokedAt: null, scopes: current.scopes }, { $set: set }, { returnDocument: 'after' }).lean();
      if (!updated && !(await this.model.exists({ _id: identityId, orgId, revokedAt: null }))) throw notFound('Identity not found');
    }
    await this.changes.publish('identity', identityId);
    await this.logs.record({
      orgId, identityId, action: 'identity.updated', category: 'identity', description: `Identity ${updated.name} updated`,
      targetType: 'identity', targetId: identityId,
      metadata: { previousName: current.name, name: updated.name, addScopes: change.addScopes ?? [], removeScopes: change.removeScopes ?? [] },
    });
    return updated;
  }

  /** Revocation is immediate: the identity and all its keys stop authenticating on the next request. */
  async revoke(orgId: string, identityId: string): Promise<void> {
    const identity = await this.model.findOneAndUpdate({ _id: identityId, orgId, revokedAt: null }, { $set: { revokedAt: new Date() } }).lean();
    if (!identity) throw notFound('Identity not found');
    await this.changes.publish('identity', identityId);
    await this.keys.revokeAllFor({ identityId });
    await this.logs.record({
      orgId, identityId, action: 'identity.revoked', category: 'identity', description: `Identity ${identity.name} revoked`,
      targetType: 'identity', targetId: identityId, severity: 'warning',
    });
  }

  /**
   * Issues a new identity key and revokes the old one; the old key is refused from then on. A key can be
   * replaced once: the replacement is claimed by inserting the old key's id under a unique _id, which is
   * atomic on FerretDB too (its conditional updates are not), so two concurrent rotations cannot both
   * leave a live key behind.
   */
  async rotateKey(orgId: string, identityId: string): Promise<{ rawKey: string; apiKeyPrefix: string }> {
    const identity = await this.getOwned(orgId, identityId);
    try {
      await this.model.db.collection('key_rotations').insertOne({ _id: identity.keyId as never, identityId, at: new Date() });
    } catch (err) {
      if (isDuplicateKey(err)) throw conflict('The key is being rotated by another request; retry');
      throw err;
    }
    const key = await this.keys.issue('identity', { orgId, userId: identity.userId, identityId });
    const updated = await this.model.findOneAndUpdate({ _id: identityId, orgId, revokedAt: null },
      { $set: { keyId: key.keyId, apiKeyPrefix: key.prefix } }).lean();
    if (!updated) {
      await this.keys.revoke(key.keyId); // revoked meanwhile
      throw notFound('Identity not found');
    }
    await this.keys.revoke(identity.keyId);
    await this.changes.publish('identity', identityId);
    await this.logs.record({
      orgId, identityId, action: 'identity.key_rotated', category: 'identity', description: `Key of identity ${identity.name} rotated`,
      targetType: 'identity', targetId: identityId, metadata: { apiKeyPrefix: key.prefix },
    });
    return { rawKey: key.rawKey, apiKeyPrefix: key.prefix };
  }
}
