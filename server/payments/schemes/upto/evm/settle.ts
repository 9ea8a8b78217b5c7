import type { Hex } from 'viem';
import type { ChainService } from '../../../../chain/chain-service.js';
import { type Eip2612Permit } from '../../../../chain/permit2.js';
import { UPTO_PROXY_ADDRESS, uptoPermitOf, type UptoPermit } from './chain.js';
import type { PaymentDoc } from '../../../models.js';
import type { SettleOutcome } from '../../../../settlement/settler.js';
import type { SendTools } from '../../../../settlement/work.js';
import { sendProxySettlement } from '../../permit2-proxy.js';
import { simulateUptoSettle, uptoSettleCalldata } from './verify.js';

/**
 * Sends one x402 `upto` settlement: the proxy's `settle(permit, amount, owner, witness, signature)` from
 * the facilitator account the buyer named (the proxy accepts no other sender, so upto settlements are
 * never batched through Multicall3). The amount is the seller's charge, at most the permit's maximum; a
 * zero charge sends nothing (the scheme says the permit then simply expires), and the caller records it.
 * Simulated first with the actual amount (permit2-proxy.ts).
 */
/** Gas for one settle: Permit2's signature check (ERC-1271 for smart accounts) and the token transfer. */
export const UPTO_SETTLE_GAS = 250_000n;

export interface UptoSettlementRequest {
  permit: UptoPermit; signature: Hex; amount: bigint; paymentId?: string; permit2612?: Eip2612Permit;
  /** The record being settled: to find its settlement if the permit was used already. */
  payment?: PaymentDoc;
}

export async function sendUptoSettlement(chain: ChainService, tools: Pick<SendTools, 'submitFrom'>, request: UptoSettlementRequest): Promise<SettleOutcome> {
  const { permit, signature, amount, permit2612 } = request;
  if (amount > permit.maxAmount) return { ok: false, reason: 'settlement_exceeds_amount', message: `the charge ${amount} is above the permit's maximum ${permit.maxAmount}` };
  // With the buyer's EIP-2612 permit, as long as Permit2 still lacks the allowance (settleWithPermit
  // carries on when the permit was already used, so a resend after a crash is safe either way).
  return sendProxySettlement(chain, {
    kind: 'upto', owner: permit.from, nonce: permit.nonce, ...(request.payment ? { payment: request.payment } : {}),
    tx: { to: UPTO_PROXY_ADDRESS, data: uptoSettleCalldata(permit, amount, signature, permit2612), gas: UPTO_SETTLE_GAS },
    simulate: () => simulateUptoSettle(chain, permit, amount, signature, permit2612),
    submit: (tx) => tools.submitFrom(permit.facilitator, tx, { scheme: 'upto', ...(request.paymentId ? { paymentIds: [request.paymentId] } : {}) }),
  });
}

/** The permit of an upto payment record. */
export const uptoPermitOfRecord = (payment: Pick<PaymentDoc, 'permit2Authorization'>): UptoPermit => uptoPermitOf(payment.permit2Authorization as Parameters<typeof uptoPermitOf>[0]);
