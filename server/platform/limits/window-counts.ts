import { Schema, type Connection, type Model } from 'mongoose';
import type { Logger } from '../logger.js';

/**
 * One process's count of one bucket (a key, an org, a client address) in one window. Only the process
 * that owns a document writes it (its id is in the `_id`), one write at a time, so no update ever races
 * another: its own total is exact on any engine, FerretDB included. `closed`: this process counts the
 * bucket exactly for the rest of the window, and `count` holds every admission it made without a round trip.
 * `span`: the window's length (request limits and mail sends share the collection).
 */
interface CountDoc { _id: string; bucket: string; window: number; span?: number; process: string; count: number; closed?: boolean; until: Date }

const schema = new Schema<CountDoc>({
  _id: String, bucket: { type: String, required: true }, window: { type: Number, required: true }, span: Number, process: { type: String, required: true },
  count: { type: Number, required: true }, closed: Boolean, until: { type: Date, required: true },
}, { versionKey: false });
schema.index({ window: 1, bucket: 1 });
schema.index({ until: 1 });

/**
 * A bucket this close to its limit is counted exactly: its requests wait for the database. Before that,
 * the deployment's processes together admit at most this share of the limit without a round trip.
 */
const EXACT_FROM = 0.5;

/** How often a process counting exactly looks again for the others' closed counts, and for how long at most (a process that died stays live for seconds). */
const CLOSED_POLL_MS = 20;
const CLOSED_WAIT_MS = 2_000;

/** The deployment as the counts need it: this process's id, how many processes are live and which (this one included). */
export interface CountingProcesses { readonly id: string; liveCount(): number; liveIds(): Promise<ReadonlySet<string>> }

export interface Take {
  ok: boolean;
  limit: number;
  /** Requests left in the window after this one (0 when refused). */
  remaining: number;
  /** Seconds until the window ends (when a refused request may try again). */
  resetSeconds: number;
}

interface Entry {
  bucket: string;
  window: number;
  /** This process's admissions in the window. */
  mine: number;
  /** The highest of this process's counts known to be in the database. */
  written: number;
  /** The others' admissions, as the latest read found them. */
  others: number;
  /** This process counts the bucket exactly for the rest of the window (never again without a round trip). */
  closed: boolean;
  /** The database holds `closed` too. */
  closedWritten: boolean;
  /** Until every other live process has closed the bucket too (or CLOSED_WAIT_MS has passed): waited for once, before this process's first exact count. */
  othersClosed?: Promise<void>;
  /** This process's write in flight, and the count it carries. */
  writing?: { count: number; closed: boolean; done: Promise<void> };
}

/**
 * Requests per fixed window, counted across every process of the deployment through the database.
 *
 * Each process counts its own requests in memory and writes its own total per bucket and window
 * (window-counts documents, one per process: nothing races). Far from a limit a request costs no database
 * round trip: every `syncEveryMs` each process writes its changed counts and reads the others', in two
 * commands for every bucket at once. "Far" is a share of the limit for each live process: each may admit
 * its share of half the limit unseen (a burst spread over N processes stays under half the limit).
 *
 * Nearer, the bucket is closed in this process: it is counted exactly for the rest of the window. Each
 * request writes this process's unwritten admissions, reads the others' counts, and an admitted one writes
 * this process's count before it is answered. What another process admitted unseen is in the database once
 * that process has closed the bucket too (a closed count holds every admission made without a round trip),
 * so before its first exact count a process waits until every other live process has: each closes a bucket
 * when its own share runs out, or on its next sync after it sees the bucket closed elsewhere. Without that
 * wait, a count read while another process's share was still being written missed it, and two processes
 * admitted 50 for a limit of 40 (fresh-clone CI, Node 24). With it, of any two admissions in two processes,
 * the later one's read sees the earlier one's write unless the two were in flight together: the deployment
 * admits the limit, give or take the requests in flight at once (never fewer: only admitted requests are
 * counted). The wait costs a bucket's first exact request in each process about one sync of the others
 * (and never more than CLOSED_WAIT_MS: a process that died is counted live for a few seconds).
 *
 * A window is fixed (it starts at a multiple of its length): a client may spend its limit at the end of one
 * window and again at the start of the next, as with any fixed window.
 */
export class WindowCounts {
  private readonly model: Model<CountDoc>;
  /** This process's counts, by bucket. */
  private readonly entries = new Map<string, Entry>();
  private timer: NodeJS.Timeout | undefined;
  private syncing: Promise<void> = Promise.resolve();
  private stopped = false;
  private lastSweep = Date.now();
  private readonly syncEveryMs: number;
  private readonly log: Pick<Logger, 'warn'> | undefined;

  /** `syncEveryMs`: how often the counts are exchanged (250 ms); `log`: where a wait for the others' closing that ran out is told. */
  constructor(conn: Connection, private readonly processes: CountingProcesses, private readonly windowMs: number, options: { syncEveryMs?: number; log?: Pick<Logger, 'warn'> } = {}) {
    this.syncEveryMs = options.syncEveryMs ?? 250;
    this.log = options.log;
    this.model = conn.models.WindowCount ?? conn.model<CountDoc>('WindowCount', schema, 'rate_limit_counts');
    // Synced even while this process counts nothing: another process waits for it to close a bucket.
    this.scheduleSync();
  }

  /**
   * Counts one request of `bucket` if the window has room for it under `limit`. Far from the limit the
   * answer is at hand (no promise: a request's middleware pays nothing for it); near it, a promise of it.
   */
  take(bucket: string, limit: number): Take | Promise<Take> {
    const now = Date.now();
    const window = Math.floor(now / this.windowMs);
    const resetSeconds = Math.max(1, Math.ceil(((window + 1) * this.windowMs - now) / 1000));
    const entry = this.entryOf(bucket, window);
    const processes = Math.max(1, this.processes.liveCount());
    if (!entry.closed && farFromLimit(entry, limit, processes)) {
      const take = this.decide(entry, limit, resetSeconds);
      // The last admission of this process's unseen share: the bucket closed, and its count written now
      // (not at the next sync) for the others, who wait for it before they count exactly.
      if (!farFromLimit(entry, limit, processes)) {
        entry.closed = true;
        void this.writeOwn(entry).catch(() => {});
      }
      return take;
    }
    // Closed for the rest of the window, even if the live processes become fewer and the share larger.
    entry.closed = true;
    return this.takeExactly(entry, limit, resetSeconds);
  }

  /** This process's count of `bucket` in `window`: one per bucket, a new window starts it afresh (what was not written of the last one no longer limits anything). */
  private entryOf(bucket: string, window: number): Entry {
    let entry = this.entries.get(bucket);
    if (!entry || entry.window !== window) {
      entry = { bucket, window, mine: 0, written: 0, others: 0, closed: false, closedWritten: false };
      this.entries.set(bucket, entry);
    }
    return entry;
  }

  /**
   * Near the limit: this process's unwritten admissions written (with the bucket closed), the others'
   * closing waited for once, their counts read afresh, and an admitted request's count written, each before
   * the answer. Only admitted requests are ever written: a count that included a request about to be
   * refused, read by another process in that moment, made it refuse one the limit had room for (39 admitted
   * for 40). A database that cannot be reached leaves the counts last read: the limit is kept as well as they tell it.
   */
  private async takeExactly(entry: Entry, limit: number, resetSeconds: number): Promise<Take> {
    await this.writeOwn(entry).catch(() => {});
    await (entry.othersClosed ??= this.othersClose(entry));
    await this.countsOf(entry).catch(() => {});
    const take = this.decide(entry, limit, resetSeconds);
    if (take.ok) await this.writeOwn(entry).catch(() => {});
    return take;
  }

  /** Counts the request if the window has room for it; only then does this process's count grow. */
  private decide(entry: Entry, limit: number, resetSeconds: number): Take {
    if (entry.mine + 1 + entry.others > limit) return { ok: false, limit, remaining: 0, resetSeconds };
    entry.mine++;
    return { ok: true, limit, remaining: Math.max(0, limit - entry.mine - entry.others), resetSeconds };
  }

  /** Until every other live process has closed `entry`'s bucket, looked for every CLOSED_POLL_MS, for CLOSED_WAIT_MS at most. */
  private async othersClose(entry: Entry): Promise<void> {
    const started = Date.now();
    for (;;) {
      const open = await this.notClosed(entry).catch((err: Error) => [`(unread: ${err.message})`]);
      if (open.length === 0) return;
      if (Date.now() - started >= CLOSED_WAIT_MS) {
        // Counted exactly all the same: what these processes admitted unseen may go past the limit.
        this.log?.warn({ bucket: entry.bucket, waitedMs: Date.now() - started, notClosed: open }, 'limit counted exactly before every live process closed it');
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, CLOSED_POLL_MS));
    }
  }

  /** The other live processes that have not closed `entry`'s bucket; their counts taken on the way. */
  private async notClosed(entry: Entry): Promise<string[]> {
    const [live, docs] = await Promise.all([this.processes.liveIds(), this.countsOf(entry)]);
    const closed = new Set(docs.filter((d) => d.closed).map((d) => d.process));
    return [...live].filter((id) => id !== this.processes.id && !closed.has(id));
  }

  /**
   * This process's count, written now (with the bucket's closing, once closed). One write of a document at
   * a time: FerretDB lost one of two $max updates of one document in flight together (both landed, the count
   * stayed at the lower one). A write in flight that carries what is to be written is waited for; one that
   * does not is followed by another.
   */
  private writeOwn(entry: Entry): Promise<void> {
    const { mine: count, closed } = entry;
    if (entry.written >= count && (entry.closedWritten || !closed)) return Promise.resolve();
    if (entry.writing) {
      const { writing } = entry;
      return writing.count >= count && (writing.closed || !closed) ? writing.done : writing.done.catch(() => {}).then(() => this.writeOwn(entry));
    }
    return this.writing(entry, count, closed, this.model.updateOne({ _id: this.idOf(entry) }, this.update(entry, count, closed), { upsert: true }));
  }

  /** Marks `entry`'s write of `count` (and `closed`) in flight until `write` lands. */
  private writing(entry: Entry, count: number, closed: boolean, write: Promise<unknown>): Promise<void> {
    const done = write.then(() => wrote(entry, count, closed)).finally(() => {
      if (entry.writing?.done === done) entry.writing = undefined;
    });
    entry.writing = { count, closed, done };
    return done;
  }

  /**
   * This process's count as an update that never lowers it: a count only grows within its window (a
   * write retried by the driver after a later one landed must not take admissions back); nor is a closed bucket reopened.
   */
  private update(entry: Entry, count: number, closed: boolean) {
    return { $set: { ...this.docOf(entry), ...(closed ? { closed: true } : {}) }, $max: { count } };
  }

  /**
   * Every process's count of `entry`'s bucket and window, the others' taken into `entry`. Always a fresh
   * read before an exact count: one a few milliseconds old misses what the others admitted meanwhile, and
   * with admitted counts written only after the answer, such a read let the deployment admit 51 for a limit of 40.
   */
  private async countsOf(entry: Entry): Promise<Array<Pick<CountDoc, 'process' | 'count' | 'closed'>>> {
    const docs = await this.model.find({ window: entry.window, bucket: entry.bucket }, { _id: 0, process: 1, count: 1, closed: 1 }).lean();
    raiseOthers(entry, docs.filter((d) => d.process !== this.processes.id).reduce((sum, d) => sum + d.count, 0));
    return docs;
  }

  private scheduleSync(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.syncing = this.syncing.then(() => this.sync()).catch(() => {}).finally(() => this.scheduleSync());
    }, this.syncEveryMs).unref();
  }

  /**
   * Writes this process's changed counts, reads every other process's counts of the current window, and
   * closes here (written at once) the buckets another process has closed.
   */
  async sync(): Promise<void> {
    const window = Math.floor(Date.now() / this.windowMs);
    for (const [key, entry] of this.entries) if (entry.window < window) this.entries.delete(key);
    await this.writeChanged();
    // A process counting nothing in this window needs only the buckets it must close, not every count.
    const counting = [...this.entries.values()].some((e) => e.window === window);
    const docs = await this.model.find({ window, process: { $ne: this.processes.id }, ...(counting ? {} : { closed: true }) }, { _id: 0, bucket: 1, count: 1, closed: 1, span: 1 }).lean();
    const others = new Map<string, number>();
    for (const d of docs) others.set(d.bucket, (others.get(d.bucket) ?? 0) + d.count);
    // Another process waits for this one to close what it has closed (request limits and mail sends share
    // the collection: only buckets of this window's length).
    const closing = [...new Set(docs.filter((d) => d.closed && d.span === this.windowMs).map((d) => d.bucket))].map((bucket) => this.entryOf(bucket, window));
    for (const entry of closing) entry.closed = true;
    for (const entry of this.entries.values()) {
      if (entry.window === window) raiseOthers(entry, others.get(entry.bucket) ?? 0);
    }
    await Promise.all(closing.map((entry) => this.writeOwn(entry)));
    if (Date.now() - this.lastSweep > 60_000) {
      this.lastSweep = Date.now();
      await this.model.deleteMany({ until: { $lt: new Date(Date.now() - this.windowMs) } });
    }
  }

  /**
   * The counts as they are now (admissions counted while the write is in flight are written next time), in
   * one command; a count with a write of its own in flight is written after it (one write of a document at a time).
   */
  private async writeChanged(): Promise<void> {
    const dirty = [...this.entries.values()].filter((e) => e.mine > e.written || (e.closed && !e.closedWritten));
    const after = dirty.filter((e) => e.writing);
    const now = dirty.filter((e) => !e.writing).map((e) => ({ e, count: e.mine, closed: e.closed }));
    const bulk = now.length ? this.model.bulkWrite(now.map(({ e, count, closed }) => ({ updateOne: { filter: { _id: this.idOf(e) }, update: this.update(e, count, closed), upsert: true } })), { ordered: false }) : undefined;
    await Promise.all([...now.map(({ e, count, closed }) => this.writing(e, count, closed, bulk!)), ...after.map((e) => this.writeOwn(e))]);
  }

  stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    return this.syncing;
  }

  private idOf(entry: Entry): string {
    return `${entry.bucket}|${entry.window}|${this.processes.id}`;
  }

  private docOf(entry: Entry): Omit<CountDoc, '_id' | 'count'> {
    return { bucket: entry.bucket, window: entry.window, span: this.windowMs, process: this.processes.id, until: new Date((entry.window + 1) * this.windowMs) };
  }
}

/**
 * Whether one more admission keeps this process within its unseen share: half the limit shared by the
 * live processes, less what the others have admitted as last read.
 */
function farFromLimit(entry: Entry, limit: number, processes: number): boolean {
  return (entry.mine + 1) * processes + entry.others <= limit * EXACT_FROM;
}

/** This process's count `count` (and its closing) is in the database (counts only grow: an older write landing later changes nothing). */
function wrote(entry: Entry, count: number, closed: boolean): void {
  if (count > entry.written) entry.written = count;
  if (closed) entry.closedWritten = true;
}

/**
 * The others' count as a read found it, never lowered: counts only grow within a window, so a lower figure
 * is an older read. Reads of one process land in any order (a periodic sync, another request's read begun
 * earlier, replies parsed in one go), and one landing between a fresh read and its request's decision made
 * that request decide on a count from before the others' last admissions: 50 admitted for a limit of 40
 * (fresh-clone CI, Node 22).
 */
function raiseOthers(entry: Entry, others: number): void {
  if (others > entry.others) entry.others = others;
}
