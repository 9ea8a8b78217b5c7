import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Collection, Connection } from 'mongoose';

/** This process's name in the registries, the job locks, the relayer leases and the logs: host, pid and a random part (pids repeat across hosts). */
export const newProcessId = () => `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;

export interface ProcessHeartbeatDoc {
  _id: string;
  role: string;
  startedAt: Date;
  heartbeatAt: Date;
  expiresAt: Date;
}

export interface ProcessRegistryOptions {
  /** How often this process says it is alive. */
  heartbeatMs: number;
  /** A process silent this long is gone: what it held (job locks, attempt claims) is taken over. */
  ttlMs: number;
  /** Margin for clock skew between hosts, added before another process's registration counts as expired. */
  skewMs: number;
}

export const PROCESS_REGISTRY_DEFAULTS: ProcessRegistryOptions = { heartbeatMs: 1_000, ttlMs: 5_000, skewMs: 1_000 };

/** Registrations gone this long are deleted: nothing they held is still waiting for them. */
const PRUNE_AFTER_MS = 60 * 60_000;

/**
 * Every live process of the deployment (serve, worker, a one-off command), each writing its own small
 * document every second. What one process holds for a while (a job's lock, a webhook attempt's claim) names
 * its holder; another process takes it over as soon as the holder is not live here any more: within seconds
 * after a crash, at once after a graceful stop (which leaves the registry first), and never while the
 * holder is merely slow. The view of who is live is read once a second, in the background.
 */
export class ProcessRegistry {
  private readonly docs: Collection<ProcessHeartbeatDoc>;
  private readonly startedAt = new Date();
  private timer: NodeJS.Timeout | undefined;
  private live: { at: number; ids: ReadonlySet<string> } | undefined;
  private reading: Promise<ReadonlySet<string>> | undefined;
  private joined = false;
  /** When this process's last heartbeat was written. */
  private lastBeatAt = 0;

  constructor(
    conn: Connection,
    readonly id: string = newProcessId(),
    private readonly options: ProcessRegistryOptions = PROCESS_REGISTRY_DEFAULTS,
    private readonly now: () => number = Date.now,
  ) {
    this.docs = conn.collection<ProcessHeartbeatDoc>('processes') as unknown as Collection<ProcessHeartbeatDoc>;
  }

  /** Registers this process and keeps it registered until `leave`. */
  async join(role: string): Promise<void> {
    this.joined = true;
    await this.beat(role);
    // Who else is live, known from the start (liveCount answers from this view without waiting).
    await this.read().catch(() => {});
    this.timer = setInterval(() => { void this.beat(role).catch(() => { /* the next beat tries again */ }); }, this.options.heartbeatMs);
    this.timer.unref();
  }

  private async beat(role: string): Promise<void> {
    const now = this.now();
    await this.docs.updateOne({ _id: this.id }, { $set: { role, startedAt: this.startedAt, heartbeatAt: new Date(now), expiresAt: new Date(now + this.options.ttlMs) } }, { upsert: true });
    this.lastBeatAt = now;
  }

  /**
   * Whether this process may take work that others take over from the processes that are gone: joined,
   * and its last heartbeat written within the time-to-live. A process whose heartbeats cannot be written
   * (the database away, the event loop stalled) counts as gone to the others by then, so it must stop
   * taking work itself, or two processes would do the same job.
   */
  get active(): boolean {
    return this.joined && this.now() - this.lastBeatAt < this.options.ttlMs;
  }

  /** Leaves at once (a graceful stop): from now on, every process takes over what this one held, and this one takes nothing more. */
  async leave(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (!this.joined) return;
    this.joined = false;
    await this.docs.updateOne({ _id: this.id }, { $set: { expiresAt: new Date(this.now() - this.options.skewMs - 1) } }).catch(() => {});
  }

  /**
   * The ids of the live processes (this one among them while it is active now), read again in the
   * background once the view is a heartbeat old; a view older than ten heartbeats is read before it is used.
   */
  async liveIds(): Promise<ReadonlySet<string>> {
    const age = this.live ? this.now() - this.live.at : Infinity;
    const others = age > this.options.heartbeatMs * 10 ? await this.read() : this.live!.ids;
    if (age > this.options.heartbeatMs && age <= this.options.heartbeatMs * 10) void this.read().catch(() => {});
    // This process as it is now, not as it was when the view was read (a stall may have lapsed it then).
    return this.active ? new Set([...others, this.id]) : others;
  }

  /**
   * How many processes are live, this one included, as last read: at hand (no promise), for a decision
   * that may be a second late; read again in the background once the view is a heartbeat old.
   */
  liveCount(): number {
    if (!this.live || this.now() - this.live.at > this.options.heartbeatMs) void this.read().catch(() => {});
    return (this.live?.ids.size ?? 0) + 1;
  }

  /**
   * Whether `id` is a live process now. A process missing from the view is looked up afresh before it is
   * called gone: the view may be a second old, older than a process that has just joined, and what a
   * live process holds must never be taken over (it would be done twice).
   */
  async isLive(id: string): Promise<boolean> {
    if (id === this.id) return this.active;
    return (await this.liveIds()).has(id) || (await this.read()).has(id);
  }

  private read(): Promise<ReadonlySet<string>> {
    this.reading ??= (async () => {
      const now = this.now();
      const all = await this.docs.find({}, { projection: { _id: 1, expiresAt: 1 } }).toArray();
      if (all.some((d) => d.expiresAt.getTime() < now - PRUNE_AFTER_MS)) {
        void this.docs.deleteMany({ expiresAt: { $lt: new Date(now - PRUNE_AFTER_MS) } }).catch(() => {});
      }
      // The others: this process is added by liveIds as it is at each call.
      const ids = new Set(all.filter((d) => d.expiresAt.getTime() + this.options.skewMs > now && d._id !== this.id).map((d) => d._id));
      this.live = { at: now, ids };
      return ids;
    })().finally(() => { this.reading = undefined; });
    return this.reading;
  }
}
