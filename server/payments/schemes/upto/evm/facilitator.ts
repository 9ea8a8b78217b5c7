import { isAddressEqual, type Address } from 'viem';
import { decodeUptoPayload, isUptoPayload, offerReceiptExtension, toCaip2Network, type UptoPaymentPayloadV2, UptoRequirementsV2Schema, uptoSpecReason, uptoStatusOf } from 'agentgate-x402-wire';
import type { ChainService } from '../../../../chain/chain-service.js';
import type { SellerAccountDoc } from '../../../models.js';
import type { Endpoints } from '../../../endpoints.js';
import type { SettleTerms } from '../../../payment-settlement.js';
import type { SettlementResult } from '../../../settlement.js';
import { payeeRefusal, paymentFlowRefusal, requirementsIssue, resourceOf, settleRefused, verifyRefused, type FacilitatorAnswer, type FacilitatorRequest, type Refusal } from '../../../facilitator-api.js';
import type { UptoRefused, UptoVerified } from './verify.js';

// The facilitator API (`/verify`, `/settle`) for `upto` payments (x402 v2 only): the request read into a
// permit and the terms it must meet, and the answers in the reason codes of the x402 upto EVM scheme.

/** What an upto payment must meet: the seller's payee and the maximum the requirements named (which the permit must allow exactly). */
export interface UptoSettleTerms { resource: string; maxAmount: bigint; endpoint: SettleTerms['endpoint']; door: SettleTerms['door']; payTo?: string }

/** What the facilitator asks of the upto scheme: its verification and its settlement. */
export interface UptoPayments {
  verify(seller: SellerAccountDoc, payload: UptoPaymentPayloadV2, terms: { maxAmount: bigint; payTo?: string }): Promise<UptoVerified | UptoRefused>;
  settle(seller: SellerAccountDoc, payload: UptoPaymentPayloadV2, terms: UptoSettleTerms & { charge: bigint }): Promise<SettlementResult>;
}

type Terms = { payload: UptoPaymentPayloadV2; amountAtomic: bigint; maxAmount: bigint; resource: string; payTo: string };

/**
 * Reads a request into the permit and its terms. The requirements' amount is phase-dependent (the
 * scheme's rule): at /verify the maximum, which the permit must allow exactly; at /settle the amount to
 * charge, at most the permit's maximum. The payload's `accepted` must be the requirement it was signed for.
 */
function termsOf(request: FacilitatorRequest, seller: SellerAccountDoc, chain: ChainService): Terms | Refusal {
  if (request.x402Version !== 2) return { reason: 'unsupported_x402_version', message: 'the upto scheme is x402 v2 only' };
  if (request.paymentRequirements.scheme !== 'upto' || !isUptoPayload(request.paymentPayload)) {
    return { reason: 'unsupported_scheme', message: 'the payment payload and the requirements name different schemes' };
  }
  const decoded = decodeUptoPayload(request.paymentPayload);
  if (!decoded.ok) return { reason: 'invalid_payload', message: decoded.message };
  const requirement = UptoRequirementsV2Schema.safeParse(request.paymentRequirements);
  if (!requirement.success) return requirementsIssue(requirement.error);
  const r = requirement.data;
  if (toCaip2Network(r.network) !== chain.caip2) return { reason: 'network_mismatch', message: `this facilitator settles on ${chain.caip2}, not ${r.network}` };
  if (!isAddressEqual(r.asset as Address, chain.usdc.address)) return { reason: 'asset_mismatch', message: `this facilitator settles USDC at ${chain.usdc.address}, not ${r.asset}` };
  const payee = payeeRefusal(seller, r.payTo);
  if (payee) return payee;
  const payload = decoded.payload;
  const accepted = payload.accepted;
  const maxAmount = BigInt(payload.payload.permit2Authorization.permitted.amount);
  if (BigInt(accepted.amount) !== maxAmount || !isAddressEqual(accepted.payTo as Address, r.payTo as Address) || !isAddressEqual(accepted.asset as Address, r.asset as Address)) {
    return { reason: 'invalid_payment_requirements', message: 'the payload was accepted for other requirements (its maximum, payTo or asset differ from the permit\'s or these)' };
  }
  // EVM upto is settled after the work, for what it used: the authorization flow only.
  const flow = paymentFlowRefusal(r.extra, accepted.extra, 'upto', ['authorization']);
  if (flow) return flow;
  return { payload, amountAtomic: BigInt(r.amount), maxAmount, resource: resourceOf(payload.resource?.url), payTo: r.payTo };
}

export class UptoFacilitator {
  constructor(private readonly upto: UptoPayments, private readonly endpoints: Endpoints) {}

  async verify(request: FacilitatorRequest, seller: SellerAccountDoc, chain: ChainService): Promise<FacilitatorAnswer> {
    const terms = termsOf(request, seller, chain);
    if ('reason' in terms) return { body: verifyRefused(uptoSpecReason, terms) };
    const verified = await this.upto.verify(seller, terms.payload, { maxAmount: terms.amountAtomic, payTo: terms.payTo });
    if (verified.ok) return { body: { isValid: true, payer: verified.payer } };
    return { status: uptoStatusOf(verified.reason), body: { ...verifyRefused(uptoSpecReason, verified), payer: terms.payload.payload.permit2Authorization.from } };
  }

  async settle(request: FacilitatorRequest, seller: SellerAccountDoc, chain: ChainService, network: string): Promise<FacilitatorAnswer> {
    const terms = termsOf(request, seller, chain);
    if ('reason' in terms) return { body: settleRefused(uptoSpecReason, network, terms) };
    const payer = terms.payload.payload.permit2Authorization.from;
    // The seller names the charge; more than the buyer allowed is refused before anything is claimed.
    if (terms.amountAtomic > terms.maxAmount) {
      return { body: settleRefused(uptoSpecReason, network, { reason: 'settlement_exceeds_amount', message: `the amount to settle ${terms.amountAtomic} is above the permit's maximum ${terms.maxAmount}; nothing was charged`, payer }) };
    }
    const endpoint = await this.endpoints.forResource(seller._id, terms.resource);
    const outcome = await this.upto.settle(seller, terms.payload, { resource: terms.resource, maxAmount: terms.maxAmount, charge: terms.amountAtomic, endpoint, door: 'facilitator', payTo: terms.payTo });
    if (!outcome.ok) {
      return { status: outcome.reason === 'payment_identifier_conflict' ? 409 : uptoStatusOf(outcome.reason), body: settleRefused(uptoSpecReason, network, outcome) };
    }
    return {
      body: {
        success: true, transaction: outcome.txHash, network, payer: outcome.payer, amount: outcome.amount ?? terms.amountAtomic.toString(),
        ...(outcome.offerReceipt ? { extensions: offerReceiptExtension(outcome.offerReceipt) } : {}),
      },
    };
  }
}
