import { Schema, type Connection, type Model } from 'mongoose';
import { TtlCache } from '../ttl-cache.js';

/** An org's own request limits, per window, set by the operator (`agentgate limits set`); unset fields take the defaults. */
export interface OrgLimitsDoc { _id: string; perKey?: number; perSellerKey?: number; perOrg?: number; updatedAt: Date }

const schema = new Schema<OrgLimitsDoc>({ _id: String, perKey: Number, perSellerKey: Number, perOrg: Number, updatedAt: { type: Date, required: true } }, { versionKey: false });

/**
 * Per-org overrides of the request limits. Read through a short cache (every request of an org looks
 * its limits up): a change reaches every process within `cacheMs`. Written whole, by the operator only.
 */
export class OrgLimits {
  private readonly model: Model<OrgLimitsDoc>;
  private readonly cache: TtlCache<OrgLimitsDoc | null>;

  constructor(conn: Connection, cacheMs: number) {
    this.model = conn.models.OrgLimits ?? conn.model<OrgLimitsDoc>('OrgLimits', schema, 'org_limits');
    this.cache = new TtlCache(cacheMs, 50_000);
  }

  /** The org's own limits (null: none), at hand when cached (no promise: most requests), else a promise of them. */
  of(orgId: string): OrgLimitsDoc | null | Promise<OrgLimitsDoc | null> {
    const cached = this.cache.get(orgId);
    return cached !== undefined ? cached : this.cache.through(orgId, () => this.model.findById(orgId).lean());
  }

  async set(orgId: string, limits: Partial<Pick<OrgLimitsDoc, 'perKey' | 'perSellerKey' | 'perOrg'>>): Promise<OrgLimitsDoc> {
    const doc = { _id: orgId, ...limits, updatedAt: new Date() };
    await this.model.replaceOne({ _id: orgId }, doc, { upsert: true });
    this.cache.delete(orgId);
    return doc;
  }

  async clear(orgId: string): Promise<boolean> {
    const { deletedCount } = await this.model.deleteOne({ _id: orgId });
    this.cache.delete(orgId);
    return deletedCount > 0;
  }

  list(): Promise<OrgLimitsDoc[]> {
    return this.model.find().sort({ _id: 1 }).limit(1000).lean();
  }
}
