import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { BlockClock } from './block-clock.js';
import type { Mailbox } from './mailbox.js';
import type { RegistryView, SettlementRegistry } from './registry.js';
import type { RelayerPool } from './relayer-pool.js';
import { shortReason } from './relayer-lane.js';
import type { SettlementSender } from './sender.js';
import type { SettlementWork, WorkOutcome } from './work.js';

export interface DeskOptions {
  /**
   * While outcomes are awaited, a lane's outbox is read again at once after a read that found some, and
   * after one that found none first after `busyReplyMs`, then twice as long each time up to `idleReplyMs`;
   * a new block (outcomes follow blocks) starts again from `busyReplyMs`.
   */
  busyReplyMs: number;
  idleReplyMs: number;
  /** A lane whose holder has not reported for this long is given work only when no other lane can take it. */
  staleHolderMs: number;
}

interface Waiter { work: SettlementWork; resolve: (outcome: WorkOutcome) => void; since: number; rerouted: boolean }

/** This process's link to one lane held by another process: its inbox entries and the outcomes awaited. */
interface Link {
  lane: string;
  queue: Array<{ work: SettlementWork; resolve: (outcome: WorkOutcome) => void }>;
  /** The last inbox entry written. */
  posted: number;
  posting: boolean;
  waiters: Map<string, Waiter>;
  /** The next outbox entry to read. */
  outNext: number;
  polling: boolean;
  /** When the lane's holder was last looked at (rerouteIfHolderGone). */
  checkedAt: number;
  /** The wait before the next read of the outbox after one that found nothing (doubles; a new block resets it). */
  backoffMs: number;
  /** Cuts the current wait short (a new block): the next read comes `busyReplyMs` after it. */
  wake?: () => void;
}

/** An outcome awaited this long is given up on (the payment is open, and reconciliation finishes it). */
const WAIT_AT_MOST_MS = 10 * 60_000;

/**
 * The accepting side of settlement: every process that takes a payment hands its settlement to the desk,
 * which gives it to a relayer lane and resolves with the outcome that lane's holder recorded. A lane of
 * this process takes it in memory (sender.ts); otherwise a lane held by another process (serve or worker)
 * takes it through its inbox (mailbox.ts), and the desk reads the outcome from the outbox. Which lanes
 * exist and who holds them, the desk reads from the registry (registry.ts). If a lane answers that it sent
 * nothing (its holder lost it, or it ran out of gas), the desk tries another once.
 */
export class SettlementDesk {
  private readonly links = new Map<string, Link>();
  private turn = 0;
  private stopped = false;
  /** Registers this process's inbox entries (the registry publishes them so a lane's holder knows whom to read). */
  onFirstPost: () => void = () => {};

  constructor(
    private readonly me: string,
    private readonly registry: SettlementRegistry,
    private readonly mailbox: Mailbox,
    clock: BlockClock,
    private readonly local: { pool?: RelayerPool; sender?: SettlementSender },
    private readonly options: DeskOptions,
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {
    // A new block may have brought outcomes: every lane's outbox is read again soon.
    clock.onBlock(() => {
      for (const link of this.links.values()) {
        link.backoffMs = 0;
        link.wake?.();
      }
    });
  }

  /** lane -> the last inbox entry this process wrote to it (for the registry). */
  posts(): Record<string, number> {
    return Object.fromEntries([...this.links.values()].filter((l) => l.posted > 0).map((l) => [l.lane, l.posted]));
  }

  /** Work handed to other processes' lanes whose outcome has not come back yet. */
  awaiting(): number {
    let count = 0;
    for (const link of this.links.values()) count += link.waiters.size + link.queue.length;
    return count;
  }

  stop(): void {
    this.stopped = true;
  }

  /**
   * Whether some lane of the deployment can take work now (`lane`: that one): before anything is claimed,
   * a payment nobody could settle is refused.
   */
  async canTake(lane?: string): Promise<boolean> {
    if (await this.route({ lane }, new Set())) return true;
    // A relayer funded a moment ago, or a lane taken a moment ago elsewhere, counts at once.
    await Promise.all([this.local.pool?.recheckStarved(), this.registry.refresh().catch(() => undefined)]);
    return (await this.route({ lane }, new Set())) !== undefined;
  }

  /** Why no lane can take work, for a refusal's message. */
  async why(lane?: string): Promise<string> {
    const view = this.registry.lastView();
    const local = this.local.pool?.why();
    if (lane) return `the relayer ${lane} that must send it is not held by any process that can send now${local ? ` (${local})` : ''}`;
    if (!view || view.lanes.size === 0) return 'no process of this deployment holds a relayer lane (give RELAYER_PRIVATE_KEY(S) to serve or worker processes)';
    const states = [...view.lanes].map(([address, l]) => `${address}: ${l.state}`).join(', ');
    return `no relayer lane can send now (${states})${local ? `; ${local}` : ''}`;
  }

  /**
   * Gives `work` to a lane and resolves with its outcome (never rejects). `{ unavailable }` means nothing
   * was sent and nothing recorded. An outcome that never comes (every holder of its lane gone for good)
   * leaves the promise pending: its caller answers on a deadline, and reconciliation finishes the work.
   */
  async submit(work: SettlementWork): Promise<WorkOutcome> {
    const tried = new Set<string>();
    let last: WorkOutcome = { unavailable: await this.why(work.lane) };
    for (let attempt = 0; attempt < 3; attempt++) {
      const route = await this.route(work, tried);
      if (!route) return tried.size ? last : { unavailable: await this.why(work.lane) };
      tried.add(route);
      this.metrics.settlementRouted.inc({ route: route === 'local' ? 'local' : 'remote' });
      last = route === 'local' ? await this.local.sender!.take(work) : await this.remote(route, work);
      if ('done' in last) return last;
      this.log.info({ workId: work.id, route, why: last.unavailable }, 'settlement work handed back unsent; trying another lane');
    }
    return last;
  }

  /**
   * 'local', or the lane (another process's) to give `work` to; undefined when none can take it. Local
   * first (no database round trip); else the lanes whose holders report regularly, in turn.
   */
  private async route(work: Pick<SettlementWork, 'lane'>, tried: Set<string>): Promise<string | undefined> {
    const { pool, sender } = this.local;
    if (pool && sender && !tried.has('local')) {
      if (work.lane ? pool.canSendFrom(work.lane) : pool.lanes().some((l) => l.state === 'active' && l.canSendNow())) return 'local';
    }
    const view = await this.registry.current().catch(() => this.registry.lastView());
    if (!view) return undefined;
    const candidates = [...view.lanes]
      .filter(([address, l]) => !tried.has(address) && (work.lane ? address === work.lane : l.state === 'active')
        // A lane that must send it is given it even while it is handed over: its next holder reads the inbox.
        && (l.state !== 'starved') && !(l.holder === this.me && !work.lane));
    if (candidates.length === 0) return undefined;
    const fresh = candidates.filter(([, l]) => this.lagOf(view, l.holder) <= this.options.staleHolderMs);
    const pick = fresh.length ? fresh : candidates;
    return pick[this.turn++ % pick.length]![0];
  }

  /**
   * How far a process's last heartbeat lags behind the freshest one in the view. Relative, not to the
   * clock: while the database is away nobody's heartbeat lands, and nobody is taken for gone; one process
   * that stopped while the others report is. A process not in the view at all (its registration expired)
   * counts as gone only if the view itself is fresh.
   */
  private lagOf(view: RegistryView, holder: string | undefined): number {
    const newest = Math.max(0, ...view.live.map((p) => p.heartbeatAt.getTime()));
    const heartbeat = view.live.find((p) => p._id === holder)?.heartbeatAt.getTime();
    if (heartbeat !== undefined) return newest - heartbeat;
    return Date.now() - newest <= this.options.staleHolderMs ? Infinity : 0;
  }

  private link(lane: string): Link {
    let link = this.links.get(lane);
    if (!link) {
      link = { lane, queue: [], posted: 0, posting: false, waiters: new Map(), outNext: 1, polling: false, checkedAt: 0, backoffMs: 0 };
      this.links.set(lane, link);
    }
    return link;
  }

  private remote(lane: string, work: SettlementWork): Promise<WorkOutcome> {
    const link = this.link(lane);
    return new Promise((resolve) => {
      link.queue.push({ work, resolve });
      void this.post(link);
    });
  }

  /** Writes what is queued for the lane as its next inbox entry, one write at a time; retried until it lands. */
  private async post(link: Link): Promise<void> {
    if (link.posting) return;
    link.posting = true;
    try {
      while (link.queue.length && !this.stopped) {
        const batch = link.queue.splice(0);
        const n = link.posted + 1;
        let delay = 50;
        for (;;) {
          try {
            await this.mailbox.post(link.lane, this.me, n, batch.map((b) => b.work));
            break;
          } catch (err) {
            // Claimed payments are never dropped: the entry is written once the database answers again.
            this.log.warn({ relayer: link.lane, entry: n, err: shortReason(err) }, 'could not hand settlement work to a lane\'s inbox; retrying');
            if (this.stopped) return;
            await new Promise((resolve) => setTimeout(resolve, delay));
            delay = Math.min(delay * 2, 2_000);
          }
        }
        const first = link.posted === 0;
        link.posted = n;
        if (first) this.onFirstPost();
        const since = Date.now();
        for (const { work, resolve } of batch) link.waiters.set(work.id, { work, resolve, since, rerouted: false });
        void this.pollReplies(link);
      }
    } finally {
      link.posting = false;
    }
  }

  /** Reads the lane's outbox for this process while outcomes are awaited. */
  private async pollReplies(link: Link): Promise<void> {
    if (link.polling) return;
    link.polling = true;
    try {
      while (link.waiters.size > 0 && !this.stopped) {
        let entry;
        try {
          entry = await this.mailbox.readReplies(link.lane, this.me, link.outNext);
        } catch (err) {
          this.log.warn({ relayer: link.lane, err: shortReason(err) }, 'could not read settlement outcomes; retrying');
          await new Promise((resolve) => setTimeout(resolve, this.options.idleReplyMs));
          continue;
        }
        if (entry) {
          link.outNext++;
          link.backoffMs = 0;
          for (const { id, outcome } of entry.replies) {
            const waiter = link.waiters.get(id);
            if (!waiter) continue;
            link.waiters.delete(id);
            waiter.resolve(outcome);
          }
          continue;
        }
        const now = Date.now();
        for (const [id, waiter] of link.waiters) if (now - waiter.since > WAIT_AT_MOST_MS) link.waiters.delete(id);
        if (now - link.checkedAt >= 1_000) {
          link.checkedAt = now;
          this.rerouteIfHolderGone(link);
        }
        link.backoffMs = Math.min(this.options.idleReplyMs, Math.max(this.options.busyReplyMs, link.backoffMs * 2));
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, link.backoffMs);
          link.wake = () => { clearTimeout(timer); setTimeout(resolve, this.options.busyReplyMs); };
        });
        link.wake = undefined;
      }
    } finally {
      link.polling = false;
    }
  }

  /**
   * Work waiting on a lane whose holder stopped reporting (killed, or cut off) is given to another lane as
   * well, when any may send it: the lane's next holder would only take it once the dead holder's lease
   * expires. Whichever sends it first moves the money; the other finds the authorization used and records
   * the same settlement (the token's nonce and the settlement's unique entry keep it to once), so the
   * first outcome to come back answers the buyer. Work for one given relayer (upto) can only wait.
   */
  private rerouteIfHolderGone(link: Link): void {
    const view = this.registry.lastView();
    if (!view) return;
    const now = Date.now();
    const holder = view.lanes.get(link.lane)?.holder;
    if (this.lagOf(view, holder) <= this.options.staleHolderMs) return;
    for (const waiter of link.waiters.values()) {
      if (waiter.rerouted || waiter.work.lane || now - waiter.since < this.options.staleHolderMs) continue;
      waiter.rerouted = true;
      void (async () => {
        const route = await this.route(waiter.work, new Set([link.lane]));
        if (!route) return;
        this.log.warn({ workId: waiter.work.id, relayer: link.lane, holder: holder ?? null, to: route }, 'settlement work given to another lane: its lane\'s holder stopped reporting');
        this.metrics.settlementRouted.inc({ route: route === 'local' ? 'local' : 'remote' });
        const outcome = route === 'local' ? await this.local.sender!.take(waiter.work) : await this.remote(route, waiter.work);
        if (!('done' in outcome) || link.waiters.get(waiter.work.id) !== waiter) return;
        link.waiters.delete(waiter.work.id);
        waiter.resolve(outcome);
      })();
    }
  }

}
