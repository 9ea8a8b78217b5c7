import { Schema, type Connection, type Model } from 'mongoose';
import { newId } from './ids.js';
import { DayGroups, HistoryBuckets, hourOf, pageFrom, scopeOf } from './history-buckets.js';
import { afterCursor, pageOf, type Cursor } from './pagination.js';
import type { ServiceEvents } from './events.js';
import { outsideRequest, type Logger } from './logger.js';

export interface LogEntry {
  _id: string;
  orgId: string;
  identityId?: string;
  action: string;
  category: string;
  severity: 'info' | 'warning' | 'error';
  status: 'success' | 'failure';
  description: string;
  targetType?: string;
  targetId?: string;
  metadata: Record<string, unknown>;
  durationMs?: number;
  createdAt: Date;
  /** The UTC hour of createdAt, which the org's pages find it by (history-buckets.ts); absent on older entries. */
  hour?: string;
}

export type LogInput = Omit<LogEntry, '_id' | 'createdAt' | 'severity' | 'status' | 'metadata'> &
  Partial<Pick<LogEntry, 'severity' | 'status' | 'metadata'>>;

const schema = new Schema<LogEntry>({
  _id: String,
  orgId: { type: String, required: true },
  identityId: String,
  action: { type: String, required: true },
  category: { type: String, required: true },
  severity: { type: String, required: true },
  status: { type: String, required: true },
  description: { type: String, required: true },
  targetType: String,
  targetId: String,
  metadata: { type: Schema.Types.Mixed, default: {} },
  durationMs: Number,
  createdAt: { type: Date, required: true },
  hour: String,
}, { versionKey: false, minimize: false });
schema.index({ orgId: 1, createdAt: -1, _id: -1 });
// An org's entries of one hour (its pages and count), and its undated ones (hour: null).
schema.index({ orgId: 1, hour: 1 });
schema.index({ identityId: 1, createdAt: -1, _id: -1 });

/** How long entries written with `recordSoon` gather before one batched insert. */
const FLUSH_EVERY_MS = 1_000;

/** An org's activity log in the history buckets (history-buckets.ts). */
export const ACTIVITY_KIND = 'activity';
export const activityScope = (orgId: string) => scopeOf(ACTIVITY_KIND, orgId);

/**
 * The activity log every area writes to. Never put a secret in `metadata`. Entries are filed by the hour
 * (history-buckets.ts): a settled payment writes one, so a busy org's log grows as fast as its payments,
 * and its pages read one equality per hour, its count one per day.
 */
export class ActivityLog {
  private readonly entries: Model<LogEntry>;
  private readonly history: HistoryBuckets;
  /** Entries per day: an entry never changes, so a closed day's count is written once. */
  readonly days: DayGroups<{ n: number }>;
  private pending: LogEntry[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(conn: Connection, private readonly log: Logger, private readonly events?: ServiceEvents) {
    this.entries = conn.models.LogEntry ?? conn.model<LogEntry>('LogEntry', schema, 'activity_logs');
    this.history = HistoryBuckets.for(conn);
    this.days = new DayGroups<{ n: number }>(conn, this.history, ACTIVITY_KIND, {
      hour: async (orgId, hour) => [{ n: await this.entries.countDocuments({ orgId, hour }) }],
      key: () => 'all',
      // An entry never changes.
      final: () => true,
    });
  }

  async record(input: LogInput): Promise<void> {
    const entry = entryOf(input);
    await this.noteHours([entry]);
    await this.entries.create(entry);
    this.tell(input);
  }

  /** Lists the entries' hours under their orgs before they are written (once per process and hour). */
  private async noteHours(entries: LogEntry[]): Promise<void> {
    const hours = new Map(entries.map((e) => [`${e.orgId}|${e.hour}`, e]));
    await Promise.all([...hours.values()].map((e) => this.history.note(activityScope(e.orgId), e.createdAt)));
  }

  /** Every line also goes to the process's event tap (agentgate dev prints them). */
  private tell(input: LogInput): void {
    this.events?.emit({ category: input.category, line: `${input.category}: ${input.description}` });
  }

  /**
   * For lines on a hot path (one per settled payment): kept in memory and written with others in one
   * insert within a second, so the request neither waits for nor pays a write of its own. The record
   * the line describes is the authority; a crash before the flush loses only the line.
   */
  recordSoon(input: LogInput): void {
    this.pending.push(entryOf(input));
    this.tell(input);
    // The batch holds lines of many requests: its timer must not run inside the first one's request id.
    this.timer ??= outsideRequest(() => setTimeout(() => { void this.flush(); }, FLUSH_EVERY_MS).unref());
  }

  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return this.flushing;
    this.flushing = this.flushing
      .then(() => this.noteHours(batch))
      .then(() => this.entries.collection.insertMany(batch as never[], { ordered: false }))
      .then(() => {}, (err) => this.log.error({ err, entries: batch.length }, 'activity log write failed'));
    return this.flushing;
  }

  /**
   * The org's log (or one identity's entries), newest first, strictly after `cursor`: the org's hour by
   * hour, then its entries written before they carried their hour; an identity's in one query (its
   * entries are a few of the org's, and the database hands over only those).
   */
  async list(filter: { orgId: string; identityId?: string }, limit: number, cursor?: Cursor) {
    await this.flush(); // what this process logged a moment ago is part of the answer
    return pageOf(await pageFrom(this.newestFirst(filter, cursor), 0, limit + 1), limit, (entry) => ({ at: entry.createdAt, id: entry._id }));
  }

  private newestFirst(filter: { orgId: string; identityId?: string }, before?: Cursor): AsyncIterable<LogEntry> {
    const sorted = (query: Record<string, unknown>) => this.entries.find({ ...query, ...afterCursor('createdAt', before) })
      .sort({ createdAt: -1, _id: -1 }).lean().cursor({ batchSize: 200 }) as AsyncIterable<LogEntry>;
    if (filter.identityId) return sorted({ orgId: filter.orgId, identityId: filter.identityId });
    return this.history.newestFirst(activityScope(filter.orgId), {
      hour: (hour) => this.entries.find({ orgId: filter.orgId, hour }).lean() as Promise<LogEntry[]>,
      undated: () => sorted({ orgId: filter.orgId, hour: null }),
    }, before ? { before } : {});
  }

  /** A numbered page of the org's log, newest first, and how many entries there are (the console's pages). */
  async page(orgId: string, offset: number, limit: number): Promise<{ entries: LogEntry[]; total: number }> {
    await this.flush();
    const [entries, total] = await Promise.all([pageFrom(this.newestFirst({ orgId }), offset, limit), this.count(orgId)]);
    return { entries, total };
  }

  /** The org's entries, counted by day (each closed day's count written once), the undated ones the old way. */
  private async count(orgId: string): Promise<number> {
    const byDay = await this.days.byDay(orgId, {});
    let total = 0;
    for (const groups of byDay.days.values()) for (const g of groups) total += g.n;
    if (byDay.undated) total += await this.entries.countDocuments({ orgId, hour: null });
    return total;
  }

  /** Lists the orgs whose entries include some written without their hour (HistoryBuckets.scanUndated). */
  markUndated(): Promise<number> {
    return this.history.scanUndated('activity', this.entries, activityScope);
  }
}

function entryOf(input: LogInput): LogEntry {
  const createdAt = new Date();
  return { severity: 'info', status: 'success', metadata: {}, ...input, _id: newId('log'), createdAt, hour: hourOf(createdAt) };
}

export function presentLog(entry: LogEntry) {
  return {
    id: entry._id,
    action: entry.action,
    category: entry.category,
    severity: entry.severity,
    status: entry.status,
    description: entry.description,
    targetType: entry.targetType ?? null,
    targetId: entry.targetId ?? null,
    identityId: entry.identityId ?? null,
    metadata: entry.metadata ?? {},
    durationMs: entry.durationMs ?? null,
    createdAt: entry.createdAt.toISOString(),
  };
}
