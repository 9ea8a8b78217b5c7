import { Schema, type Connection, type Model } from 'mongoose';

/**
 * One process's count of one bucket (a key, an org, a client address) in one window. Only the process
 * that owns a document writes it (its id is in the `_id`), one write at a time, so no update ever races
 * another: its own total is exact on any engine, FerretDB included.
 */
interface CountDoc { _id: string; bucket: string; window: number; process: string; count: number; until: Date }

const schema = new Schema<CountDoc>({
  _id: String, bucket: { type: String, required: true }, window: { type: Number, required: true }, process: { type: String, required: true },
  count: { type: Number, required: true }, until: { type: Date, required: true },
}, { versionKey: false });
schema.index({ window: 1, bucket: 1 });
schema.index({ until: 1 });

/**
 * A bucket this close to its limit is counted exactly: its requests wait for the database. Before that,
 * the deployment's processes together admit at most this share of the limit without a round trip.
 */
const EXACT_FROM = 0.5;

/** The deployment as the counts need it: this process's id, and how many processes are live (this one included). */
export interface CountingProcesses { readonly id: string; liveCount(): number }

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
  /** This process's write in flight, and the count it carries. */
  writing?: { count: number; done: Promise<void> };
}

/**
 * Requests per fixed window, counted across every process of the deployment through the database.
 *
 * Each process counts its own requests in memory and writes its own total per bucket and window
 * (window-counts documents, one per process: nothing races). Far from a limit a request costs no database
 * round trip: the counts are written, and the other processes' read, every `syncEveryMs` in two commands
 * for every bucket at once. "Far" is a share of the limit for each live process: each may admit its
 * share of half the limit unseen (the counts of a burst spread over N processes stay under half the
 * limit), and the admission that ends its share writes its count at once. Nearer, each request writes
 * this process's unwritten admissions, reads the others' counts, and an admitted one writes this process's
 * count before it is answered. Of any two admissions in two processes, then, the later one's read sees the
 * earlier one's write unless the two were in flight together: the deployment admits the limit, give or
 * take the requests in flight at once (never fewer: only admitted requests are counted). A window is
 * fixed (it starts at a multiple of its length): a client may spend its limit at the end of one window and
 * again at the start of the next, as with any fixed window.
 */
export class WindowCounts {
  private readonly model: Model<CountDoc>;
  /** This process's counts, by bucket. */
  private readonly entries = new Map<string, Entry>();
  private timer: NodeJS.Timeout | undefined;
  private syncing: Promise<void> = Promise.resolve();
  private lastSweep = Date.now();

  constructor(conn: Connection, private readonly processes: CountingProcesses, private readonly windowMs: number, private readonly syncEveryMs = 250) {
    this.model = conn.models.WindowCount ?? conn.model<CountDoc>('WindowCount', schema, 'rate_limit_counts');
  }

  /**
   * Counts one request of `bucket` if the window has room for it under `limit`. Far from the limit the
   * answer is at hand (no promise: a request's middleware pays nothing for it); near it, a promise of it.
   */
  take(bucket: string, limit: number): Take | Promise<Take> {
    const now = Date.now();
    const window = Math.floor(now / this.windowMs);
    const resetSeconds = Math.max(1, Math.ceil(((window + 1) * this.windowMs - now) / 1000));
    // One entry per bucket, for its current window: a new window starts it afresh (what was not written of
    // the last one no longer limits anything).
    let entry = this.entries.get(bucket);
    if (!entry || entry.window !== window) {
      entry = { bucket, window, mine: 0, written: 0, others: 0 };
      this.entries.set(bucket, entry);
    }
    const processes = Math.max(1, this.processes.liveCount());
    if (!farFromLimit(entry, limit, processes)) return this.takeExactly(entry, limit, resetSeconds);
    const take = this.decide(entry, limit, resetSeconds);
    // The last admission of this process's unseen share: its count written now, not at the next sync (a
    // quarter of a second in which the others, counting exactly, would not see it).
    if (!farFromLimit(entry, limit, processes)) void this.writeOwn(entry).catch(() => {});
    return take;
  }

  /**
   * Near the limit: this process's unwritten admissions written, the others' counts read afresh, and an
   * admitted request's count written, each before the answer. Without the first write, what this process
   * admitted on the fast path was unseen by the others until its next sync, and they admitted 49 for a
   * limit of 40 (fresh-clone CI, Node 22). Only admitted requests are ever written: a count that included
   * a request about to be refused, read by another process in that moment, made it refuse one the limit
   * had room for (39 admitted for 40). A database that cannot be reached leaves the counts last read: the
   * limit is kept as well as they tell it.
   */
  private async takeExactly(entry: Entry, limit: number, resetSeconds: number): Promise<Take> {
    if (entry.mine > entry.written) await this.writeOwn(entry).catch(() => {});
    await this.readOthers(entry).catch(() => {});
    const take = this.decide(entry, limit, resetSeconds);
    if (take.ok) await this.writeOwn(entry).catch(() => {});
    return take;
  }

  /** Counts the request if the window has room for it; only then does this process's count grow. */
  private decide(entry: Entry, limit: number, resetSeconds: number): Take {
    if (entry.mine + 1 + entry.others > limit) return { ok: false, limit, remaining: 0, resetSeconds };
    entry.mine++;
    this.scheduleSync();
    return { ok: true, limit, remaining: Math.max(0, limit - entry.mine - entry.others), resetSeconds };
  }

  /**
   * This process's count, written now. One write of a document at a time: FerretDB lost one of two $max
   * updates of one document in flight together (both landed, the count stayed at the lower one). A write
   * in flight that carries the count already is waited for; one that does not is followed by another.
   */
  private writeOwn(entry: Entry): Promise<void> {
    const count = entry.mine;
    if (entry.written >= count) return Promise.resolve();
    if (entry.writing) {
      const { writing } = entry;
      return writing.count >= count ? writing.done : writing.done.catch(() => {}).then(() => this.writeOwn(entry));
    }
    return this.writing(entry, count, this.model.updateOne({ _id: this.idOf(entry) }, this.update(entry, count), { upsert: true }));
  }

  /** Marks `entry`'s write of `count` in flight until `write` lands. */
  private writing(entry: Entry, count: number, write: Promise<unknown>): Promise<void> {
    const done = write.then(() => wrote(entry, count)).finally(() => {
      if (entry.writing?.done === done) entry.writing = undefined;
    });
    entry.writing = { count, done };
    return done;
  }

  /**
   * This process's count as an update that never lowers it: a count only grows within its window (a
   * write retried by the driver after a later one landed must not take admissions back).
   */
  private update(entry: Entry, count: number) {
    return { $set: this.docOf(entry), $max: { count } };
  }

  /**
   * Always a fresh read: one a few milliseconds old misses what the others admitted meanwhile, and with
   * admitted counts written only after the answer, such a read let the deployment admit 51 for a limit of 40.
   */
  private async readOthers(entry: Entry): Promise<void> {
    const own = this.idOf(entry);
    const docs = await this.model.find({ window: entry.window, bucket: entry.bucket }, { _id: 1, count: 1 }).lean();
    raiseOthers(entry, docs.filter((d) => d._id !== own).reduce((sum, d) => sum + d.count, 0));
  }

  private scheduleSync(): void {
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.syncing = this.syncing.then(() => this.sync()).catch(() => {});
    }, this.syncEveryMs).unref();
  }

  /** Writes this process's changed counts and reads every other process's counts of the current window. */
  async sync(): Promise<void> {
    const window = Math.floor(Date.now() / this.windowMs);
    for (const [key, entry] of this.entries) if (entry.window < window) this.entries.delete(key);
    // The counts as they are now (admissions counted while the write is in flight are written next time), in
    // one command; a count with a write of its own in flight is written after it (one write of a document at a time).
    const dirty = [...this.entries.values()].filter((e) => e.mine > e.written);
    const after = dirty.filter((e) => e.writing);
    const now = dirty.filter((e) => !e.writing).map((e) => ({ e, count: e.mine }));
    const bulk = now.length ? this.model.bulkWrite(now.map(({ e, count }) => ({ updateOne: { filter: { _id: this.idOf(e) }, update: this.update(e, count), upsert: true } })), { ordered: false }) : undefined;
    await Promise.all([...now.map(({ e, count }) => this.writing(e, count, bulk!)), ...after.map((e) => this.writeOwn(e))]);
    if (this.entries.size) {
      const docs = await this.model.find({ window, process: { $ne: this.processes.id } }, { bucket: 1, count: 1 }).lean();
      const others = new Map<string, number>();
      for (const d of docs) others.set(d.bucket, (others.get(d.bucket) ?? 0) + d.count);
      for (const entry of this.entries.values()) {
        if (entry.window !== window) continue;
        raiseOthers(entry, others.get(entry.bucket) ?? 0);
      }
    }
    if (Date.now() - this.lastSweep > 60_000) {
      this.lastSweep = Date.now();
      await this.model.deleteMany({ until: { $lt: new Date(Date.now() - this.windowMs) } });
    }
  }

  stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    return this.syncing;
  }

  private idOf(entry: Entry): string {
    return `${entry.bucket}|${entry.window}|${this.processes.id}`;
  }

  private docOf(entry: Entry): Omit<CountDoc, '_id' | 'count'> {
    return { bucket: entry.bucket, window: entry.window, process: this.processes.id, until: new Date((entry.window + 1) * this.windowMs) };
  }
}

/**
 * Whether one more admission keeps this process within its unseen share: half the limit shared by the
 * live processes, less what the others have admitted as last read.
 */
function farFromLimit(entry: Entry, limit: number, processes: number): boolean {
  return (entry.mine + 1) * processes + entry.others <= limit * EXACT_FROM;
}

/** This process's count `count` is in the database (counts only grow: an older write landing later changes nothing). */
function wrote(entry: Entry, count: number): void {
  if (count > entry.written) entry.written = count;
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
