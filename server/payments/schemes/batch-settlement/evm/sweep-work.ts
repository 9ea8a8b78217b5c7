import { Schema, type Connection, type Model } from 'mongoose';
import { isDuplicateKey } from '../../../../platform/errors.js';
import { findByIds } from '../../../../platform/find-by-ids.js';
import { minuteOf } from './records.js';
import type { VoucherBook } from './voucher-book.js';

// The sweep's work set: the channels a round must look at. A round reads only these, never every channel
// the seller ever had: after a year, a seller's 100,000 channels are mostly claimed and idle, and reading
// each one's newest voucher every few minutes would grow with history instead of with what is happening.
// A channel enters when a voucher or a capture of it is written (found by the round, from what was written
// since the last one) and leaves once the chain shows nothing more to claim or refund. The set and its
// cursor are written by the sweep alone: the paid call writes nothing more than its voucher.

/**
 * How far before the last round's start the next round looks for new vouchers: a voucher is stamped when
 * its call was accepted, in the process that accepted it, and may be written (grouped inserts, a slow
 * database, another host's clock) a while after that.
 */
export const SWEEP_LOOKBACK_MS = 2 * 60_000;

/**
 * After this many minutes without a round (the sweep stopped), the next reads every channel of the chain
 * once instead of a lookup per minute missed.
 */
const MOST_MINUTES = 60;

/**
 * For this long after the first round of this code, a round also finds the vouchers written without a
 * minute: a rolling upgrade's older processes still accept calls meanwhile (docs/operators/upgrades.md).
 */
export const SWEEP_UPGRADE_WINDOW_MS = 60 * 60_000;

export interface SweepWorkDoc {
  _id: string; // the channel id
  chainId: number;
  /** The newest voucher or capture that put it here: a round that found it finished removes it only if nothing newer came since. */
  touchedAt: Date;
}

/** A chain's cursor: when its last round began (`at`) and its first (`since`). */
interface CursorDoc { _id: string; at: Date; since: Date }

const workSchema = new Schema<SweepWorkDoc>({ _id: String, chainId: Number, touchedAt: Date }, { versionKey: false });
workSchema.index({ chainId: 1 });
const cursorSchema = new Schema<CursorDoc>({ _id: String, at: Date, since: Date }, { versionKey: false });

export class ChannelSweepWork {
  private readonly work: Model<SweepWorkDoc>;
  private readonly cursors: Model<CursorDoc>;

  constructor(conn: Connection, private readonly book: Pick<VoucherBook, 'channels' | 'vouchers' | 'captures'>) {
    this.work = (conn.models.ChannelSweepWork as Model<SweepWorkDoc>) ?? conn.model('ChannelSweepWork', workSchema, 'channel_sweep_work');
    this.cursors = (conn.models.ChannelSweepCursor as Model<CursorDoc>) ?? conn.model('ChannelSweepCursor', cursorSchema, 'channel_sweep_cursors');
  }

  /**
   * The channels of this chain a round beginning `now` must look at, after adding those written to since
   * the last round began. The first round on a database (no cursor yet) adds every channel of the chain, once.
   */
  async due(chainId: number, now: Date): Promise<SweepWorkDoc[]> {
    const cursor = await this.cursors.findById(String(chainId)).lean();
    const from = cursor && new Date(cursor.at.getTime() - SWEEP_LOOKBACK_MS);
    const touched = from && minuteOf(now) - minuteOf(from) < MOST_MINUTES ? await this.touchedIn(minuteOf(from), minuteOf(now)) : undefined;
    if (touched && now.getTime() - cursor!.since.getTime() < SWEEP_UPGRADE_WINDOW_MS) {
      for (const [id, at] of await this.touchedWithoutMinute(new Date(cursor!.since.getTime() - SWEEP_LOOKBACK_MS))) touch(touched, id, at);
    }
    const ours = touched
      ? (touched.size ? await findByIds([...touched.keys()], (id) => this.book.channels.findOne({ _id: id, chainId }, { _id: 1, createdAt: 1 }).lean()) : [])
      : await this.book.channels.find({ chainId }, { _id: 1, createdAt: 1 }).lean();
    for (let i = 0; i < ours.length; i += 1_000) {
      await this.work.bulkWrite(ours.slice(i, i + 1_000).map((c) => ({
        updateOne: { filter: { _id: c._id }, update: { $set: { chainId }, $max: { touchedAt: touched?.get(c._id) ?? c.createdAt } }, upsert: true },
      })), { ordered: false }).catch((err) => {
        // Two rounds (one ran long) upserting one channel at once: the other's insert put it in the set.
        if (!isDuplicateKey(err)) throw err;
      });
    }
    return this.work.find({ chainId }).lean();
  }

  /** Removes channels a round found with nothing left to do, unless a voucher came in since the round read them. */
  async leave(done: SweepWorkDoc[]): Promise<void> {
    if (!done.length) return;
    await this.work.bulkWrite(done.map((d) => ({ deleteOne: { filter: { _id: d._id, touchedAt: d.touchedAt } } })), { ordered: false });
  }

  /** Records that a round began at `at`, once what was written before it is in the set: the next one looks from a little before it. */
  async advance(chainId: number, at: Date): Promise<void> {
    await this.cursors.updateOne({ _id: String(chainId) }, { $max: { at }, $setOnInsert: { since: at } }, { upsert: true });
  }

  /** The channels with a voucher or a capture written in these minutes, each with the newest one's time: an equality lookup per minute. */
  private async touchedIn(first: number, last: number): Promise<Map<string, Date>> {
    const touched = new Map<string, Date>();
    for (let minute = first; minute <= last; minute++) await this.touchedBy({ minute }, touched);
    return touched;
  }

  /** Vouchers and captures written since `since` by processes older than the minute (a scan, for the upgrade window only). */
  private touchedWithoutMinute(since: Date): Promise<Map<string, Date>> {
    return this.touchedBy({ minute: { $exists: false }, createdAt: { $gte: since } }, new Map());
  }

  /** Adds to `touched` the channels of the vouchers and captures matching `filter`, each at its newest write. */
  private async touchedBy(filter: Record<string, unknown>, touched: Map<string, Date>): Promise<Map<string, Date>> {
    const [vouchers, captures] = await Promise.all([
      this.book.vouchers.find(filter, { channelId: 1, createdAt: 1 }).lean(),
      this.book.captures.model.find(filter, { _id: 1, createdAt: 1 }).lean(),
    ]);
    for (const v of vouchers) touch(touched, v.channelId, v.createdAt);
    // A capture's id is its hold's: `<channel id>:<seq>:<hold token>`.
    for (const c of captures) touch(touched, c._id.split(':')[0]!, c.createdAt);
    return touched;
  }
}

/** Keeps the newest time a channel was written to. */
function touch(touched: Map<string, Date>, channelId: string, at: Date): void {
  const seen = touched.get(channelId);
  if (!seen || seen < at) touched.set(channelId, at);
}
