import { Schema, type Connection, type Model } from 'mongoose';
import { generateApiKey, hashApiKey, tierOf, type KeyTier } from '../keys.js';
import { newId } from '../ids.js';
import { keyUsage, type UsageTracker } from '../usage.js';
import { TtlCache } from '../ttl-cache.js';
import type { ChangeFeed } from '../change-feed.js';

export interface ApiKeyDoc {
  _id: string;
  hash: string;
  prefix: string;
  tier: KeyTier;
  orgId: string;
  userId?: string;
  identityId?: string;
  name?: string;
  createdAt: Date;
  revokedAt?: Date;
}

const schema = new Schema<ApiKeyDoc>({
  _id: String,
  hash: { type: String, required: true, unique: true },
  prefix: { type: String, required: true },
  tier: { type: String, required: true },
  orgId: { type: String, required: true, index: true },
  userId: String,
  identityId: { type: String, index: true },
  name: String,
  createdAt: { type: Date, required: true },
  revokedAt: Date,
}, { versionKey: false });

export interface IssuedKey { keyId: string; rawKey: string; prefix: string }

/**
 * Issues, resolves and revokes bearer keys of every tier. Only hashes are stored. Resolved keys are served
 * from memory for up to `cacheTtlMs`; a revocation reaches every process through the change feed within
 * one poll, so the TTL only matters while the feed cannot be read.
 */
export class ApiKeyService {
  private readonly keys: Model<ApiKeyDoc>;
  private readonly lastTouched = new Map<string, number>();
  /** Live keys by hash (unknown keys are not cached, so guessing fills no memory). */
  private readonly live: TtlCache<ApiKeyDoc>;

  constructor(conn: Connection, private readonly usage: UsageTracker, private readonly changes: ChangeFeed, cacheTtlMs = 0) {
    this.keys = conn.models.ApiKey ?? conn.model<ApiKeyDoc>('ApiKey', schema, 'api_keys');
    this.live = new TtlCache(cacheTtlMs);
    changes.on('api-key', (keyId) => this.live.deleteWhere((key) => key._id === keyId));
    changes.on('identity-keys', (identityId) => this.live.deleteWhere((key) => key.identityId === identityId));
    changes.onReset(() => this.live.deleteWhere(() => true));
  }

  async issue(tier: KeyTier, owner: { orgId: string; userId?: string; identityId?: string; name?: string }): Promise<IssuedKey> {
    const { rawKey, hash, prefix } = generateApiKey(tier);
    const keyId = newId('key');
    await this.keys.create({ _id: keyId, hash, prefix, tier, ...owner, createdAt: new Date() });
    return { keyId, rawKey, prefix };
  }

  /** The live key behind a raw bearer token, or null. Unknown prefix, unknown hash and revoked keys look alike. */
  async resolve(rawKey: string): Promise<ApiKeyDoc | null> {
    if (!tierOf(rawKey) || rawKey.length > 200) return null;
    const hash = hashApiKey(rawKey);
    // Only live keys are kept; concurrent lookups of one key share one read.
    const key = await this.live.through(hash, async () => (await this.keys.findOne({ hash }).lean()) as ApiKeyDoc, (found) => Boolean(found && !found.revokedAt));
    return key && !key.revokedAt ? key : null;
  }

  /**
   * The live key behind a token when this process has it cached (null: the token cannot be a key);
   * undefined when only `resolve` can tell. Lets a hot path answer without a promise.
   */
  atHand(rawKey: string): ApiKeyDoc | null | undefined {
    if (!tierOf(rawKey) || rawKey.length > 200) return null;
    const key = this.live.get(hashApiKey(rawKey));
    return key && !key.revokedAt ? key : undefined;
  }

  /** Records use outside the key document (see UsageTracker), at most once a minute per key and process. */
  touch(keyId: string): void {
    const now = Date.now();
    if (now - (this.lastTouched.get(keyId) ?? 0) < 60_000) return;
    if (this.lastTouched.size > 10_000) this.lastTouched.clear();
    this.lastTouched.set(keyId, now);
    this.usage.record(keyUsage(keyId));
  }

  /** Refused here at once, and in every other process within one change-feed poll. */
  async revoke(keyId: string): Promise<void> {
    await this.keys.updateOne({ _id: keyId, revokedAt: null }, { $set: { revokedAt: new Date() } });
    await this.changes.publish('api-key', keyId);
  }

  async revokeAllFor(filter: { identityId: string }): Promise<void> {
    await this.keys.updateMany({ ...filter, revokedAt: null }, { $set: { revokedAt: new Date() } });
    await this.changes.publish('identity-keys', filter.identityId);
  }

  async list(filter: { orgId: string; tier: KeyTier }): Promise<ApiKeyDoc[]> {
    return this.keys.find(filter).sort({ createdAt: -1 }).lean();
  }

  async findOwned(keyId: string, orgId: string, tier: KeyTier): Promise<ApiKeyDoc | null> {
    return this.keys.findOne({ _id: keyId, orgId, tier }).lean();
  }
}
