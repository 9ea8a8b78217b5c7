import { Schema, type Connection, type Model } from 'mongoose';
import { newId } from '../platform/ids.js';

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

/** The activity log every area writes to. Never put a secret in `metadata`. */
export class ActivityLog {
  private readonly entries: Model<LogEntry>;

  constructor(conn: Connection) {
    this.entries = conn.models.LogEntry ?? conn.model<LogEntry>('LogEntry', schema, 'activity_logs');
  }

  async record(input: LogInput): Promise<void> {
    await this.entries.create({ severity: 'info', status: 'success', metadata: {}, ...input, _id: newId('log'), createdAt: new Date() });
  }

  async list(filter: { orgId: string; identityId?: string }, limit: number): Promise<LogEntry[]> {
    const query = filter.identityId ? { orgId: filter.orgId, identityId: filter.identityId } : { orgId: filter.orgId };
    return this.entries.find(query).sort({ createdAt: -1, _id: -1 }).limit(limit).lean();
  }
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
