import { TtlCache } from '../platform/ttl-cache.js';
import { Schema, type Connection, type Model } from 'mongoose';
import { newOrgId, newUserId } from '../platform/ids.js';
import { notFound } from '../platform/errors.js';
import type { ChangeFeed } from '../platform/change-feed.js';

export interface UserDoc { _id: string; orgId: string; userType: 'AGENT' | 'HUMAN'; name: string; email: string; createdAt: Date }
/** `admin`: made by the operator (agentgate admin grant); admin previews (team chat) are for admins only. */
export type OrgRole = 'admin' | 'member';
export interface OrgDoc { _id: string; name: string; plan: string; ownerUserId: string; createdAt: Date; role?: OrgRole }

const userSchema = new Schema<UserDoc>({
  _id: String, orgId: { type: String, required: true, index: true }, userType: { type: String, required: true },
  name: { type: String, required: true }, email: { type: String, required: true }, createdAt: { type: Date, required: true },
}, { versionKey: false });
const orgSchema = new Schema<OrgDoc>({
  _id: String, name: { type: String, required: true }, plan: { type: String, required: true },
  ownerUserId: { type: String, required: true }, createdAt: { type: Date, required: true },
  role: { type: String, enum: ['admin', 'member'] },
}, { versionKey: false });

/** Users and orgs. An agent that signs itself up is an ordinary user with userType AGENT. */
export class AccountService {
  private readonly users: Model<UserDoc>;
  private readonly orgs: Model<OrgDoc>;

  private readonly orgCache = new TtlCache<OrgDoc | null>(5_000);

  constructor(conn: Connection, private readonly changes: ChangeFeed) {
    this.users = conn.models.User ?? conn.model<UserDoc>('User', userSchema, 'users');
    this.orgs = conn.models.Org ?? conn.model<OrgDoc>('Org', orgSchema, 'orgs');
    changes.on('org', (orgId) => this.orgCache.delete(orgId));
    changes.onReset(() => this.orgCache.deleteWhere(() => true));
  }

  /** Ids are drawn up front so the org can name its owner and the user its org without a second write. */
  newIds() {
    return { userId: newUserId(), orgId: newOrgId() };
  }

  async createAgentAccount(ids: { userId: string; orgId: string }, first: { name: string; email: string }): Promise<{ user: UserDoc; org: OrgDoc }> {
    const now = new Date();
    const org = await this.orgs.create({ _id: ids.orgId, name: first.name, plan: 'FREE', ownerUserId: ids.userId, createdAt: now });
    const user = await this.users.create({ _id: ids.userId, orgId: ids.orgId, userType: 'AGENT', name: first.name, email: first.email, createdAt: now });
    return { user: user.toObject(), org: org.toObject() };
  }

  /**
   * An org (its plan, owner and role), served from memory for a few seconds: orgs are written only at
   * signup and by `agentgate admin` and `agentgate usage plan`, which publishes the change to every server process.
   */
  getOrg(orgId: string): Promise<OrgDoc | null> {
    // Concurrent misses share one read, as the key and identity caches do; an unknown org is not kept.
    // Not async itself: a promise returned from an async function costs every hit extra microtask turns.
    return this.orgCache.through(orgId, async () => this.orgs.findById(orgId).lean(), (found) => found !== null);
  }

  /** The operator's `agentgate admin grant|revoke`. Returns null for an unknown org. */
  async setRole(orgId: string, role: OrgRole): Promise<OrgDoc | null> {
    const org = await this.orgs.findByIdAndUpdate(orgId, { $set: { role } }, { new: true }).lean();
    if (org) await this.changes.publish('org', orgId);
    return org;
  }

  /** The operator's `agentgate usage plan`: the plan whose quotas (USAGE_PLANS) apply to the org. Null for an unknown org. */
  async setPlan(orgId: string, plan: string): Promise<OrgDoc | null> {
    const org = await this.orgs.findByIdAndUpdate(orgId, { $set: { plan } }, { new: true }).lean();
    if (org) await this.changes.publish('org', orgId);
    return org;
  }

  async listAdmins(): Promise<OrgDoc[]> {
    return this.orgs.find({ role: 'admin' }).lean();
  }

  async getUser(userId: string): Promise<UserDoc> {
    const user = await this.users.findById(userId).lean();
    if (!user) throw notFound('User not found');
    return user;
  }
}
