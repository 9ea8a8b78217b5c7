import { Schema, type Connection, type Model } from 'mongoose';
import { newId } from './ids.js';
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
}, { versionKey: false, minimize: false });
schema.index({ orgId: 1, createdAt: -1, _id: -1 });
schema.index({ identityId: 1, createdAt: -1, _id: -1 });

/** How long entries written with `recordSoon` gather before one batched insert. */
const FLUSH_EVERY_MS = 1_000;

/** The activity log every area writes to. Never put a secret in `metadata`. */
export class ActivityLog {
  private readonly entries: Model<LogEntry>;
  private pending: LogEntry[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(conn: Connection, private readonly log: Logger, private readonly events?: ServiceEvents) {
    this.entries = conn.models.LogEntry ?? conn.model<LogEntry>('LogEntry', schema, 'activity_logs');
  }

  async record(input: LogInput): Promise<void> {
    await this.entries.create(entryOf(input));
    this.tell(input);
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
      .then(() => this.entries.collection.insertMany(batch as never[], { ordered: false }))
      .then(() => {}, (err) => this.log.error({ err, entries: batch.length }, 'activity log write failed'));
    return this.flushing;
  }

  async list(filter: { orgId: string; identityId?: string }, limit: number): Promise<LogEntry[]> {
    await this.flush(); // what this process logged a moment ago is part of the answer
    const query = filter.identityId ? { orgId: filter.orgId, identityId: filter.identityId } : { orgId: filter.orgId };
    return this.entries.find(query).sort({ createdAt: -1, _id: -1 }).limit(limit).lean();
  }

  /** A numbered page of the org's log, newest first, and how many entries there are (the console's pages). */
  async page(orgId: string, offset: number, limit: number): Promise<{ entries: LogEntry[]; total: number }> {
    await this.flush();
    const [entries, total] = await Promise.all([
      this.entries.find({ orgId }).sort({ createdAt: -1, _id: -1 }).skip(offset).limit(limit).lean(),
      this.entries.countDocuments({ orgId }),
    ]);
    return { entries, total };
  }
}

const entryOf = (input: LogInput): LogEntry => ({ severity: 'info', status: 'success', metadata: {}, ...input, _id: newId('log'), createdAt: new Date() });

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
