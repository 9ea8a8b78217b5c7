import { Schema, type Connection, type Model } from 'mongoose';
import { generateApiKey, hashApiKey, tierOf, type KeyTier } from '../keys.js';
import { newId } from '../ids.js';

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
  lastUsedAt?: Date;
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
  lastUsedAt: Date,
  revokedAt: Date,
}, { versionKey: false });

export interface IssuedKey { keyId: string; rawKey: string; prefix: string }

/** Issues, resolves and revokes bearer keys of every tier. Only hashes are stored. */
export class ApiKeyService {
  private readonly keys: Model<ApiKeyDoc>;

  constructor(conn: Connection) {
    this.keys = conn.models.ApiKey ?? conn.model<ApiKeyDoc>('ApiKey', schema, 'api_keys');
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
    const key = await this.keys.findOne({ hash: hashApiKey(rawKey) }).lean();
    if (!key || key.revokedAt) return null;
    return key;
  }

  /**
   * Records use, at most once a minute per key: the write is off the request path, but a write per
   * request would still load the database for a timestamp nobody reads to the second.
   */
  touch(key: Pick<ApiKeyDoc, '_id' | 'lastUsedAt'>): void {
    if (key.lastUsedAt && Date.now() - key.lastUsedAt.getTime() < 60_000) return;
    this.keys.updateOne({ _id: key._id }, { $set: { lastUsedAt: new Date() } }).catch(() => {});
  }

  async revoke(keyId: string): Promise<void> {
    await this.keys.updateOne({ _id: keyId, revokedAt: null }, { $set: { revokedAt: new Date() } });
  }

  async revokeAllFor(filter: { identityId: string }): Promise<void> {
    await this.keys.updateMany({ ...filter, revokedAt: null }, { $set: { revokedAt: new Date() } });
  }

  async list(filter: { orgId: string; tier: KeyTier }): Promise<ApiKeyDoc[]> {
    return this.keys.find(filter).sort({ createdAt: -1 }).lean();
  }

  async findOwned(keyId: string, orgId: string, tier: KeyTier): Promise<ApiKeyDoc | null> {
    return this.keys.findOne({ _id: keyId, orgId, tier }).lean();
  }
}
