import { Schema } from 'mongoose';
import type { ChannelConfig } from '../../../../payments/schemes/batch-settlement/evm/chain.js';

/**
 * A payment channel an identity's wallet pays through (x402 `batch-settlement`), one per (wallet, seller's
 * receiver and receiver authorizer): `_id` is the channel id (lowercase). Its balance and what was claimed
 * are the chain's, read when needed; this record says whose channel it is and how to name it on chain.
 */
export interface BuyerChannelDoc {
  _id: string;
  orgId: string;
  identityId: string;
  walletAddress: string;
  network: string;
  chainId: number;
  config: Omit<ChannelConfig, 'withdrawDelay'> & { withdrawDelay: number };
  /** The seller's resource that opened it (for people reading the list). */
  resourceUrl: string;
  /** The URL the first call paid: where a cooperative refund is asked for (a probe and a refund payload, as the official client does). */
  requestUrl?: string;
  /** When the seller last refused the idle sweep's refund request (asked again a day later). */
  refundRefusedAt?: Date;
  createdAt: Date;
}

export const buyerChannelSchema = new Schema<BuyerChannelDoc>({
  _id: String,
  orgId: { type: String, required: true },
  identityId: { type: String, required: true },
  walletAddress: { type: String, required: true },
  network: { type: String, required: true },
  chainId: { type: Number, required: true },
  config: { type: Schema.Types.Mixed, required: true },
  resourceUrl: { type: String, required: true },
  requestUrl: String,
  refundRefusedAt: Date,
  createdAt: { type: Date, required: true },
}, { versionKey: false, minimize: false });
buyerChannelSchema.index({ identityId: 1, createdAt: -1 });

/**
 * One voucher the wallet signed on a channel: `_id` is `<channelId>:s<sequence, 20 digits>`, so the unique
 * `_id` lets one call, in every process, take the channel's next turn; two concurrent calls never sign on
 * the same base. (Vouchers signed before calls could be charged by usage were keyed by their amount, with
 * no `s`: they sort below.) `pending` while its call is out (the next call on the channel waits for it: the
 * seller takes vouchers in order, one call at a time), `accepted` when the seller charged it, `unknown`
 * when its answer was lost (the next call assumes it was charged its whole maximum; the seller's 402 says
 * otherwise and the record is settled or goes). A voucher the seller refused is deleted: its turn is the
 * next call's.
 *
 * Amounts: a call signs `cumulative` = the channel's charged total before it (`cumulative - price`) plus
 * its price, the most it may be charged (a usage-priced route charges less; `chargedTotal` is the
 * channel's total after it). The seller can claim any voucher it holds, so what the wallet has committed
 * is the highest amount it ever signed on the channel (`signedHigh`); `commits` is how much this voucher
 * raised it, which is what the mandate counts for the call.
 */
export interface BuyerVoucherDoc {
  _id: string;
  channelId: string;
  identityId: string;
  seq?: number;
  cumulative: string;
  price: string;
  chargedTotal?: string;
  signedHigh?: string;
  commits?: string;
  status: 'pending' | 'accepted' | 'unknown';
  paymentId: string;
  /** What the mandate holds for this call: committed when the voucher is known accepted, released when known refused. */
  reservation: { reservationId: string; mandateId: string; day: string; amount: number };
  createdAt: Date;
}

export const buyerVoucherSchema = new Schema<BuyerVoucherDoc>({
  _id: String,
  channelId: { type: String, required: true },
  identityId: { type: String, required: true },
  seq: Number,
  cumulative: { type: String, required: true },
  price: { type: String, required: true },
  chargedTotal: String,
  signedHigh: String,
  commits: String,
  status: { type: String, required: true },
  paymentId: { type: String, required: true },
  reservation: { type: Schema.Types.Mixed, required: true },
  createdAt: { type: Date, required: true },
}, { versionKey: false });
buyerVoucherSchema.index({ channelId: 1, _id: -1 });

export const buyerVoucherId = (channelId: string, seq: number) => `${channelId.toLowerCase()}:s${seq.toString().padStart(20, '0')}`;
/** What a channel holds that no voucher commits yet: its balance above the larger of what was charged and what was claimed. */
export function availableOf(balance: bigint, charged: bigint, claimed: bigint): bigint {
  const committed = charged > claimed ? charged : claimed;
  return balance > committed ? balance - committed : 0n;
}

/** The channel's charged total after this voucher's call (a lost answer counts its whole maximum until the seller says otherwise). */
export const chargedTotalOf = (v: Pick<BuyerVoucherDoc, 'cumulative' | 'chargedTotal'>) => BigInt(v.chargedTotal ?? v.cumulative);
/** The highest amount signed on the channel up to this voucher. */
export const signedHighOf = (v: Pick<BuyerVoucherDoc, 'cumulative' | 'signedHigh'>) => BigInt(v.signedHigh ?? v.cumulative);
/** What this voucher added to the wallet's commitment on the channel (what its call's mandate counts). */
export const commitsOf = (v: Pick<BuyerVoucherDoc, 'price' | 'commits'>) => BigInt(v.commits ?? v.price);
