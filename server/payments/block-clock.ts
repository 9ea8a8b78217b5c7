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
  /** After start, poll at the busy rate this long, so the cadence is known before the first payment. Default 10 s. */
  warmUpMs?: number;
  now?: () => number;
}

/** How many recent block arrivals the cadence estimate uses. */
const SAMPLES = 12;
/**
 * While busy, the clock first asks for a due block this long before its projected time, then again and
 * again until it shows: every DUE_POLL_GAP_MS at first, backing off to a quarter of how late the block
 * is (up to busyPollMs: a chain that stalls gets the regular polls). Asking a little early keeps the
 * phase honest: sightings only ever lag, and a clock that asked only after the projection would find
 * every block already there and let its estimate drift later block by block. Asking again soon catches a
 * block that comes late (anvil's timer drifts by milliseconds, a real node serves its head tens of ms
 * late) within moments, where waiting for the next block's due time or poll would hold every answer of
 * that block back.
 */
const DUE_POLL_LEAD_MS = 10;
const DUE_POLL_GAP_MS = 10;
/** Polls never follow each other closer than this. */
const MIN_POLL_GAP_MS = 5;

/**
 * Watches the chain's head and tells the settler when the next block is due. A chain that mines on a
 * timer (Base: every 2 s; anvil --block-time) gets a cadence and a phase, so a batch can be sent just before
 * the block closes and every request that arrived during the block rides in one transaction. A chain
 * that mines each transaction as it arrives (anvil's default) has no cadence: `nextBlockAt` is undefined
 * and the settler sends at once.
 *
 * The cadence is the median gap between consecutive blocks as this process saw them; the phase is the
 * earliest any recent block was seen relative to that cadence (seeing late is what polling does, seeing
 * early is impossible), so the estimate converges on when blocks are really produced.
 */
export class BlockClock {
  latest: bigint | undefined;
  private readonly seen: Array<{ number: bigint; at: number }> = [];
  private readonly listeners = new Set<(block: bigint) => void>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private stopped = false;
  private readonly now: () => number;

  constructor(private readonly chain: BlockNumberSource, private readonly options: BlockClockOptions) {
    this.now = options.now ?? Date.now;
  }

  private warmUntil = 0;

  /** The cadence the chain's recent block timestamps show, until this process has measured its own. */
  private hintMs: number | undefined;

  start(): void {
    if (this.timer || this.stopped) return;
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
    }
  }

  private readingHint = false;

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
      const number = await this.chain.getBlockNumber({ cacheTime: 0 });
      this.observe(number, this.now());
      return number;
    } catch {
      return this.latest; // a failed poll is retried at the next tick; the RPC layer logs failovers
    } finally {
      this.polling = false;
    }
  }

  /** For our last few transactions: whether each was mined within moments of sending (relayer.ts checkNow). */
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

  /** The next block and when it is expected (ms since epoch), if the chain has a cadence. */
  nextBlock(): { number: bigint; at: number } | undefined {
    const following = this.followingBlock();
    if (following === undefined) return undefined;
    const interval = this.intervalMs!;
    // Blocks we have not seen yet are due by now (polling lags): the next one is the first in the future.
    // The phase estimate leans late (sightings only lag), so a block rarely comes after its prediction.
    let next = following;
    const now = this.now();
    while (next.at <= now) next = { number: next.number + 1n, at: next.at + interval };
    return next;
  }

  /** The block after the newest one seen, and when it was (or is) due, if the chain has a cadence. */
  private followingBlock(): { number: bigint; at: number } | undefined {
    const interval = this.intervalMs;
    if (interval === undefined || this.latest === undefined) return undefined;
    const last = this.seen[this.seen.length - 1]!;
    // Phase: the earliest sighting of any recent block, projected onto the newest one.
    let produced = last.at;
    for (const s of this.seen) produced = Math.min(produced, s.at + Number(last.number - s.number) * interval);
    return { number: last.number + 1n, at: produced + interval };
  }

  /** When the next block is expected (ms since epoch), if the chain has a cadence. */
  nextBlockAt(): number | undefined {
    return this.nextBlock()?.at;
  }

  private observe(number: bigint, at: number): void {
    if (this.latest !== undefined && number <= this.latest) return;
    this.latest = number;
    this.seen.push({ number, at });
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
   * While there is work: every busyPollMs, and on a timed chain also around the time the next block is
   * due (see DUE_POLL_LEAD_MS), so a mined settlement is seen within milliseconds of its block rather
   * than up to a poll interval later (the buyer's answer waits for it).
   */
  private busyDelay(): number {
    const following = this.followingBlock();
    if (following === undefined) return this.options.busyPollMs;
    const now = this.now();
    const firstAsk = following.at - DUE_POLL_LEAD_MS;
    if (now < firstAsk) return Math.max(MIN_POLL_GAP_MS, Math.min(this.options.busyPollMs, firstAsk - now));
    return Math.min(this.options.busyPollMs, Math.max(DUE_POLL_GAP_MS, (now - firstAsk) / 4));
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(async () => {
      await this.poll();
      const busy = this.now() < this.warmUntil || (this.options.busy?.() ?? true);
      this.schedule(busy ? this.busyDelay() : this.options.idlePollMs ?? this.options.busyPollMs * 10);
    }, delay);
    this.timer.unref();
  }
}
