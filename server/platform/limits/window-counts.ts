import { Schema, type Connection, type Model } from 'mongoose';

/**
 * One process's count of one bucket (a key, an org, a client address) in one window. Only the process
 * that owns a document writes it (its id is in the `_id`), so no update ever races another's: its own
 * total, written with `$max` (two of its own writes may land in either order), is exact on any engine,
 * FerretDB included.
 */
interface CountDoc { _id: string; bucket: string; window: number; process: string; count: number; until: Date }

const schema = new Schema<CountDoc>({
  _id: String, bucket: { type: String, required: true }, window: { type: Number, required: true }, process: { type: String, required: true },
  count: { type: Number, required: true }, until: { type: Date, required: true },
}, { versionKey: false });
schema.index({ window: 1, bucket: 1 });
schema.index({ until: 1 });

/** A bucket this close to its limit (in its share of the limit) is counted exactly: its requests wait for the database. */
const EXACT_FROM = 0.5;

export interface Take {
  ok: boolean;
  limit: number;
  /** Requests left in the window after this one (0 when refused). */
  remaining: number;
  /** Seconds until the window ends (when a refused request may try again). */
  resetSeconds: number;
}

interface Entry { bucket: string; window: number; mine: number; written: number; others: number }

/**
 * Requests per fixed window, counted across every process of the deployment through the database.
 *
 * Each process counts its own requests in memory and writes its own total per bucket and window
 * (window-counts documents, one per process: nothing races). Far from a limit a request costs no database
 * round trip: the counts are written, and the other processes' read, every `syncEveryMs` in two commands
 * for every bucket at once. Once a bucket's count passes half its limit, each of its requests reads the
 * others' counts before it is answered, and an admitted one writes this process's count, so the deployment
 * admits the limit, give or take the requests that other processes admit in the same few milliseconds
 * (never fewer: only admitted requests are counted). A window is
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

  constructor(conn: Connection, private readonly processId: string, private readonly windowMs: number, private readonly syncEveryMs = 250) {
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
    // Near the limit: the others' counts read afresh before the answer, and an admitted request's count
    // written before it is answered. Only admitted requests are ever written: a count that included a
    // request about to be refused, read by another process in that moment, made it refuse one the limit
    // had room for (the cluster test admitted 39 for a limit of 40). A database that cannot be reached
    // leaves the counts last read: the limit is kept as well as they tell it.
    if (entry.mine + 1 + entry.others > limit * EXACT_FROM) {
      return this.readOthers(entry).catch(() => {}).then(async () => {
        const take = this.decide(entry, limit, resetSeconds);
        if (take.ok) await this.writeOwn(entry).catch(() => {});
        return take;
      });
    }
    return this.decide(entry, limit, resetSeconds);
  }

  /** Counts the request if the window has room for it; only then does this process's count grow. */
  private decide(entry: Entry, limit: number, resetSeconds: number): Take {
    if (entry.mine + 1 + entry.others > limit) return { ok: false, limit, remaining: 0, resetSeconds };
    entry.mine++;
    this.scheduleSync();
    return { ok: true, limit, remaining: Math.max(0, limit - entry.mine - entry.others), resetSeconds };
  }

  /**
   * This process's count, written now. Not marked written: two of these in flight may land in either
   * order, so the next sync writes the total again (decide scheduled one).
   */
  private async writeOwn(entry: Entry): Promise<void> {
    await this.model.updateOne({ _id: this.idOf(entry) }, this.update(entry), { upsert: true });
  }

  /**
   * This process's count as an update that never lowers it: a count only grows within its window, and
   * two writes of one process land in either order (an older, lower one landing last hid admitted
   * requests from the others, which then admitted 50 for a limit of 40).
   */
  private update(entry: Entry) {
    const { count, ...rest } = this.docOf(entry);
    return { $set: rest, $max: { count } };
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
    const dirty = [...this.entries.values()].filter((e) => e.mine !== e.written);
    if (dirty.length) {
      await this.model.bulkWrite(dirty.map((e) => ({ updateOne: { filter: { _id: this.idOf(e) }, update: this.update(e), upsert: true } })), { ordered: false });
      for (const e of dirty) e.written = e.mine;
    }
    if (this.entries.size) {
      const docs = await this.model.find({ window, process: { $ne: this.processId } }, { bucket: 1, count: 1 }).lean();
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
    return `${entry.bucket}|${entry.window}|${this.processId}`;
  }

  private docOf(entry: Entry): Omit<CountDoc, '_id'> {
    return { bucket: entry.bucket, window: entry.window, process: this.processId, count: entry.mine, until: new Date((entry.window + 1) * this.windowMs) };
  }
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
