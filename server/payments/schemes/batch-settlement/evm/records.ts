import { Schema, type Connection, type Model } from 'mongoose';
import type { SignedReceipt } from '../../../models.js';
import type { ChannelConfig } from './chain.js';

// The records of channels sold through agentgate's own seller middleware, shared by every process: a
// channel (its config and the chain's state as last read) and its accepted vouchers, one per paid call
// (voucher-book.ts writes them; the sweep claims them; calls.ts reads them as call records).

export interface ChannelDoc {
  _id: string; // the channel id
  orgId: string;
  chainId: number;
  config: ChannelConfig;
  payer: string;
  receiver: string;
  /** The chain's state at `syncedAt` (amounts as decimal strings). */
  balance: string;
  totalClaimed: string;
  withdrawRequestedAt: number;
  refundNonce: string;
  syncedAt: Date;
  createdAt: Date;
}

export interface VoucherDoc {
  /** `<channelId>:<seq, 12 digits>` (voucher-sequence.ts): unique, so one voucher follows each. */
  _id: string;
  /** 1 for the channel's first accepted voucher, then one more for each; no gaps (only the newest is ever released). */
  seq: number;
  channelId: string;
  orgId: string;
  /** The voucher's maxClaimableAmount as the payer signed it. */
  cumulative: string;
  /** The call's price (what the 402 asked; a route priced by usage: its maximum). */
  price: string;
  /**
   * A call priced by usage (`byUsage`), once captured: what the channel has charged after it (the charged
   * total before it plus `amount`, at most `cumulative`). Absent: `cumulative` (voucher-amounts.ts).
   */
  charged?: string;
  /** A call priced by usage, once captured: what its handler reported (at most `price`). Absent: `price`. */
  amount?: string;
  /** Held for a route priced by usage: its capture names what the call used, and its receipt is signed then. */
  byUsage?: boolean;
  signature: string;
  resource: string;
  /**
   * As accepted: `held` while the seller's handler runs (charged only if it succeeds), `captured` for a
   * call charged at once. A held voucher is captured by a document of its own (captures.ts), so a stored
   * voucher never changes; readers see it `captured` through `VoucherCaptures.view`. A released hold is
   * deleted (the buyer signs the same amount for its next call). Only captured vouchers are claimed.
   */
  status: 'held' | 'captured';
  holdExpiresAt?: Date;
  /** Names the hold that inserted it: a capture arriving after its hold expired (and another call took the same amount) matches nothing. */
  holdToken?: string;
  /** The paid call's answer, given again by its capture. */
  response: Record<string, unknown>;
  /** The call's record id (`chc_…`, from the voucher id): GET /v0/payments/{id} and the receipt name it. */
  callId?: string;
  /** The registered endpoint the call paid for (its webhook hears of the claim). */
  endpointId?: string | null;
  /** Signed when the voucher is accepted (a call priced by usage: when it is captured, with its charge); never rewritten. */
  signedReceipt?: SignedReceipt;
  /** When the voucher was accepted: the call was paid. */
  createdAt: Date;
  /** `createdAt`'s minute (minuteOf): the sweep finds the vouchers accepted since its last round by equality on it (sweep-work.ts). */
  minute?: number;
}

/**
 * A time's minute, as the sweep looks vouchers and captures up by: an equality on it is answered from an
 * index by every engine (FerretDB answers a range on `createdAt` by reading the whole collection).
 */
export const minuteOf = (at: Date) => Math.floor(at.getTime() / 60_000);

const channelSchema = new Schema<ChannelDoc>({
  _id: String, orgId: { type: String, index: true }, chainId: Number, config: Schema.Types.Mixed, payer: String, receiver: String,
  balance: String, totalClaimed: String, withdrawRequestedAt: Number, refundNonce: String, syncedAt: Date, createdAt: Date,
}, { versionKey: false });
const voucherSchema = new Schema<VoucherDoc>({
  _id: String, seq: Number, channelId: String, orgId: String, cumulative: String, price: String, charged: String, amount: String, byUsage: Boolean, signature: String, resource: String,
  status: String, holdExpiresAt: Date, holdToken: String, response: Schema.Types.Mixed, callId: String, endpointId: String, signedReceipt: Schema.Types.Mixed, createdAt: Date, minute: Number,
}, { versionKey: false, minimize: false });
// A call's record by its id (GET /v0/payments/chc_…).
voucherSchema.index({ callId: 1 });
// What was accepted since the sweep's last round (sweep-work.ts).
voucherSchema.index({ minute: 1 });
// A seller's channels, newest first (the channel list).
channelSchema.index({ orgId: 1, createdAt: -1, _id: -1 });
/** The channels and vouchers collections of a connection. */
export function channelModels(conn: Connection): { channels: Model<ChannelDoc>; vouchers: Model<VoucherDoc> } {
  return {
    channels: (conn.models.Channel as Model<ChannelDoc>) ?? conn.model<ChannelDoc>('Channel', channelSchema, 'channels'),
    vouchers: (conn.models.ChannelVoucher as Model<VoucherDoc>) ?? conn.model<VoucherDoc>('ChannelVoucher', voucherSchema, 'channel_vouchers'),
  };
}
