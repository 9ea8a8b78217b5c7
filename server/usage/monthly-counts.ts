import { Schema, type Connection, type Model } from 'mongoose';
import { FERRETDB_UPDATE_STATEMENTS } from '../platform/group-commit.js';
import { monthOf, type Month } from './months.js';
import type { CountedMetric } from './metrics.js';

/** The month of what is kept rather than done (storage): one running total per org. */
export const ALL_TIME = 'all';

/**
 * One process's count of one org's metric in one month. Only the process named in the `_id` writes it,
 * and it writes its whole total (`$set`), never an increment: no update races another on any engine
 * (FerretDB loses concurrent updates of one document), and a write retried after an outage cannot count
 * twice.
 */
interface CountDoc { _id: string; orgId: string; month: string; metric: string; process: string; count: number; updatedAt: Date }

const schema = new Schema<CountDoc>({
  _id: String, orgId: { type: String, required: true }, month: { type: String, required: true }, metric: { type: String, required: true },
  process: { type: String, required: true }, count: { type: Number, required: true }, updatedAt: { type: Date, required: true },
}, { versionKey: false });
schema.index({ orgId: 1, month: 1 });
schema.index({ month: 1 });

interface Entry { orgId: string; month: string; metric: CountedMetric; total: number; written: number }

/**
 * Usage counted as it happens (facilitator calls, mail sent and received, bytes stored), per org and
 * month, across every process. A request never waits for it: each process adds in memory and writes its
 * own totals at most once a `flushEveryMs`, and on shutdown. A write that fails (the database away) is
 * retried with the newer total, so nothing is lost unless the process dies first; a SIGKILLed process
 * loses at most its last `flushEveryMs` of counts, and never counts anything twice.
 */
export class MonthlyCounts {
  private readonly model: Model<CountDoc>;
  private readonly entries = new Map<string, Entry>();
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  /** A write waiting for the one under way. */
  private queued: Promise<void> | undefined;

  constructor(conn: Connection, private readonly processId: string, private readonly flushEveryMs = 1_000) {
    this.model = conn.models.UsageCount ?? conn.model<CountDoc>('UsageCount', schema, 'usage_counts');
  }

  /** Counts `n` (negative for bytes freed) of `metric` for the org, in the month of `at`. */
  add(orgId: string, metric: CountedMetric, n = 1, at: Date = new Date()): void {
    if (n === 0) return;
    const month = metric === 'storageBytes' ? ALL_TIME : monthOf(at);
    const key = `${orgId}|${month}|${metric}`;
    let entry = this.entries.get(key);
    if (!entry) this.entries.set(key, entry = { orgId, month, metric, total: 0, written: 0 });
    entry.total += n;
    this.schedule();
  }

  private schedule(): void {
    this.timer ??= setTimeout(() => { void this.flush(); }, this.flushEveryMs).unref();
  }

  /**
   * Writes this process's totals that changed; called by the timer, near a quota and on shutdown. Calls
   * while a write waits for its turn share it (it writes the totals as they are when it starts), so a
   * burst of calls costs one write after the one under way, not one each.
   */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queued ??= this.writing.then(() => {
      this.queued = undefined;
      return this.write();
    });
    this.writing = this.queued;
    return this.queued;
  }

  private async write(): Promise<void> {
    const dirty = [...this.entries.entries()].filter(([, e]) => e.total !== e.written).map(([key, e]) => ({ key, e, total: e.total }));
    const now = new Date();
    // A few statements a command: FerretDB stops answering once about 50 statements of multi-statement
    // updates are under way (group-commit.ts).
    for (let i = 0; i < dirty.length; i += FERRETDB_UPDATE_STATEMENTS) {
      const chunk = dirty.slice(i, i + FERRETDB_UPDATE_STATEMENTS);
      try {
        await this.model.bulkWrite(chunk.map(({ key, e, total }) => ({
          updateOne: {
            filter: { _id: `${key}|${this.processId}` },
            update: { $set: { orgId: e.orgId, month: e.month, metric: e.metric, process: this.processId, count: total, updatedAt: now } },
            upsert: true,
          },
        })), { ordered: false });
        for (const { e, total } of chunk) e.written = total;
      } catch {
        this.schedule(); // written again, with whatever was added meanwhile
      }
    }
    // Past months' entries, once written, are never added to again.
    const current = monthOf(now);
    for (const [key, e] of this.entries) if (e.month !== ALL_TIME && e.month < current && e.total === e.written) this.entries.delete(key);
  }

  /**
   * The org's counts of `month` (and its storage) over every process: the others' as last written, this
   * process's as it has them now (written or not), so a read never waits for a write.
   */
  async totals(orgId: string, month: Month): Promise<Record<CountedMetric, number>> {
    const docs = await this.model.find({ orgId, month: { $in: [month, ALL_TIME] } }, { metric: 1, count: 1, process: 1, month: 1 }).lean();
    const totals: Record<CountedMetric, number> = { facilitatorCalls: 0, mailSent: 0, mailReceived: 0, storageBytes: 0 };
    for (const doc of docs) {
      if (!(doc.metric in totals)) continue;
      // This process's own documents: what it has in memory is newer (a past month's may be gone from memory).
      const mine = doc.process === this.processId ? this.entries.get(`${orgId}|${doc.month}|${doc.metric}`) : undefined;
      if (!mine) totals[doc.metric as CountedMetric] += doc.count;
    }
    for (const e of this.entries.values()) if (e.orgId === orgId && (e.month === month || e.month === ALL_TIME)) totals[e.metric] += e.total;
    return totals;
  }

  /** This process's own count of the org's metric this month (storage: all it added and freed). */
  own(orgId: string, metric: CountedMetric): number {
    return this.entries.get(`${orgId}|${metric === 'storageBytes' ? ALL_TIME : monthOf()}|${metric}`)?.total ?? 0;
  }

  /** The orgs that used anything counted in `month` (an operator's list). */
  async orgsIn(month: Month): Promise<string[]> {
    return (await this.model.distinct('orgId', { month })).sort() as string[];
  }
}
