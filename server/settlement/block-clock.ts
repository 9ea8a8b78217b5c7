import type { PublicClient, Transport, Chain } from 'viem';

/** What the clock needs from the chain: the latest block number, and block timestamps for a first guess. */
export type BlockNumberSource = Pick<PublicClient<Transport, Chain>, 'getBlockNumber' | 'getBlock'>;

export interface BlockClockOptions {
  /** Poll interval while there is settlement work (queued requests, transactions in flight). */
  busyPollMs: number;
  /** Poll interval otherwise: enough to keep the cadence estimate warm without burdening a paid RPC. */
  idlePollMs?: number;
  /** Whether there is work now (polling speeds up while there is). */
  busy?: () => boolean;
  /** After start, poll at the busy rate this long, so a cadence the timestamps cannot tell is measured early. Default 10 s. */
  warmUpMs?: number;
  now?: () => number;
}

/** How many recent block arrivals the cadence estimate uses. */
const SAMPLES = 12;
/**
 * On a timed chain the clock first asks for a due block this long before its projected time, then again
 * and again until it shows: every DUE_POLL_GAP_MS at first, backing off to a quarter of how late the block
 * is (up to the poll interval: a chain that stalls gets the regular polls). Asking a little early keeps the
 * phase honest: sightings only ever lag, and a clock that asked only after the projection would find every
 * block already there and let its estimate drift later block by block. Asking again soon catches a block
 * that comes late (anvil's timer drifts by milliseconds, a real node serves its head tens of ms late)
 * within moments, where waiting for the next block's due time or poll would hold every answer of that
 * block back. It does so idle too: two or three asks a block keep the phase known for the next payment.
 */
const DUE_POLL_LEAD_MS = 10;
const DUE_POLL_GAP_MS = 10;
/** The lead grows up to this while blocks keep being there already at the first ask (see `askLeadMs`). */
const MAX_POLL_LEAD_MS = 200;
/** Polls never follow each other closer than this. */
const MIN_POLL_GAP_MS = 5;
/**
 * While the cadence is known and the phase is not (a process that just started), the head is asked for
 * this often until a block is seen to arrive between two close asks: at most one block interval of it.
 */
const PHASE_POLL_MS = 10;
/**
 * The phase is known once some block's arrival is bounded this tightly: seen by one ask, and not yet there
 * at the ask just before it (or within one and a half round trips of a slow RPC, if that is more).
 */
const PHASE_WINDOW_MS = 50;

interface Sighting {
  number: bigint;
  /** When the poll that first showed it was answered. */
  at: number;
  /** How long before `at` the block may have been produced: since the last ask that did not show it yet. */
  windowMs: number;
}

/**
 * Watches the chain's head and tells the settler when the next block is due. A chain that mines on a
 * timer (Base: every 2 s; anvil --block-time) gets a cadence and a phase, so a batch can be sent just before
 * the block closes and every request that arrived during the block rides in one transaction. A chain
 * that mines each transaction as it arrives (anvil's default) has no cadence: `nextBlock` is undefined
 * and the settler sends at once.
 *
 * The cadence is the chain's own (block timestamps, whole seconds) until this process has measured the
 * median gap between consecutive blocks as it saw them. The phase is the earliest any recent block was
 * seen relative to that cadence (seeing late is what polling does, seeing early is impossible), and it
 * counts only once a block's arrival was pinned between two close asks: the first sighting after a start
 * can be most of a block late. Until then `nextBlock` is undefined too, so nothing waits for a cut-off the
 * clock cannot compute, and the clock asks every PHASE_POLL_MS to pin the next block: a process knows the
 * phase within one block of starting.
 */
export class BlockClock {
  latest: bigint | undefined;
  private readonly seen: Sighting[] = [];
  private readonly listeners = new Set<(block: bigint) => void>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private stopped = false;
  private started = false;
  private readonly now: () => number;
  /** The last answered poll: when it was asked and what it showed (bounds the next block's arrival). */
  private lastAsk: { sentAt: number; number: bigint } | undefined;
  /** Round trips of recent polls, for how tightly a slow RPC can pin a block at all. */
  private readonly roundTrips: number[] = [];
  /**
   * How long before a block's projected time the clock first asks for it. It doubles whenever a block is
   * there already at that first ask (the projection was late: a cadence a little off, a late first
   * sighting), so the next block is caught arriving again, and shrinks back while blocks come after it:
   * the phase stays pinned to a real arrival every block, not to a projection that drifts.
   */
  private askLeadMs = DUE_POLL_LEAD_MS;

  constructor(private readonly chain: BlockNumberSource, private readonly options: BlockClockOptions) {
    this.now = options.now ?? Date.now;
  }

  private warmUntil = 0;

  /** The cadence the chain's recent block timestamps show, until this process has measured its own. */
  private hintMs: number | undefined;

  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.warmUntil = this.now() + (this.options.warmUpMs ?? 10_000);
    this.schedule(0);
    void this.readHint();
  }

  /**
   * Timestamps are whole seconds, so they can only tell a cadence of whole seconds (Base: 2 s), and only
   * when most recent blocks are that far apart (a chain that mines on arrival shows 0 s and irregular gaps).
   */
  private async readHint(): Promise<void> {
    if (this.readingHint) return;
    this.readingHint = true;
    try {
      const head = await this.chain.getBlockNumber({ cacheTime: 0 });
      if (head < 6n) return;
      const blocks = await Promise.all([0n, 1n, 2n, 3n, 4n, 5n].map((back) => this.chain.getBlock({ blockNumber: head - back })));
      const gaps = blocks.slice(1).map((b, i) => Number(blocks[i]!.timestamp - b.timestamp));
      const common = gaps.sort((a, b) => a - b)[2]!;
      if (common >= 1 && gaps.filter((g) => g === common).length >= 4) this.hintMs = common * 1000;
    } catch {
      // no hint: the cadence is measured from sightings alone
    } finally {
      this.readingHint = false;
      this.hintRead = true;
      // With a cadence now known, the phase hunt starts at once rather than at the next regular poll.
      if (this.hintMs !== undefined && !this.phaseKnown && this.started) this.reschedule();
    }
  }

  private readingHint = false;
  private hintRead = false;

  /**
   * Resolves once the clock can time batches (the phase is pinned), or once it is plain it has nothing to
   * wait for (the chain shows no cadence in its timestamps: it mines on arrival, or is too young to tell),
   * or after `timeoutMs`. A process that is to send waits for it before taking relayer lanes: about one
   * block interval, after which every payment it is given is timed right from the first.
   */
  async settled(timeoutMs: number): Promise<void> {
    const deadline = this.now() + timeoutMs;
    while (this.now() < deadline && !this.stopped) {
      if (this.phaseKnown) return;
      if (this.hintRead && this.hintMs === undefined && this.seen.length > 0) return;
      await new Promise((resolve) => setTimeout(resolve, PHASE_POLL_MS).unref());
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Called once per new head (blocks skipped between two polls are reported as the newest only). */
  onBlock(listener: (block: bigint) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Asks for the head now, e.g. right after sending, rather than at the next poll. */
  async poll(): Promise<bigint | undefined> {
    if (this.polling) return this.latest;
    this.polling = true;
    try {
      const sentAt = this.now();
      const number = await this.chain.getBlockNumber({ cacheTime: 0 });
      const at = this.now();
      this.roundTrips.push(at - sentAt);
      if (this.roundTrips.length > 9) this.roundTrips.shift();
      // A head newer than what the previous ask showed arrived after that ask was made.
      const windowMs = this.lastAsk && number > this.lastAsk.number ? at - this.lastAsk.sentAt : Infinity;
      if (this.latest !== undefined && number > this.latest && this.intervalMs !== undefined) {
        // Pinned (it came between two close asks): the lead was enough; there already at the first ask: not.
        this.askLeadMs = windowMs <= this.phaseWindowMs
          ? Math.max(DUE_POLL_LEAD_MS, this.askLeadMs * 0.8)
          : Math.min(MAX_POLL_LEAD_MS, this.askLeadMs * 2);
      }
      if (!this.lastAsk || number >= this.lastAsk.number) this.lastAsk = { sentAt, number };
      this.observe(number, at, windowMs);
      return number;
    } catch {
      return this.latest; // a failed poll is retried at the next tick; the RPC layer logs failovers
    } finally {
      this.polling = false;
    }
  }

  /** For our last few transactions: whether each was mined within moments of sending (relayer-lane.ts checkNow). */
  private readonly sends: boolean[] = [];

  /**
   * A relayer tells, for a transaction it just sent, whether the receipt was there within moments. A
   * chain that mines each transaction on arrival shows it every time; a chain on a timer almost never
   * (the block would have to close within the few tens of milliseconds after the send).
   */
  noteSent(minedAtOnce: boolean): void {
    this.sends.push(minedAtOnce);
    if (this.sends.length > 3) this.sends.shift();
  }

  /** Whether most of our last few transactions were mined as they arrived (anvil's default). */
  get minesOnArrival(): boolean {
    return this.sends.filter(Boolean).length >= 2;
  }

  /**
   * Block production interval in ms, if the chain mines on a steady timer. A chain that mines on arrival
   * has none, even when steady load makes its blocks look regular (sequential payments, one block each):
   * waiting for a "next block" there would only slow the load down and make the blocks look steadier.
   */
  get intervalMs(): number | undefined {
    if (this.minesOnArrival) return undefined;
    const gaps: number[] = [];
    for (let i = 1; i < this.seen.length; i++) {
      const [a, b] = [this.seen[i - 1]!, this.seen[i]!];
      if (b.number === a.number + 1n) gaps.push(b.at - a.at);
    }
    if (gaps.length < 4) return this.seen.length > 0 ? this.hintMs : undefined;
    const sorted = [...gaps].sort((x, y) => x - y);
    const median = sorted[Math.floor(sorted.length / 2)]!;
    if (median < 100) return undefined;
    // A steady timer: most gaps within a third of the median (polling jitter is far smaller than a block).
    const steady = gaps.filter((g) => Math.abs(g - median) <= median / 3).length;
    return steady >= gaps.length * 0.75 ? median : undefined;
  }

  /** How tightly a block's arrival must be pinned for the phase to count as known. */
  private get phaseWindowMs(): number {
    return Math.max(PHASE_WINDOW_MS, this.roundTripMs * 1.5);
  }

  /** Whether a recent block's arrival was pinned closely enough to time batches by. */
  get phaseKnown(): boolean {
    const limit = this.phaseWindowMs;
    return this.seen.some((s) => s.windowMs <= limit);
  }

  /**
   * The next block and when it is expected (ms since epoch), if the chain has a cadence and the clock
   * knows its phase; undefined otherwise (the settler then sends at once).
   */
  nextBlock(): { number: bigint; at: number } | undefined {
    const following = this.followingBlock();
    if (following === undefined || !this.phaseKnown) return undefined;
    const interval = this.intervalMs!;
    // Blocks we have not seen yet are due by now (polling lags): the next one is the first in the future.
    // The phase estimate leans late (sightings only lag), so a block rarely comes after its prediction.
    let next = following;
    const now = this.now();
    while (next.at <= now) next = { number: next.number + 1n, at: next.at + interval };
    return next;
  }

  /**
   * The block after the newest one seen, and when it was (or is) due, if the chain has a cadence. Phase:
   * the newest block whose arrival was pinned between two close asks, projected onto the newest one (a
   * projection over many blocks carries the cadence's error with it); without one, the earliest sighting
   * of any recent block, projected alike (sightings only lag, so the earliest is the tightest bound).
   */
  private followingBlock(): { number: bigint; at: number } | undefined {
    const interval = this.intervalMs;
    if (interval === undefined || this.latest === undefined) return undefined;
    const last = this.seen[this.seen.length - 1]!;
    const limit = this.phaseWindowMs;
    const pinned = [...this.seen].reverse().find((s) => s.windowMs <= limit);
    let produced = last.at;
    if (pinned) produced = Math.min(produced, pinned.at + Number(last.number - pinned.number) * interval);
    else for (const s of this.seen) produced = Math.min(produced, s.at + Number(last.number - s.number) * interval);
    return { number: last.number + 1n, at: produced + interval };
  }

  /** The median round trip of recent polls (how far away the node is). */
  private get roundTripMs(): number {
    const trips = [...this.roundTrips].sort((a, b) => a - b);
    return trips[Math.floor(trips.length / 2)] ?? 0;
  }

  /** When the next block is expected (ms since epoch), if the chain has a cadence and its phase is known. */
  nextBlockAt(): number | undefined {
    return this.nextBlock()?.at;
  }

  private observe(number: bigint, at: number, windowMs: number): void {
    if (this.latest !== undefined && number <= this.latest) return;
    this.latest = number;
    this.seen.push({ number, at, windowMs });
    // A chain too young for a hint at start (fewer than 6 blocks: a dev chain just deployed) gets one as
    // soon as it has the blocks, rather than waiting for enough sightings (10 s on a 2 s chain, during
    // which every batch would leave at once and most requests would wait two blocks).
    if (this.hintMs === undefined && this.seen.length <= 5 && number >= 6n) void this.readHint();
    if (this.seen.length > SAMPLES) this.seen.shift();
    for (const listener of this.listeners) {
      try { listener(number); } catch { /* a listener's failure is its own */ }
    }
  }

  /**
   * On a timed chain: every PHASE_POLL_MS until the phase is known, then around the time each block is due
   * (see DUE_POLL_LEAD_MS), so a mined settlement is seen within milliseconds of its block rather than up
   * to a poll interval later (the buyer's answer waits for it); `cap` bounds the wait between asks.
   */
  private timedDelay(cap: number): number | undefined {
    const following = this.followingBlock();
    if (following === undefined) return undefined;
    if (!this.phaseKnown) return PHASE_POLL_MS;
    const now = this.now();
    const firstAsk = following.at - this.askLeadMs;
    if (now < firstAsk) return Math.max(MIN_POLL_GAP_MS, Math.min(cap, firstAsk - now));
    return Math.min(cap, Math.max(DUE_POLL_GAP_MS, (now - firstAsk) / 4));
  }

  private nextDelay(): number {
    const busy = this.now() < this.warmUntil || (this.options.busy?.() ?? true);
    const cap = busy ? this.options.busyPollMs : this.options.idlePollMs ?? this.options.busyPollMs * 10;
    return this.timedDelay(cap) ?? cap;
  }

  private reschedule(): void {
    if (this.polling || this.stopped) return; // the poll under way schedules the next one
    if (this.timer) clearTimeout(this.timer);
    this.schedule(0);
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(async () => {
      await this.poll();
      this.schedule(this.nextDelay());
    }, delay);
    this.timer.unref();
  }
}
