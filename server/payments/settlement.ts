import type { JwsReceipt } from 'agentgate-x402-wire';

/** How one payment's settlement ended, for either door (redeem, the facilitator API), whatever its scheme. */
export type SettlementResult =
  /** amount and maxAmount: an `upto` payment's charge and the most the buyer allowed (atomic units). */
  | { ok: true; paymentId: string; txHash: string; payer: string; offerReceipt?: JwsReceipt; amount?: string; maxAmount?: string }
  | { ok: false; reason: string; message: string; payer?: string; txHash?: string; unavailable?: true };
