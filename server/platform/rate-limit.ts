import { Schema, type Connection, type Model } from 'mongoose';
import { AppError, isDuplicateKey } from './errors.js';
import { shuffled } from './random-order.js';

/**
 * A window is cut into this many steps. A slot taken during step q holds steps q..q+STEPS_PER_WINDOW, so
 * two takes less than a window apart always want a common step, and the slot is free again between one
 * window and one window plus one step (a second of a minute) after it was taken.
 */
const STEPS_PER_WINDOW = 60;
/** Rounds of "read the free slots, try each": a caller only loses a round when others took those slots. */
const ROUNDS = 3;
const SWEEP_EVERY_MS = 60_000;

interface Mark {
  /** `${bucket}:${slot}:${step}`: the unique index that makes a slot's use exclusive. */
  _id: string;
  bucket: string;
  slot: number;
  step: number;
  /** When the step ends: after it the mark blocks nothing and is swept. */
  until: Date;
  /** When the take this mark belongs to lets go of the slot (the end of its last step). */
  freeAt: Date;
}

const schema = new Schema<Mark>({
  _id: String,
  bucket: { type: String, required: true },
  slot: { type: Number, required: true },
  step: { type: Number, required: true },
  until: { type: Date, required: true },
  freeAt: { type: Date, required: true },
}, { versionKey: false });
schema.index({ bucket: 1, step: 1 });
schema.index({ until: 1 });

interface SlotView {
  /** Slots nobody holds at the current step. */
  free: number[];
  /** Seconds until the first held slot is free again (when none is free now). */
  retryAfter: number;
}

/**
 * A limit of `limit` requests per window, shared by every server process through the database and exact
 * under concurrency, on FerretDB 1.x too, whose conditional updates and deletes are not atomic: the only
 * thing it relies on is a unique index.
 *
 * The bucket has `limit` slots. An accepted request takes one slot for one window by inserting one mark
 * per step it holds the slot for (`bucket:slot:step`, steps q..q+STEPS_PER_WINDOW). Two takes of a slot
 * less than a window apart share a step, so they want the same mark and only one insert succeeds; a slot
 * cannot be taken twice within a window, hence at most `limit` requests per window, whichever processes
 * and interleavings are involved (steps come from each process's clock: clocks that disagree by d shorten
 * the window by d). Counting hits and deleting one's own hit when over the limit, as this did before,
 * over-admits: two processes each read the window before the other's hit is visible (11 and 13 of 33).
 * The "at most" needs no read; reads choose which slots to try (a caller is refused only once every slot
 * it found free was taken by others) and compute Retry-After.
 */
export class RateLimiter {
  private readonly marks: Model<Mark>;
  private lastSweep = 0;

  /** `now` is the clock steps are cut from (a test moves it by hand: a burst stays within one window however slow the machine). */
  constructor(conn: Connection, private readonly now: () => number = Date.now) {
    this.marks = conn.models.RateLimitMark ?? conn.model<Mark>('RateLimitMark', schema, 'rate_limit_marks');
  }

  /** Whether `bucket` already holds `limit` requests in the window, without taking one (a gate before work that counts only failures). */
  async exhausted(bucket: string, limit: number, windowMs: number): Promise<{ exhausted: boolean; retryAfter: number }> {
    const view = await this.view(bucket, limit, windowMs);
    return { exhausted: view.free.length === 0, retryAfter: view.retryAfter };
  }

  /** Takes one of the bucket's slots for one window, or throws 429 with Retry-After when all are held. */
  async consume(bucket: string, limit: number, windowMs: number): Promise<void> {
    let view: SlotView | undefined;
    for (let round = 0; round < ROUNDS; round++) {
      view = await this.view(bucket, limit, windowMs);
      if (!view.free.length) break;
      // Concurrent callers try the free slots in different orders, so most of them win on the first try.
      for (const slot of shuffled(view.free)) {
        if (await this.take(bucket, slot, windowMs)) {
          this.sweep();
          return;
        }
      }
    }
    // Every slot this caller found free was taken by someone else meanwhile: the window is full.
    if (view?.free.length) view = await this.view(bucket, limit, windowMs);
    const retryAfter = Math.max(1, view?.retryAfter ?? 1);
    throw new AppError(429, 'rate_limited', `Too many requests; retry in ${retryAfter} s`, { retryAfter }, { 'Retry-After': String(retryAfter) });
  }

  /** The slots held at the current step: each take marks every step it holds, so one step tells all. */
  private async view(bucket: string, limit: number, windowMs: number): Promise<SlotView> {
    const stepMs = stepOf(windowMs);
    const now = this.now();
    const held = (await this.marks.find({ bucket, step: Math.floor(now / stepMs) }, { slot: 1, freeAt: 1 }).lean()).filter((mark) => mark.slot < limit);
    const busy = new Set(held.map((mark) => mark.slot));
    const free = Array.from({ length: limit }, (_, slot) => slot).filter((slot) => !busy.has(slot));
    const freeAt = Math.min(...held.map((mark) => mark.freeAt.getTime()));
    return { free, retryAfter: free.length ? 0 : Math.max(1, Math.ceil((freeAt - now) / 1000)) };
  }

  /**
   * Inserts the slot's marks for this step and the next STEPS_PER_WINDOW, in order. A duplicate on the
   * first mark means the slot is held; a duplicate later on means a caller at the next step (or on a clock
   * slightly ahead) won the race for the same slot: this caller withdraws the marks it did insert.
   */
  private async take(bucket: string, slot: number, windowMs: number): Promise<boolean> {
    const stepMs = stepOf(windowMs);
    // The step is read at insert time, not when the slots were read: a slow caller holds the slot from now on.
    const first = Math.floor(this.now() / stepMs);
    const freeAt = new Date((first + STEPS_PER_WINDOW + 1) * stepMs);
    const marks: Mark[] = Array.from({ length: STEPS_PER_WINDOW + 1 }, (_, i) => {
      const step = first + i;
      return { _id: `${bucket}:${slot}:${step}`, bucket, slot, step, until: new Date((step + 1) * stepMs), freeAt };
    });
    try {
      await this.marks.collection.insertMany(marks as never[], { ordered: true });
      return true;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const inserted = (err as { insertedCount?: number }).insertedCount ?? 0;
      // One delete per mark: an equality on _id is what FerretDB answers from its index ($in scans).
      await Promise.all(marks.slice(0, inserted).map((mark) => this.marks.deleteOne({ _id: mark._id })));
      return false;
    }
  }

  /** Housekeeping, at most once a minute per process: marks of past steps block nothing. */
  private sweep(): void {
    const now = this.now();
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    // A margin of a minute for clocks of other processes that run a little behind this one.
    this.marks.deleteMany({ until: { $lt: new Date(now - 60_000) } }).catch(() => {});
  }
}

function stepOf(windowMs: number): number {
  return Math.max(1, Math.ceil(windowMs / STEPS_PER_WINDOW));
}
