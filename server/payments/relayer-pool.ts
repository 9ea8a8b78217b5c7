import { formatEther, type PrivateKeyAccount } from 'viem';
import type { ChainService } from '../chain/chain-service.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { BlockClock } from './block-clock.js';
import { RelayerLane, shortReason, type LaneOptions } from './relayer.js';
import type { HeldLease, RelayerLeases } from './relayer-leases.js';
import { shuffled } from '../platform/random-order.js';

export interface RelayerPoolOptions {
  /** The deployment's relayer accounts: every process is given the same list and they share it out. */
  accounts: PrivateKeyAccount[];
  /** Leases in the database; without them this process uses every account (one process alone: tools, unit tests). */
  leases?: RelayerLeases;
  /** How often leases are renewed and the pool rebalanced. */
  heartbeatMs: number;
  /** How long a lane may take to finish its transactions before its lease is handed over. */
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
  /** Why this process cannot settle, or why some of its accounts cannot: for /ready and the log. */
  problems: string[];
  /** A settling process that holds no lease at all (every account is leased by other processes). */
  leaseless: boolean;
}

/**
 * The relayer accounts this process may send from. Every process of a deployment is configured with the
 * same pool (RELAYER_PRIVATE_KEY and RELAYER_PRIVATE_KEYS) and they divide it among themselves through
 * leases in the database: each takes its fair share (the pool divided by the live processes, rounded up),
 * a process holding more than its share while another holds too few hands one over after its
 * transactions are mined, and the accounts of a process that died are taken over once its leases expire.
 * The next holder reads the nonce from the chain, so nobody ever sends two transactions with one nonce.
 */
export class RelayerPool {
  private readonly held = new Map<string, Held>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> = Promise.resolve();
  private started = false;
  private lastProblem: string | undefined;
  private readonly log: Logger;

  constructor(private readonly chain: ChainService, private readonly clock: BlockClock, private readonly options: RelayerPoolOptions) {
    this.log = options.log;
    options.metrics.relayerPool.set(this.poolAddresses().length);
  }

  /** Takes this process's share of the pool (awaited: a server starts settling with its leases) and keeps it. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.clock.start();
    await this.runTick();
    this.timer = setInterval(() => { void this.runTick(); }, this.options.heartbeatMs);
    this.timer.unref();
    // Renewals have a loop of their own, checked often and never queued behind a slow rebalancing round:
    // a lease renewed late is a lease another process may take.
    if (this.options.leases) {
      this.renewTimer = setInterval(() => { void this.runRenewals(); }, Math.max(100, Math.floor(this.options.heartbeatMs / 4)));
      this.renewTimer.unref();
    }
  }

  private renewTimer: NodeJS.Timeout | undefined;
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

  status(): PoolStatus {
    const poolSize = this.poolAddresses().length;
    const active = this.lanes().filter((l) => l.state === 'active' && l.canSendNow()).map((l) => l.address);
    const problems: string[] = [];
    if (!this.started) problems.push('this process does not settle (not started as a server)');
    else if (this.held.size === 0) problems.push(`no relayer account is free for this process: all ${poolSize} of the pool are leased by other processes (give every process a key: add keys to RELAYER_PRIVATE_KEYS)`);
    for (const h of this.held.values()) {
      if (h.lane.state === 'starved') problems.push(`relayer ${h.lane.address} is out of gas: ${h.lane.problem ?? 'fund it'}`);
      else if (!h.lane.canSendNow() && h.lane.state === 'active') problems.push(`relayer ${h.lane.address}: the lease could not be renewed (database unreachable?)`);
    }
    return { poolSize, active, problems, leaseless: this.started && this.held.size === 0 };
  }

  /** Finishes in-flight transactions (bounded), hands every lease back and leaves the pool. */
  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    if (this.timer) clearInterval(this.timer);
    if (this.renewTimer) clearInterval(this.renewTimer);
    await this.ticking;
    await this.renewing;
    await Promise.all([...this.held.values()].map((h) => this.handOver(h, 'shutdown')));
    await this.options.leases?.leaveMembership().catch(() => {});
    this.clock.stop();
  }

  private poolAddresses(): string[] {
    return this.options.accounts.map((a) => a.address.toLowerCase());
  }

  private tickRunning = false;

  private runTick(): Promise<void> {
    if (this.tickRunning) return this.ticking;
    this.tickRunning = true;
    this.ticking = this.tick().catch((err) => {
      this.log.error({ err: shortReason(err) }, 'relayer lease round failed; retrying');
    }).finally(() => { this.tickRunning = false; });
    return this.ticking;
  }

  private async tick(): Promise<void> {
    const leases = this.options.leases;
    if (!leases) await this.useEveryAccount();
    else {
      await leases.heartbeatMember();
      await this.runRenewals();
      await this.rebalance(leases);
    }
    await Promise.all([...this.held.values()].map((h) => h.lane.refreshBalance().catch(() => {})));
    this.options.metrics.leasesHeld.set(this.held.size);
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
    try {
      renewed = await leases.renew(h.lease!);
    } catch (err) {
      // The lease keeps its old validity; past it the lane stops sending by itself.
      this.log.warn({ relayer: address, err: shortReason(err) }, 'relayer lease not renewed');
      return;
    }
    if (Date.now() - started > this.options.heartbeatMs) this.log.warn({ relayer: address, ms: Date.now() - started }, 'relayer lease renewal was slow (database under load?)');
    if (renewed) { h.lease = renewed; return; }
    this.log.error({ relayer: address, generation: h.lease!.generation }, 'relayer lease lost to another process (heartbeat too late); stopped sending from it');
    this.held.delete(address);
    h.unsubscribe?.();
    h.lane.stop('lease lost');
  }

  private async rebalance(leases: RelayerLeases): Promise<void> {
    const addresses = this.poolAddresses();
    const newest = await leases.newest(addresses);
    const members = Math.max(1, await leases.liveMembers());
    const share = Math.ceil(addresses.length / members);
    const mine = [...this.held.values()].filter((h) => !h.draining).length;
    if (mine < share) {
      const free = shuffled(addresses.filter((a) => !this.held.has(a) && leases.isFree(newest.get(a))));
      for (const address of free.slice(0, share - mine)) {
        const lease = await leases.acquire(address, newest.get(address));
        if (!lease) continue;
        const account = this.options.accounts.find((a) => a.address.toLowerCase() === address)!;
        this.log.info({ relayer: account.address, generation: lease.generation, share, members }, 'relayer lease acquired');
        await this.openLane(account, lease);
      }
      return;
    }
    // More than our share while another live process is short and nothing is free: the process holding
    // the most (the first by name on a tie, so only one moves) hands one over. One at a time.
    if ([...this.held.values()].some((h) => h.draining)) return;
    const floor = Math.floor(addresses.length / members);
    const counts = leases.holders(newest);
    const satisfied = [...counts.values()].filter((c) => c >= floor).length;
    const anyFree = addresses.some((a) => leases.isFree(newest.get(a)));
    const most = Math.max(...counts.values());
    const iAmFirstOfMost = [...counts].filter(([, c]) => c === most).map(([holder]) => holder).sort()[0] === leases.holder;
    if (mine > share || (mine > floor && floor > 0 && !anyFree && members - satisfied > 0 && iAmFirstOfMost)) {
      const candidate = [...this.held.values()].filter((h) => !h.draining).sort((a, b) => a.lane.inFlight - b.lane.inFlight)[0];
      if (candidate) void this.handOver(candidate, 'rebalancing');
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
  }

  private async handOver(h: Held, why: string): Promise<void> {
    if (h.draining) return;
    h.draining = true;
    const drained = await h.lane.drained(this.options.drainMs ?? 30_000);
    this.held.delete(h.lane.address.toLowerCase());
    h.unsubscribe?.();
    h.lane.stop(why);
    if (h.lease) await this.options.leases!.release(h.lease).catch(() => {});
    this.log.info({ relayer: h.lane.address, why, drained }, 'relayer lease released');
    this.options.metrics.leasesHeld.set(this.held.size);
  }

  private reportProblems(): void {
    const problem = this.status().problems.join('; ') || undefined;
    if (problem === this.lastProblem) return;
    if (problem) this.log.warn({ problem, balances: this.allLanes().map((l) => ({ relayer: l.address, eth: l.balance === undefined ? null : formatEther(l.balance) })) }, 'settlement degraded');
    else if (this.lastProblem) this.log.info({ active: this.status().active }, 'settlement available again');
    this.lastProblem = problem;
  }
}
