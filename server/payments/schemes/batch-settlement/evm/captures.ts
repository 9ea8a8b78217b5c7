import type { Collection } from 'mongodb';
import { Schema, type Connection, type Model } from 'mongoose';
import { GroupedInserts, type InsertResult } from '../../../../platform/group-commit.js';
import { findByIds } from '../../../../platform/find-by-ids.js';
import type { SignedReceipt } from '../../../models.js';

// A held call's capture is a document of its own, keyed by its hold id, never an update of the voucher.
// Every paid call through our middleware is held while the seller's handler runs, so a capture follows
// nearly every voucher: as an update, it was the costliest write of a paid call (the embedded engine runs
// each statement of an update command one after the other, a few at a time: each capture waited 40-60 ms
// in that queue at 64 buyers, and the whole bench spent 9.1 ms of CPU per paid call against 4.6 ms with
// inserts, bench/channels.ts part 2). As an insert, captures written at the same time leave together in
// one insertMany, and the unique `_id` keeps a capture asked twice (its answer lost) a single capture. The
// voucher document stays as it was accepted: `held` in its `status`, captured when its capture exists.
// Readers see the two together through `view` / `views`.

export interface CaptureDoc {
  /** The hold id, `<voucher id>:<hold token>`: a later hold of the same number (after a release) is another capture. */
  _id: string;
  orgId: string;
  /** A call priced by usage: the channel's charged total after it (voucher-amounts.ts). */
  charged?: string;
  /** A call priced by usage: what its handler reported. */
  amount?: string;
  /** A call priced by usage: its answer, saying what it was charged. */
  response?: Record<string, unknown>;
  /** A call priced by usage: its receipt, signed with its charge. */
  signedReceipt?: SignedReceipt;
  createdAt: Date;
  /** `createdAt`'s minute: the sweep finds the captures since its last round by it (records.ts minuteOf). */
  minute?: number;
}

/** The fields of a voucher (records.ts's VoucherDoc) a capture reads and adds to, named here by shape. */
interface Voucher {
  _id: string;
  status: 'held' | 'captured';
  holdToken?: string;
  holdExpiresAt?: Date;
  charged?: string;
  amount?: string;
  response: Record<string, unknown>;
  signedReceipt?: SignedReceipt;
}

/** What a capture adds to its voucher (a call priced by usage: what it was charged). */
export type CaptureCharges = Pick<CaptureDoc, 'charged' | 'amount' | 'response' | 'signedReceipt'>;

const captureSchema = new Schema<CaptureDoc>({
  _id: String, orgId: String, charged: String, amount: String, response: Schema.Types.Mixed, signedReceipt: Schema.Types.Mixed, createdAt: Date, minute: Number,
}, { versionKey: false, minimize: false });
// What was captured since the sweep's last round (sweep-work.ts).
captureSchema.index({ minute: 1 });

/** A held voucher's hold id: what its capture is keyed by. */
export const holdIdOf = (voucher: Pick<Voucher, '_id' | 'holdToken'>) => `${voucher._id}:${voucher.holdToken}`;

/** A held voucher as its capture leaves it (a call priced by usage: with what it was charged). */
export function capturedCopy<V extends Voucher>(held: V, charges?: CaptureCharges): V {
  const { holdExpiresAt: _expiry, ...rest } = held;
  const { charged, amount, response, signedReceipt } = charges ?? {};
  return { ...rest, ...(charged !== undefined ? { charged } : {}), ...(amount !== undefined ? { amount } : {}), ...(response ? { response } : {}), ...(signedReceipt ? { signedReceipt } : {}), status: 'captured' } as V;
}

export class VoucherCaptures {
  readonly model: Model<CaptureDoc>;
  private readonly inserts: GroupedInserts<CaptureDoc>;

  constructor(conn: Connection) {
    this.model = (conn.models.ChannelCapture as Model<CaptureDoc>) ?? conn.model<CaptureDoc>('ChannelCapture', captureSchema, 'channel_captures');
    this.inserts = new GroupedInserts(() => this.model.collection as unknown as Collection<CaptureDoc>);
  }

  /** Writes a capture once: `duplicate` when this hold was captured already. */
  record(capture: CaptureDoc): Promise<InsertResult> {
    return this.inserts.insert(capture);
  }

  /** A hold's capture, if it was captured. */
  find(holdId: string): Promise<CaptureDoc | null> {
    return this.model.findById(holdId).lean();
  }

  /** The voucher as people and the sweep see it: a held one whose capture exists is captured. */
  async view<V extends Voucher>(voucher: V | null): Promise<V | null> {
    if (voucher?.status !== 'held') return voucher;
    const capture = await this.find(holdIdOf(voucher));
    return capture ? capturedCopy(voucher, capture) : voucher;
  }

  /** `view` of each (the held ones' captures looked up together). */
  async views<V extends Voucher>(vouchers: V[]): Promise<V[]> {
    const held = vouchers.filter((v) => v.status === 'held');
    if (held.length === 0) return vouchers;
    const captures = new Map((await findByIds(held.map(holdIdOf), (id) => this.find(id))).map((c) => [c._id, c]));
    return vouchers.map((v) => {
      const capture = v.status === 'held' ? captures.get(holdIdOf(v)) : undefined;
      return capture ? capturedCopy(v, capture) : v;
    });
  }
}
