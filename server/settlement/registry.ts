import type { Collection, Connection } from 'mongoose';

/** How a relayer lane is doing, as its holder reports it. */
export type LaneState = 'active' | 'starved' | 'draining';

export interface LaneReport {
  /** The relayer account, lower-case. */
  address: string;
  state: LaneState;
  /** Transactions sent from it and not yet mined. */
  inFlight: number;
}

export type ProcessRole = 'serve' | 'worker';

/**
 * One process of the deployment, written by that process alone (a heartbeat every second, and at once
 * when what it reports changes): its role, the relayer keys it was given, the lanes it holds now, and the
 * last inbox entry it posted to each lane (mailbox.ts), so a lane's holder reads only the inboxes that
 * have something for it.
 */
export interface ProcessDoc {
  _id: string;
  role: ProcessRole;
  /** Whether it accepts payments (answers buyers): serve processes do. */
  accepts: boolean;
  /** The relayer accounts it has keys for, lower-case, in configuration order (empty: it never sends). */
  pool: string[];
  lanes: LaneReport[];
  /** Settlements waiting in this process for its next transaction, and how long the oldest has waited. */
  queued: number;
  oldestQueuedMs: number;
  /** lane -> the number of the last inbox entry this process posted to it. */
  posts: Record<string, number>;
  startedAt: Date;
  heartbeatAt: Date;
  expiresAt: Date;
}

export interface RegistryView {
  /** Processes whose registration is live. */
  live: ProcessDoc[];
  /** Every registration not yet pruned, dead ones included: their inbox entries may still wait for a lane. */
  all: ProcessDoc[];
  /** Each held lane, by address: its holder (a live process) and how it is doing. */
  lanes: Map<string, LaneReport & { holder: string }>;
  /** The deployment's relayer pool as the processes with keys are configured (the first one's order). */
  pool: string[];
}

export interface RegistryOptions {
  /** A process whose heartbeat is older than this is gone (the relayer lease TTL: a dead holder's lanes free up alike). */
  ttlMs: number;
  /** Margin for clock skew between processes. */
  skewMs: number;
  heartbeatMs: number;
  /** How long a view is served before it is read again. */
  refreshMs: number;
}

/** Registrations of processes gone this long are deleted (their inboxes were drained long before). */
const PRUNE_AFTER_MS = 60 * 60_000;


/**
 * The deployment's processes, as they say themselves, in one small collection each process reads whole:
 * who accepts, who holds which relayer lane and in what state. Accepting processes route settlement work
 * by it (desk.ts), lane holders divide the pool by it (relayer-pool.ts), and operators read it in /ready.
 * Nothing here decides who may send: the leases do (relayer-leases.ts); a stale view only routes a
 * payment to a lane whose next holder will take it from the lane's inbox.
 */
export class SettlementRegistry {
  private readonly docs: Collection<ProcessDoc>;
  private cached: { at: number; view: RegistryView } | undefined;
  private refreshing: Promise<RegistryView> | undefined;
  private report: (() => Omit<ProcessDoc, '_id' | 'startedAt' | 'heartbeatAt' | 'expiresAt'>) | undefined;
  private readonly startedAt = new Date();
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> | undefined;
  private writeAgain = false;

  constructor(conn: Connection, readonly me: string, private readonly options: RegistryOptions, private readonly now: () => number = Date.now, suffix = '') {
    this.docs = conn.collection<ProcessDoc>(`settlement_processes${suffix}`) as unknown as Collection<ProcessDoc>;
  }

  /** Registers this process and keeps its registration current until `leave`. */
  async join(report: NonNullable<SettlementRegistry['report']>): Promise<void> {
    this.report = report;
    await this.write();
    this.timer = setInterval(() => this.publishSoon(), this.options.heartbeatMs);
    this.timer.unref();
  }

  /** Writes this process's registration now (what it reports changed): one write at a time, the latest state last. */
  publishSoon(): void {
    if (!this.report) return;
    if (this.writing) { this.writeAgain = true; return; }
    this.writing = this.write().catch(() => { /* the next heartbeat tries again; a lane's lease, not this, says who may send */ })
      .finally(() => {
        this.writing = undefined;
        if (this.writeAgain) { this.writeAgain = false; this.publishSoon(); }
      });
  }

  private async write(): Promise<void> {
    const now = this.now();
    await this.docs.updateOne({ _id: this.me }, {
      $set: { ...this.report!(), startedAt: this.startedAt, heartbeatAt: new Date(now), expiresAt: new Date(now + this.options.ttlMs) },
    }, { upsert: true });
  }

  /** Marks this process gone at once (a graceful stop), so no one routes to it or counts it in the pool's division. */
  async leave(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.report = undefined;
    await this.writing;
    // Expired by more than the skew margin already: no process counts it live from now on.
    await this.docs.updateOne({ _id: this.me }, { $set: { lanes: [], expiresAt: new Date(this.now() - this.options.skewMs) } }).catch(() => {});
  }

  /**
   * The view, read again in the background once it is `refreshMs` old; one older than ten times that (a
   * process idle for a while) is read before it is returned.
   */
  async current(): Promise<RegistryView> {
    const age = this.cached ? this.now() - this.cached.at : Infinity;
    if (age > this.options.refreshMs * 10) return this.refresh();
    if (age > this.options.refreshMs) void this.refresh().catch(() => {});
    return this.cached!.view;
  }

  /** The last view read, however old, or undefined before the first read (for /ready and metrics). */
  lastView(): RegistryView | undefined {
    return this.cached?.view;
  }

  /** Reads the registry now (concurrent callers share one read). */
  refresh(): Promise<RegistryView> {
    this.refreshing ??= this.read().finally(() => { this.refreshing = undefined; });
    return this.refreshing;
  }

  private async read(): Promise<RegistryView> {
    const now = this.now();
    const all = await this.docs.find({}).toArray();
    const stale = all.filter((d) => d.expiresAt.getTime() < now - PRUNE_AFTER_MS);
    if (stale.length) void this.docs.deleteMany({ expiresAt: { $lt: new Date(now - PRUNE_AFTER_MS) } }).catch(() => {});
    const kept = all.filter((d) => !stale.includes(d));
    const live = kept.filter((d) => d.expiresAt.getTime() + this.options.skewMs > now).sort((a, b) => (a._id < b._id ? -1 : 1));
    const lanes = new Map<string, LaneReport & { holder: string }>();
    for (const p of live) for (const lane of p.lanes ?? []) lanes.set(lane.address, { ...lane, holder: p._id });
    const pool = live.find((p) => p.pool.length > 0)?.pool ?? [];
    const view = { live, all: kept, lanes, pool };
    this.cached = { at: now, view };
    return view;
  }
}
