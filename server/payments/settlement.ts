import { getAddress, type Hex } from 'viem';
import type { Authorization } from '../chain/usdc.js';
import type { PaymentDoc } from './models.js';
import type { JwsReceipt } from '../../middleware/offer-receipt.js';

/** How one payment's settlement ended, for either door (redeem, the facilitator API). */
export type SettlementResult =
  /** amount and maxAmount: an `upto` payment's charge and the most the buyer allowed (atomic units). */
  | { ok: true; paymentId: string; txHash: string; payer: string; offerReceipt?: JwsReceipt; amount?: string; maxAmount?: string }
  | { ok: false; reason: string; message: string; payer?: string; txHash?: string; unavailable?: true };

export const authorizationOf = (doc: Pick<PaymentDoc, 'authorization'>): Authorization => ({
  from: getAddress(doc.authorization.from),
  to: getAddress(doc.authorization.to),
  value: BigInt(doc.authorization.value),
  validAfter: BigInt(doc.authorization.validAfter),
  validBefore: BigInt(doc.authorization.validBefore),
  nonce: doc.authorization.nonce as Hex,
});
