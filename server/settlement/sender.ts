import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import { shortReason } from './relayer-lane.js';
import type { Mailbox, Reply } from './mailbox.js';
import type { SettlementRegistry } from './registry.js';
import type { Settler } from './settler.js';
import type { SendTools, SettlementWork, WorkExecutor, WorkOutcome } from './work.js';

export interface SenderOptions {
  /** On a chain without a known block cadence, how often a lane's inboxes are read while work arrives through them. */
  busyReadMs: number;
  /** How often they are read otherwise (and, on a timed chain, between the reads just before each cut-off). */
  idleReadMs: number;
  /** On a timed chain, how long before a batch's cut-off the inboxes are read, so what is there makes the batch. */
  readLeadMs: number;
}

/** Where one accepting process's inbox for one lane stands in this process. */
interface Source {
  /** The next inbox entry to read. */
  next: number;
  /** Every entry up to this one has all its outcomes written. */
  done: number;
  /** The next outbox number to write. */
  outNext: number;
  /** Entries read and not yet fully answered: entry number -> outcomes still to write. */
  open: Map<number, number>;
  /** Outcomes waiting for the next outbox write, with the entry each answers. */
  pending: Array<{ n: number; reply: Reply }>;
  writing: boolean;
  savedAt: number;
  /** An entry of it was found since this lane was taken (so its cursor is worth saving). */
  touched: boolean;
  /** A process gone from the registry whose inbox was read empty after it went: nothing more will come. */
  drained: boolean;
}

interface LaneInboxes { address: string; reading: boolean; sources: Map<string, Source>; loading: Map<string, Promise<Source>> }

/** Cursors are saved at most this often per inbox while work flows (and always when a lane is handed over). */
const SAVE_EVERY_MS = 500;
/** After this long without an inbox entry, reads slow down to `idleReadMs`. */
const BUSY_FOR_MS = 10_000;

/**
 * The sending side of settlement, in a process that holds relayer lanes: it runs settlement work through
 * the executor of its kind (work.ts) and answers with the outcome. Work comes two ways: from this
 * process's own desk (desk.ts), in memory, and from the inboxes of the lanes it holds (mailbox.ts), where
 * other processes left it; their outcomes go back through the outbox. Each inbox is read from the cursor
 * its previous holder saved, so work given to a lane is done by whoever holds the lane next.
 */
export class SettlementSender {
  private readonly executors = new Map<string, WorkExecutor>();
  private readonly inboxes = new Map<string, LaneInboxes>();
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  private stopped = true;
  private lastEntryAt = 0;
  private inFlight = 0;
  private readonly tools: SendTools;

  constructor(
    private readonly me: string,
    private readonly settler: Settler,
    private readonly mailbox: Mailbox,
    private readonly registry: SettlementRegistry,
    private readonly options: SenderOptions,
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {
    this.tools = {
      transfer: (request) => settler.settle(request),
      submitFrom: (address, tx, label) => settler.submitFrom(address, tx, label),
      previousHolderSettled: (address) => settler.previousHolderSettled(address),
      submit: (tx, label) => settler.submit(tx, label),
      sendTransaction: (tx, label) => settler.sendTransaction(tx, label),
    };
  }

  /** The executor of a kind of work (the area owning the kind registers it once, at start-up). */
  register(kind: string, executor: WorkExecutor): void {
    this.executors.set(kind, executor);
  }

  /** Work being run now, from this process's desk and from inboxes. */
  get running(): number {
    return this.inFlight;
  }

  /** Runs one piece of work and resolves with its outcome; never rejects (a failure is an outcome). */
  async take(work: SettlementWork): Promise<WorkOutcome> {
    const executor = this.executors.get(work.kind);
    if (!executor) return { unavailable: `this process cannot settle work of kind ${work.kind}` };
    this.inFlight++;
    try {
      return await executor(work, this.tools);
    } catch (err) {
      // An executor records what happened before it answers; one that throws has recorded nothing final,
      // and the work stays open for reconciliation to finish from the chain.
      this.log.error({ workId: work.id, kind: work.kind, err: shortReason(err) }, 'settlement work failed without an outcome; reconciliation will finish it');
      return { done: { ok: false, reason: 'settle_unconfirmed', message: `the settlement's outcome is not known yet: ${shortReason(err)}` } };
    } finally {
      this.inFlight--;
    }
  }

  start(): void {
    this.stopped = false;
    this.scheduleRead(0);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /** This process took `lane`: its inboxes are read from where their cursors say. */
  laneAcquired(lane: string): void {
    this.inboxes.set(lane, { address: lane, reading: true, sources: new Map(), loading: new Map() });
    this.scheduleRead(0);
  }

  /** Before `lane` is handed over: no more reads, every outcome of work taken from it written, cursors saved. */
  async finishLane(lane: string, deadline: number): Promise<void> {
    const inboxes = this.inboxes.get(lane);
    if (!inboxes) return;
    inboxes.reading = false;
    while (Date.now() < deadline && [...inboxes.sources.values()].some((s) => s.open.size > 0 || s.pending.length > 0 || s.writing)) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await Promise.all([...inboxes.sources].map(([from, source]) => this.saveCursor(lane, from, source).catch((err) => {
      this.log.warn({ relayer: lane, from, err: shortReason(err) }, 'could not save an inbox cursor at handover; the next holder runs that work again (the chain keeps it to once)');
    })));
    this.inboxes.delete(lane);
  }

  /**
   * When to read the inboxes next. On a chain with a known cadence, just before each cut-off: what is
   * there makes the batch, and what comes after the late cut-off waits for the next block anyway.
   * Otherwise every `busyReadMs` while work comes in through them and every `idleReadMs` when not.
   */
  private nextReadDelay(): number {
    const now = Date.now();
    const cutoffs = this.settler.cutoffs();
    if (cutoffs.length) {
      const due = cutoffs.map((c) => c - this.options.readLeadMs).find((t) => t > now + 1);
      // Past both of this block's reads: the next block's first one.
      return due !== undefined ? due - now : Math.max(1, cutoffs[0]! + this.settler.blockIntervalMs() - this.options.readLeadMs - now);
    }
    return now - this.lastEntryAt < BUSY_FOR_MS ? this.options.busyReadMs : this.options.idleReadMs;
  }

  private scheduleRead(delay: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => { void this.readAll(); }, delay);
    this.timer.unref();
  }

  private async readAll(): Promise<void> {
    if (this.reading) return;
    this.reading = true;
    try {
      const lanes = [...this.inboxes.values()].filter((l) => l.reading);
      if (lanes.length) {
        const view = await this.registry.current();
        const live = new Set(view.live.map((p) => p._id));
        await Promise.all(lanes.flatMap((lane) => view.all
          // This process's own entries too: it may have posted to the lane before it took it.
          .filter((p) => (p.posts?.[lane.address] ?? 0) > 0)
          .map((p) => this.readSource(lane, p._id, live.has(p._id)))));
      }
    } catch (err) {
      this.log.warn({ err: shortReason(err) }, 'reading settlement inboxes failed; retrying');
    } finally {
      this.reading = false;
      this.scheduleRead(this.nextReadDelay());
    }
  }

  private async source(lane: LaneInboxes, from: string): Promise<Source> {
    const known = lane.sources.get(from);
    if (known) return known;
    let loading = lane.loading.get(from);
    if (!loading) {
      loading = this.mailbox.cursor(lane.address, from).then((cursor) => {
        const source: Source = {
          next: (cursor?.read ?? 0) + 1, done: cursor?.read ?? 0, outNext: (cursor?.replied ?? 0) + 1,
          open: new Map(), pending: [], writing: false, savedAt: 0, touched: false, drained: false,
        };
        lane.sources.set(from, source);
        return source;
      }).finally(() => lane.loading.delete(from));
      lane.loading.set(from, loading);
    }
    return loading;
  }

  private async readSource(lane: LaneInboxes, from: string, live: boolean): Promise<void> {
    const source = await this.source(lane, from);
    if (source.drained) return;
    for (;;) {
      if (!lane.reading) return;
      const entry = await this.mailbox.readEntry(lane.address, from, source.next);
      if (!entry) {
        // A process gone for good wrote everything it ever will: one empty read after it went ends it.
        if (!live) source.drained = true;
        return;
      }
      source.next++;
      source.touched = true;
      this.lastEntryAt = Date.now();
      this.metrics.settlementInboxItems.inc(entry.items.length);
      source.open.set(entry.n, entry.items.length);
      if (entry.items.length === 0) this.entryAnswered(lane.address, from, source, entry.n);
      for (const work of entry.items) {
        void this.take(work).then((outcome) => {
          source.pending.push({ n: entry.n, reply: { id: work.id, outcome } });
          void this.writeReplies(lane.address, from, source);
        });
      }
    }
  }

  /** Writes the outcomes waiting for `from` in one outbox entry; one write at a time per inbox. */
  private async writeReplies(lane: string, from: string, source: Source): Promise<void> {
    if (source.writing || source.pending.length === 0) return;
    source.writing = true;
    const batch = source.pending.splice(0);
    try {
      let delay = 50;
      for (;;) {
        try {
          while (!(await this.mailbox.reply(lane, from, source.outNext, batch.map((b) => b.reply)))) source.outNext++;
          source.outNext++;
          break;
        } catch (err) {
          // The database is away: the outcome is recorded already, only the answer waits.
          this.log.warn({ relayer: lane, to: from, err: shortReason(err) }, 'could not write settlement outcomes to the outbox; retrying');
          await new Promise((resolve) => setTimeout(resolve, delay));
          delay = Math.min(delay * 2, 2_000);
        }
      }
      for (const { n } of batch) this.entryAnswered(lane, from, source, n, false);
      if (Date.now() - source.savedAt >= SAVE_EVERY_MS) void this.saveCursor(lane, from, source).catch(() => {});
    } finally {
      source.writing = false;
      if (source.pending.length) void this.writeReplies(lane, from, source);
    }
  }

  private entryAnswered(lane: string, from: string, source: Source, n: number, save = true): void {
    const left = (source.open.get(n) ?? 1) - 1;
    if (left > 0) source.open.set(n, left);
    else source.open.delete(n);
    while (source.done + 1 < source.next && !source.open.has(source.done + 1)) source.done++;
    if (save && Date.now() - source.savedAt >= SAVE_EVERY_MS) void this.saveCursor(lane, from, source).catch(() => {});
  }

  private async saveCursor(lane: string, from: string, source: Source): Promise<void> {
    if (!source.touched) return;
    source.savedAt = Date.now();
    await this.mailbox.saveCursor(lane, from, this.me, source.done, source.outNext - 1);
  }
}
