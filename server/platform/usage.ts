import { Schema, type Connection, type Model } from 'mongoose';
import { FERRETDB_UPDATE_STATEMENTS } from './group-commit.js';
import { findByIds } from './find-by-ids.js';

interface UsageDoc { _id: string; count: number; lastUsedAt: Date }

const schema = new Schema<UsageDoc>({ _id: String, count: { type: Number, default: 0 }, lastUsedAt: Date }, { versionKey: false });

/** How long counts gather in memory before one batched write. */
const FLUSH_EVERY_MS = 1_000;

/**
 * Usage bookkeeping (how often and when a key, identity or credential was last used), kept in documents
 * of its own. On FerretDB an update rewrites the whole document, so a usage `$inc` racing a revocation
 * or a scope change on the same document could undo it (measured: 13 of 20 rounds lost the `$set`).
 * Nothing but this class writes here; a lost increment costs a count, never a security decision.
 *
 * Counts are gathered in memory and written at most once a second in unordered bulk writes, so a
 * request never waits for, nor pays, a usage write. Reads in this process add what is not flushed yet.
 */
export class UsageTracker {
  private readonly usage: Model<UsageDoc>;
  private pending = new Map<string, { count: number; lastUsedAt: Date }>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(conn: Connection) {
    this.usage = conn.models.Usage ?? conn.model<UsageDoc>('Usage', schema, 'usage');
  }

  record(subject: string): void {
    const entry = this.pending.get(subject);
    if (entry) { entry.count += 1; entry.lastUsedAt = new Date(); } else this.pending.set(subject, { count: 1, lastUsedAt: new Date() });
    this.timer ??= setTimeout(() => { void this.flush(); }, FLUSH_EVERY_MS).unref();
  }

  /** Writes what has gathered; called by the timer and on shutdown. A failed write only loses counts. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = new Map();
    if (batch.size === 0) return this.flushing;
    const ops = [...batch].map(([_id, { count, lastUsedAt }]) => ({ updateOne: { filter: { _id }, update: { $inc: { count }, $set: { lastUsedAt } }, upsert: true } }));
    this.flushing = this.flushing.then(async () => {
      // A few statements a command: a busy second touches hundreds of keys, and FerretDB stops answering
      // altogether once about 50 statements of multi-statement updates are under way (group-commit.ts).
      for (let i = 0; i < ops.length; i += FERRETDB_UPDATE_STATEMENTS) {
        await this.usage.bulkWrite(ops.slice(i, i + FERRETDB_UPDATE_STATEMENTS), { ordered: false }).catch(() => {});
      }
    });
    return this.flushing;
  }

  /**
   * Counts as stored plus what this process has not written yet. It writes what has gathered first:
   * adding the pending counts to a read that a timer flush overtakes (the counts already taken out of
   * `pending`, their write not yet visible) would lose them, which made a count of 3 read as 0.
   */
  async read(subjects: string[]): Promise<Map<string, { count: number; lastUsedAt?: Date }>> {
    await this.flush();
    const docs = await findByIds(subjects, (id) => this.usage.findById(id).lean());
    const result = new Map<string, { count: number; lastUsedAt?: Date }>(docs.map((d) => [d._id, { count: d.count, lastUsedAt: d.lastUsedAt }]));
    for (const subject of subjects) {
      const waiting = this.pending.get(subject);
      if (!waiting) continue;
      const stored = result.get(subject);
      result.set(subject, { count: (stored?.count ?? 0) + waiting.count, lastUsedAt: waiting.lastUsedAt });
    }
    return result;
  }
}

export const keyUsage = (keyId: string) => `key:${keyId}`;
export const identityUsage = (identityId: string) => `identity:${identityId}`;
