import { Schema } from 'mongoose';

/**
 * A timed withdrawal of one of the wallet's payment channels (x402 batch-settlement's `initiateWithdraw`,
 * then `finalizeWithdraw` after the channel's withdraw delay), sent by the wallet's owner key. `_id` is
 * `<channelId>:<n>`, n the number of the channel's withdrawals already over: every process that starts
 * one while none is under way inserts the same id, so exactly one of them sends. `starting` until the
 * start is mined (a start whose transaction failed is deleted: its id is free again), `pending` until it
 * is finalized (`finalized`) or a cooperative refund by the seller ended it first (`ended`).
 */
export interface ChannelWithdrawalDoc {
  _id: string;
  channelId: string;
  orgId: string;
  identityId: string;
  status: 'starting' | 'pending' | 'finalized' | 'ended';
  /** Who started it: the identity (POST /v0/wallet/channels/:id/withdraw, payments_withdraw_channel) or the idle round (the seller did not refund). */
  startedBy: 'request' | 'idle_round';
  /** What the start asked for (atomic USDC): the balance above what accepted vouchers committed. */
  amountRaw: string;
  createdAt: Date;
  startTx?: string;
  /** The relayer's transaction that gave the owner key its gas for the start (none: it held enough). */
  startFundingTx?: string | null;
  /** The chain's block and time of the start, and when it may be finalized (the chain's time). */
  startBlock?: number;
  startedAt?: Date;
  finalizableAt?: Date;
  finalizeTx?: string;
  finalizeFundingTx?: string | null;
  /** What came back to the wallet (atomic USDC, the WithdrawFinalized event): less than asked when the seller claimed vouchers first. */
  withdrawnRaw?: string;
  finalizedAt?: Date;
}

export const channelWithdrawalSchema = new Schema<ChannelWithdrawalDoc>({
  _id: String,
  channelId: { type: String, required: true },
  orgId: { type: String, required: true },
  identityId: { type: String, required: true },
  status: { type: String, required: true },
  startedBy: { type: String, required: true },
  amountRaw: { type: String, required: true },
  createdAt: { type: Date, required: true },
  startTx: String,
  startFundingTx: { type: String, default: undefined },
  startBlock: Number,
  startedAt: Date,
  finalizableAt: Date,
  finalizeTx: String,
  finalizeFundingTx: { type: String, default: undefined },
  withdrawnRaw: String,
  finalizedAt: Date,
}, { versionKey: false });
channelWithdrawalSchema.index({ channelId: 1, status: 1 });
channelWithdrawalSchema.index({ status: 1, finalizableAt: 1 });
