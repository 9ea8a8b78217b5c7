import { Schema } from 'mongoose';

export type OutgoingStatus = 'pending' | 'settled' | 'failed';

/**
 * A payment this server signed from an identity's wallet (`direction: out`). Written before the paid
 * request goes out, so a crash mid-payment leaves a pending record, never an unrecorded authorization.
 */
export interface OutgoingPaymentDoc {
  _id: string;
  orgId: string;
  identityId: string;
  direction: 'out';
  mandateId: string;
  network: string;
  payerAddress: string;
  recipientAddress: string;
  /** What was paid: for `upto`, what the seller charged (the maximum until its answer says). */
  amountUsdcRaw: string;
  /** absent: exact. upto: a Permit2 permit for at most maxAmountUsdcRaw. */
  scheme?: 'exact' | 'upto' | 'auth-capture' | 'batch-settlement';
  maxAmountUsdcRaw?: string;
  /**
   * auth-capture: the escrow payment (its hash, the reservation that counted it on the mandate), and what
   * the mandate counts of it now (held + captured - refunded); a void or refund gives the rest back.
   */
  escrow?: { hash: string; reservationId: string; day: string; countedUsdcRaw: string; refundedUsdcRaw?: string; state?: 'authorized' | 'captured' | 'voided' | 'refunded' };
  /**
   * batch-settlement: the channel, its cumulative amount (while pending, what this call's voucher signed:
   * the channel's charged total plus the price; once settled, the charged total after the call, which is
   * less for a usage-priced call charged less), and the deposit (or top-up) the call brought, in txHash.
   */
  channel?: { channelId: string; cumulativeUsdcRaw: string; depositUsdcRaw?: string };
  /** The seller's resource identifier from the challenge. */
  resourceUrl: string;
  /** The URL the agent asked to pay. */
  requestUrl: string;
  method: string;
  x402Version: 1 | 2;
  authorizationNonce: string;
  status: OutgoingStatus;
  txHash?: string;
  failureReason?: string;
  responseStatus?: number;
  paymentResponse?: Record<string, unknown>;
  createdAt: Date;
  settledAt?: Date;
}

export const outgoingPaymentSchema = new Schema<OutgoingPaymentDoc>({
  _id: String,
  orgId: { type: String, required: true },
  identityId: { type: String, required: true },
  direction: { type: String, default: 'out' },
  mandateId: { type: String, required: true },
  network: { type: String, required: true },
  payerAddress: { type: String, required: true },
  recipientAddress: { type: String, required: true },
  amountUsdcRaw: { type: String, required: true },
  scheme: String,
  maxAmountUsdcRaw: String,
  escrow: Schema.Types.Mixed,
  channel: Schema.Types.Mixed,
  resourceUrl: { type: String, required: true },
  requestUrl: { type: String, required: true },
  method: { type: String, required: true },
  x402Version: { type: Number, required: true },
  authorizationNonce: { type: String, required: true },
  status: { type: String, required: true },
  txHash: String,
  failureReason: String,
  responseStatus: Number,
  paymentResponse: Schema.Types.Mixed,
  createdAt: { type: Date, required: true },
  settledAt: Date,
}, { versionKey: false, minimize: false });
outgoingPaymentSchema.index({ identityId: 1, createdAt: -1, _id: -1 });
