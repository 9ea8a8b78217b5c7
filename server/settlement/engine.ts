import { parseGwei, type Address } from 'viem';
import type { Connection } from 'mongoose';
import type { ChainService } from '../chain/chain-service.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import { BlockClock } from './block-clock.js';
import { SettlementDesk } from './desk.js';
import { Mailbox } from './mailbox.js';
import { SettlementRegistry, type ProcessRole, type RegistryView } from './registry.js';
import { newProcessId } from '../platform/process-registry.js';
import { shortReason } from './relayer-lane.js';
import { RelayerLeases } from './relayer-leases.js';
import { RelayerPool } from './relayer-pool.js';
import { SettlementSender } from './sender.js';
import { GAS_BASE, GAS_PER_TRANSFER, Settler } from './settler.js';
import type { WorkExecutor } from './work.js';

/** The longest a process with keys waits at start-up for the block clock to know the chain's phase. */
const PHASE_WAIT_MS = 5_000;
/** How often mail and dead registrations are swept (ranges: a scan on FerretDB, so seldom). */
const HOUSEKEEPING_MS = 10 * 60_000;

/** What this process does in settlement, for /ready, the metrics and the registry. */
export interface SettlementRoleStatus {
  process: string;
  role: ProcessRole | 'none';
  /** It answers buyers and hands their settlements to lanes. */
  accepts: boolean;
  /** The relayer lanes it holds and sends from now. */
  sends: string[];
  /** Settlements waiting in this process for a transaction, and the age of the oldest. */
  queued: number;
  oldestQueuedMs: number;
  /** Settlements handed to other processes' lanes, outcome not back yet. */
  awaiting: number;
  problems: string[];
}

/**
 * The settlement engine of one process. Every process that answers buyers accepts settlement work and
 * hands it to the desk (desk.ts); every process given relayer keys (serve or worker) takes its share of
 * the pool's lanes (relayer-pool.ts) and sends, batched per block (settler.ts), what its own desk and the
 * lanes' inboxes give it (sender.ts). The registry (registry.ts) tells each who is who. Nothing starts
 * here: `agentgate serve` and `worker` call `start`; a CLI command never does.
 */
export class SettlementEngine {
  readonly me: string;
  readonly clock: BlockClock;
  readonly registry: SettlementRegistry;
  readonly mailbox: Mailbox;
  readonly pool: RelayerPool;
  readonly settler: Settler;
  readonly sender: SettlementSender;
  readonly desk: SettlementDesk;
  private role: { role: ProcessRole; accepts: boolean } | undefined;
  private housekeeping: NodeJS.Timeout | undefined;

  /**
   * `primary`: the deployment's default network, whose collections keep their plain names (a deployment
   * that adds networks keeps its state); every other network's lanes, leases, mailboxes and registry live
   * in collections of its own (`relayer_leases_eip155_80002`): one relayer key serves each network with
   * its own nonces, and one network's backlog is never read by another's.
   */
  constructor(db: Connection, config: Config, readonly chain: ChainService, private readonly log: Logger, allMetrics: Metrics, me: string = newProcessId(), primary = true) {
    // Everything this engine records carries its network (a relayer key may serve several).
    const metrics = allMetrics.forNetwork(chain.caip2);
    // The process registry's id (platform/process-registry.ts): one name per process in every registry and lease.
    this.me = me;
    const suffix = primary ? '' : `_${chain.caip2.replace(':', '_')}`;
    const settlementLog = log.child({ area: 'settlement', ...(primary ? {} : { network: chain.caip2 }) });
    const ttlMs = config.RELAYER_LEASE_TTL_MS;
    const skewMs = Math.min(2_000, Math.floor(ttlMs / 5));
    this.clock = new BlockClock(chain.publicClient, { busyPollMs: config.CHAIN_POLL_MS, idlePollMs: config.CHAIN_POLL_MS * 10, busy: () => this.busy() });
    this.registry = new SettlementRegistry(db, this.me, { ttlMs, skewMs, heartbeatMs: Math.min(1_000, Math.floor(ttlMs / 5)), refreshMs: 500 }, Date.now, suffix);
    this.mailbox = new Mailbox(db, suffix);
    this.pool = new RelayerPool(chain, this.clock, {
      accounts: chain.relayerAccounts,
      leases: new RelayerLeases(db, this.me, { ttlMs, skewMs }, Date.now, suffix),
      registry: this.registry,
      heartbeatMs: Math.floor(ttlMs / 3),
      rebalanceMs: Math.min(1_000, Math.floor(ttlMs / 3)),
      drainMs: config.RELAYER_DRAIN_MS,
      lane: {
        pipelineDepth: config.SETTLEMENT_PIPELINE_DEPTH,
        stuckBlocks: config.SETTLEMENT_STUCK_BLOCKS,
        confirmations: config.SETTLEMENT_CONFIRMATIONS,
        maxFeePerGas: config.RELAYER_MAX_FEE_GWEI === undefined ? undefined : parseGwei(String(config.RELAYER_MAX_FEE_GWEI)),
        reserveGas: GAS_BASE + GAS_PER_TRANSFER * BigInt(config.SETTLEMENT_BATCH_MAX),
        gasLimitPercent: config.GAS_LIMIT_PERCENT,
      },
      log: settlementLog,
      metrics,
    });
    this.settler = new Settler(chain, this.pool, this.clock, {
      maxBatch: config.SETTLEMENT_BATCH_MAX,
      multicall: config.MULTICALL3_ADDRESS as Address,
      sendMarginMs: config.SETTLEMENT_SEND_MARGIN_MS,
      validityMarginSeconds: config.PAYMENT_VALIDITY_MARGIN_SECONDS,
    }, settlementLog, metrics);
    this.sender = new SettlementSender(this.me, this.settler, this.mailbox, this.registry, {
      busyReadMs: 20, idleReadMs: 250, readLeadMs: 40,
    }, settlementLog, metrics);
    this.desk = new SettlementDesk(this.me, this.registry, this.mailbox, this.clock, { pool: this.pool, sender: this.sender }, {
      busyReplyMs: 15, idleReplyMs: 250, staleHolderMs: Math.max(3_000, 3 * Math.min(1_000, Math.floor(ttlMs / 5))),
    }, settlementLog, metrics);
    this.desk.onFirstPost = () => this.registry.publishSoon();
    this.pool.onAcquired.push((lane) => this.sender.laneAcquired(lane));
    this.pool.beforeRelease.push((lane) => this.sender.finishLane(lane, Date.now() + 30_000));
    this.pool.onChange.push(() => { this.settler.wake(); this.registry.publishSoon(); });
    metrics.onCollect(() => {
      const status = this.status();
      metrics.settlementQueued.set(status.queued);
      metrics.settlementOldestQueuedSeconds.set(status.oldestQueuedMs / 1000);
      metrics.settlementAwaiting.set(status.awaiting);
      metrics.settlementRole.set({ role: 'accepts' }, status.accepts ? 1 : 0);
      metrics.settlementRole.set({ role: 'sends' }, status.sends.length ? 1 : 0);
    });
  }

  /** The executor of a kind of settlement work (payments registers `exact` and `upto`). */
  register(kind: string, executor: WorkExecutor): void {
    this.sender.register(kind, executor);
  }

  /** Whether there is settlement work under way here (the block clock watches more closely while there is). */
  busy(): boolean {
    return this.settler.busy() || this.desk.awaiting() > 0;
  }

  /**
   * Starts the block clock alone, ahead of start() (which starts it too): a process that will send waits in
   * start() until the clock knows the chain's phase, about a block, and listening early overlaps that.
   */
  listenForBlocks(): void {
    this.clock.start();
  }

  /** Stops the block clock: for a process whose start did not get as far as start() (stop() stops it too). */
  stopListeningForBlocks(): void {
    this.clock.stop();
  }

  /** Joins the deployment: registers, watches the chain and, given keys, takes a share of the relayer pool. */
  async start(role: { role: ProcessRole; accepts: boolean }): Promise<void> {
    this.role = role;
    this.listenForBlocks();
    await this.registry.join(() => ({
      role: role.role, accepts: role.accepts,
      pool: this.chain.relayerAccounts.map((a) => a.address.toLowerCase()),
      lanes: this.pool.report(),
      queued: this.settler.waiting,
      oldestQueuedMs: this.settler.oldestWaitingMs(),
      posts: this.desk.posts(),
    }));
    await this.registry.refresh();
    if (this.chain.relayerAccounts.length) {
      // A process about to send learns the chain's phase first (about one block; bounded): batches it
      // times before it knows the phase would go out at once and fill the pipeline with small transactions.
      await this.clock.settled(PHASE_WAIT_MS);
      this.sender.start();
      await this.pool.start();
    }
    this.housekeeping = setInterval(() => {
      void this.registry.refresh()
        .then((view) => this.mailbox.prune(view.all.map((p) => p._id)))
        .catch((err) => this.log.warn({ err: shortReason(err) }, 'settlement mail housekeeping failed'));
    }, HOUSEKEEPING_MS);
    this.housekeeping.unref();
  }

  /** Leaves: every lane's work finished and its lease handed over (bounded), then the registration marked gone. */
  async stop(): Promise<void> {
    if (!this.role) return;
    if (this.housekeeping) clearInterval(this.housekeeping);
    await this.pool.stop();
    this.sender.stop();
    this.desk.stop();
    await this.registry.leave();
    this.clock.stop();
    this.role = undefined;
  }

  status(): SettlementRoleStatus {
    return {
      process: this.me,
      role: this.role?.role ?? 'none',
      accepts: this.role?.accepts ?? false,
      sends: this.pool.status().active.map((a) => a.toLowerCase()),
      queued: this.settler.waiting,
      oldestQueuedMs: this.settler.oldestWaitingMs(),
      awaiting: this.desk.awaiting(),
      problems: this.pool.status().problems,
    };
  }

  /** The deployment's lanes as last read (for /ready): who holds which, in what state. */
  deployment(): RegistryView | undefined {
    return this.registry.lastView();
  }

  /**
   * The relayer pool, in configuration order: this process's keys, or as the processes with keys report
   * it (a process given no keys still names the facilitator an `upto` buyer must sign for).
   */
  async poolAddresses(): Promise<string[]> {
    if (this.chain.relayerAccounts.length) return this.chain.relayerAccounts.map((a) => a.address);
    const view = this.registry.lastView() ?? await this.registry.refresh().catch(() => undefined);
    return view?.pool ?? [];
  }
}
