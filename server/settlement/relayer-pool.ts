import { formatEther, type PrivateKeyAccount } from 'viem';
import type { ChainService } from '../chain/chain-service.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { BlockClock } from './block-clock.js';
import { RelayerLane, shortReason, type LaneOptions } from './relayer-lane.js';
import type { HeldLease, RelayerLeases } from './relayer-leases.js';
import type { LaneReport, SettlementRegistry } from './registry.js';
import { shuffled } from '../platform/random-order.js';

export interface RelayerPoolOptions {
  /** The relayer accounts this process has keys for: every process with keys is given the same list and they share it out. */
  accounts: PrivateKeyAccount[];
  /** Leases in the database and the registry of processes; without them this process uses every account (tools, unit tests). */
  leases?: RelayerLeases;
  registry?: SettlementRegistry;
  /** How often held leases are renewed (a third of their time to live) and balances read again. */
  heartbeatMs: number;
  /** How often the division of the pool is looked at again: processes that join or leave get their share within this. */
  rebalanceMs?: number;
  /** How long a lane may take to finish its work before its lease is handed over anyway. */
  drainMs?: number;
  lane: Omit<LaneOptions, 'mayRun' | 'log' | 'metrics'>;
  log: Logger;
  metrics: Metrics;
}

interface Held { lane: RelayerLane; lease?: HeldLease; draining: boolean; unsubscribe?: () => void; renewedAt: number }

export interface PoolStatus {
  poolSize: number;
  /** Accounts this process sends from now. */
  active: string[];
  /** Why some of this process's accounts cannot send: for /ready and the log. */
  problems: string[];
}

/**
 * How many lanes each process with keys should hold: the pool divided evenly, the remainder going to the
 * processes that hold the most already (then by name), so a division that is even stays as it is and
 * every process computes the same answer from the same view.
 */
export function fairShares(poolSize: number, members: string[], holding: Map<string, number>): Map<string, number> {
  const count = Math.max(1, members.length);
  const base = Math.floor(poolSize / count);
  const extra = poolSize % count;
  const ordered = [...members].sort((a, b) => (holding.get(b) ?? 0) - (holding.get(a) ?? 0) || (a < b ? -1 : 1));
  return new Map(ordered.map((member, i) => [member, base + (i < extra ? 1 : 0)]));
}

/**
 * The relayer accounts this process may send from. Every process with keys (serve or worker) is given
 * the same pool (RELAYER_PRIVATE_KEY and RELAYER_PRIVATE_KEYS) and they divide it among themselves
 * through leases in the database: every `rebalanceMs` each reads who is registered (registry.ts) and who
 * holds what, and takes free accounts up to its fair share or hands over those above it, all at once (a
 * process that joins gets its share within a second or two, not one account per heartbeat). Accounts of
 * a process that died are taken over once its leases expire; the next holder reads the nonce from the
 * chain, so nobody ever sends two transactions with one nonce. Holding no lane takes nothing away from a
 * process: it still accepts payments and hands them to a lane's holder (desk.ts).
 */
export class RelayerPool {
  private readonly held = new Map<string, Held>();
  private timers: NodeJS.Timeout[] = [];
  private ticking: Promise<void> = Promise.resolve();
  private started = false;
  private stopping = false;
  private lastProblem: string | undefined;
  private readonly log: Logger;
  /** Called when this process takes a lane (sender.ts starts reading its inbox). */
  readonly onAcquired: Array<(address: string) => void> = [];
  /** Awaited before a lane's lease is given up (sender.ts finishes the work it took from the lane's inbox). */
  readonly beforeRelease: Array<(address: string) => Promise<void>> = [];
  /** Called when what this process holds, or whether it can send, changes (the registry, the settler). */
  readonly onChange: Array<() => void> = [];

  constructor(private readonly chain: ChainService, private readonly clock: BlockClock, private readonly options: RelayerPoolOptions) {
    this.log = options.log;
    options.metrics.relayerPool.set(this.poolAddresses().length);
  }

  /** Takes this process's share of the pool (awaited: a process starts settling with its leases) and keeps it. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    await this.runTick();
    const every = (ms: number, fn: () => void) => { const t = setInterval(fn, ms); t.unref(); this.timers.push(t); };
    every(this.options.rebalanceMs ?? this.options.heartbeatMs, () => { void this.runTick(); });
    every(this.options.heartbeatMs, () => { void this.refreshBalances(); });
    // Renewals have a loop of their own, checked often and never queued behind a slow rebalancing round:
    // a lease renewed late is a lease another process may take.
    if (this.options.leases) every(Math.max(100, Math.floor(this.options.heartbeatMs / 4)), () => { void this.runRenewals(); });
  }

  private renewing: Promise<void> | undefined;

  private runRenewals(): Promise<void> {
    // A round still under way is not stacked with another.
    this.renewing ??= this.renewHeld(this.options.leases!).catch((err) => {
      this.log.error({ err: shortReason(err) }, 'relayer lease renewal failed; retrying');
    }).finally(() => { this.renewing = undefined; });
    return this.renewing;
  }

  private lastRecheck = 0;

  /**
   * Re-reads the balance of lanes starved of gas, at most once a second: a relayer funded a moment ago
   * serves the very next request rather than the next heartbeat.
   */
  async recheckStarved(): Promise<void> {
    if (Date.now() - this.lastRecheck < 1_000) return;
    this.lastRecheck = Date.now();
    await Promise.all(this.lanes().filter((l) => l.state === 'starved').map((l) => l.refreshBalance().catch(() => {})));
  }

  why(): string {
    return this.status().problems.join('; ');
  }

  /** Lanes that may take new work now. */
  lanes(): RelayerLane[] {
    return [...this.held.values()].filter((h) => !h.draining).map((h) => h.lane);
  }

  /** Every lane of this process, draining ones included (they still follow their transactions). */
  allLanes(): RelayerLane[] {
    return [...this.held.values()].map((h) => h.lane);
  }

  /** Whether this process holds `address` and can send from it now. */
  canSendFrom(address: string): boolean {
    const h = this.held.get(address.toLowerCase());
    return !!h && !h.draining && h.lane.state === 'active' && h.lane.canSendNow();
  }

  /** What this process reports of its lanes in the registry. */
  report(): LaneReport[] {
    return [...this.held.values()].map((h) => ({
      address: h.lane.address.toLowerCase(),
      state: h.draining ? 'draining' : h.lane.state === 'starved' ? 'starved' : 'active',
      inFlight: h.lane.inFlight,
    }));
  }

  status(): PoolStatus {
    const poolSize = this.poolAddresses().length;
    const active = this.lanes().filter((l) => l.state === 'active' && l.canSendNow()).map((l) => l.address);
    const problems: string[] = [];
    for (const h of this.held.values()) {
      if (h.lane.state === 'starved') problems.push(`relayer ${h.lane.address} is out of gas: ${h.lane.problem ?? 'fund it'}`);
      else if (!h.lane.canSendNow() && h.lane.state === 'active') problems.push(`relayer ${h.lane.address}: the lease could not be renewed (database unreachable?)`);
    }
    return { poolSize, active, problems };
  }

  /** Finishes in-flight work (bounded), hands every lease back. */
  async stop(): Promise<void> {
    if (!this.started || this.stopping) return;
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    await this.ticking;
    await this.renewing;
    await Promise.all([...this.held.values()].map((h) => this.handOver(h, 'shutdown')));
  }

  private poolAddresses(): string[] {
    return this.options.accounts.map((a) => a.address.toLowerCase());
  }

  private tickRunning = false;

  private runTick(): Promise<void> {
    if (this.tickRunning || this.stopping) return this.ticking;
    this.tickRunning = true;
    this.ticking = this.tick().catch((err) => {
      this.log.error({ err: shortReason(err) }, 'relayer lease round failed; retrying');
    }).finally(() => { this.tickRunning = false; });
    return this.ticking;
  }

  private async tick(): Promise<void> {
    const { leases, registry } = this.options;
    if (!leases || !registry) await this.useEveryAccount();
    else await this.rebalance(leases, registry);
    this.options.metrics.leasesHeld.set(this.held.size);
    this.reportProblems();
  }

  private async refreshBalances(): Promise<void> {
    await Promise.all([...this.held.values()].map((h) => h.lane.refreshBalance().catch(() => {})));
    this.changed();
    this.reportProblems();
  }

  private async useEveryAccount(): Promise<void> {
    for (const account of this.options.accounts) {
      if (this.held.has(account.address.toLowerCase())) continue;
      await this.openLane(account, undefined);
    }
  }

  /**
   * Renews every held lease every half heartbeat (a sixth of its time to live; all at once, each its own
   * write): early and often, so a database that stalls for several seconds does not cost the lease.
   */
  private async renewHeld(leases: RelayerLeases): Promise<void> {
    const due = [...this.held].filter(([, h]) => h.lease && Date.now() - h.renewedAt >= this.options.heartbeatMs / 2);
    await Promise.all(due.map(([address, h]) => this.renewOne(leases, address, h)));
  }

  private async renewOne(leases: RelayerLeases, address: string, h: Held): Promise<void> {
    let renewed: HeldLease | undefined;
    const started = Date.now();
    h.renewedAt = started;
    const couldSend = h.lane.canSendNow();
    try {
      renewed = await leases.renew(h.lease!);
    } catch (err) {
      // The lease keeps its old validity; past it the lane stops sending by itself.
      this.log.warn({ relayer: address, err: shortReason(err) }, 'relayer lease not renewed');
      return;
    }
    if (Date.now() - started > this.options.heartbeatMs) this.log.warn({ relayer: address, ms: Date.now() - started }, 'relayer lease renewal was slow (database under load?)');
    if (renewed) {
      h.lease = renewed;
      // A lane that had paused for want of a renewal (a database outage) sends again.
      if (!couldSend) this.changed();
      return;
    }
    this.log.error({ relayer: address, generation: h.lease!.generation }, 'relayer lease lost to another process (heartbeat too late); stopped sending from it');
    this.held.delete(address);
    h.unsubscribe?.();
    h.lane.stop('lease lost');
    this.changed();
  }

  private async rebalance(leases: RelayerLeases, registry: SettlementRegistry): Promise<void> {
    const addresses = this.poolAddresses();
    const [view, newest] = await Promise.all([registry.refresh(), leases.newest(addresses)]);
    const members = view.live.filter((p) => p.pool.length > 0).map((p) => p._id);
    if (!members.includes(leases.holder)) members.push(leases.holder);
    const holding = leases.holders(newest);
    const shares = fairShares(addresses.length, members, holding);
    const share = shares.get(leases.holder)!;
    const mine = [...this.held.values()].filter((h) => !h.draining);
    if (mine.length < share) {
      const free = shuffled(addresses.filter((a) => !this.held.has(a) && leases.isFree(newest.get(a))));
      await Promise.all(free.slice(0, share - mine.length).map(async (address) => {
        const seen = newest.get(address);
        const lease = await leases.acquire(address, seen);
        if (!lease) return;
        const account = this.options.accounts.find((a) => a.address.toLowerCase() === address)!;
        this.log.info({ relayer: account.address, generation: lease.generation, previousHolder: seen?.holder ?? null, share, members: members.length }, 'relayer lane acquired');
        await this.openLane(account, lease);
      }));
      return;
    }
    // Above our share while another process is below its own: hand the surplus over now, every lane of it
    // at once, the least busy first. Those lanes' work goes on: the next holder reads their inboxes.
    const someoneShort = members.some((m) => m !== leases.holder && (holding.get(m) ?? 0) < shares.get(m)!);
    if (mine.length > share && someoneShort) {
      const surplus = mine.sort((a, b) => a.lane.inFlight - b.lane.inFlight).slice(0, mine.length - share);
      for (const h of surplus) void this.handOver(h, 'rebalancing');
    }
  }

  private async openLane(account: PrivateKeyAccount, lease: HeldLease | undefined): Promise<void> {
    const address = account.address.toLowerCase();
    const entry: Held = { lease, draining: false, lane: undefined as unknown as RelayerLane, renewedAt: Date.now() };
    const lane = new RelayerLane(account, this.chain, this.clock, {
      ...this.options.lane,
      mayRun: () => this.held.get(address) === entry && (entry.lease === undefined || entry.lease.validUntil > Date.now()),
      log: this.log,
      metrics: this.options.metrics,
    });
    entry.lane = lane;
    this.held.set(address, entry);
    try {
      await lane.start();
    } catch (err) {
      this.log.warn({ relayer: account.address, err: shortReason(err) }, 'relayer lane could not start (chain unreachable?); lease handed back');
      this.held.delete(address);
      lane.stop('could not start');
      if (lease) await this.options.leases!.release(lease).catch(() => {});
      return;
    }
    entry.unsubscribe = this.clock.onBlock((head) => { void lane.onBlock(head); });
    this.options.metrics.leasesHeld.set(this.held.size);
    this.changed();
    for (const hook of this.onAcquired) hook(address);
  }

  private async handOver(h: Held, why: string): Promise<void> {
    if (h.draining) return;
    h.draining = true;
    this.changed();
    const address = h.lane.address.toLowerCase();
    const started = Date.now();
    const deadline = started + (this.options.drainMs ?? 30_000);
    // The work taken from the lane's inbox is finished first (it may still need this lane), then the
    // lane's own transactions are followed to their blocks.
    await Promise.all(this.beforeRelease.map((hook) => hook(address).catch((err) => this.log.warn({ relayer: h.lane.address, err: shortReason(err) }, 'finishing a lane\'s work before its handover failed'))));
    const drained = await h.lane.drained(Math.max(0, deadline - Date.now()));
    this.held.delete(address);
    h.unsubscribe?.();
    h.lane.stop(why);
    if (h.lease) await this.options.leases!.release(h.lease).catch(() => {});
    this.log.info({ relayer: h.lane.address, why, drained, ms: Date.now() - started }, 'relayer lane released');
    this.options.metrics.leasesHeld.set(this.held.size);
    this.changed();
  }

  private changed(): void {
    for (const hook of this.onChange) {
      try { hook(); } catch { /* a listener's failure is its own */ }
    }
  }

  private reportProblems(): void {
    const problem = this.status().problems.join('; ') || undefined;
    if (problem === this.lastProblem) return;
    if (problem) this.log.warn({ problem, balances: this.allLanes().map((l) => ({ relayer: l.address, eth: l.balance === undefined ? null : formatEther(l.balance) })) }, 'settlement degraded');
    else if (this.lastProblem) this.log.info({ active: this.status().active }, 'settlement available again');
    this.lastProblem = problem;
  }
}
