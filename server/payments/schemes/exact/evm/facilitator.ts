import { isAddressEqual, type Address } from 'viem';
import { type DecodedPaymentHeader, decodeExactPermit2Payload, decodePaymentPayload, type ExactPermit2PaymentPayloadV2, exactPermit2SpecReason, exactSpecReason, isExactPermit2Payload, offerReceiptExtension, PaymentRequirementsV1Schema, PaymentRequirementsV2Schema, toCaip2Network, toV1Network } from 'agentgate-x402-wire';
import type { ChainService } from '../../../../chain/chain-service.js';
import type { SellerAccountDoc } from '../../../models.js';
import type { Endpoints } from '../../../endpoints.js';
import type { SettleTerms } from '../../../payment-settlement.js';
import type { SettlementResult } from '../../../settlement.js';
import { payeeRefusal, paymentFlowRefusal, requirementsIssue, resourceOf, settleRefused, verifyRefused, type FacilitatorAnswer, type FacilitatorRequest, type Refusal } from '../../../facilitator-api.js';
import type { Refused, Verified } from './verify.js';
import type { ExactPermit2Refused, ExactPermit2Verified } from './permit2-verify.js';

// The facilitator API (`/verify`, `/settle`) for `exact` payments, v1 and v2: the request read into a
// payment and the terms it must meet, and the answers in the reason codes of the x402 exact EVM scheme.
// A payload through Permit2 (a `permit2Authorization`, as @x402/evm's isPermit2Payload reads it) goes to
// the Permit2 path, whose reasons are @x402/evm's own names already.

/** Our reason codes (one per check) as the x402 exact EVM scheme names them. */
type Terms = { decoded: DecodedPaymentHeader; amountAtomic: bigint; resource: string; payTo: string };

/** What the facilitator asks of the exact scheme: its verification and its settlement. */
export interface ExactPayments {
  verify(seller: SellerAccountDoc, decoded: DecodedPaymentHeader, terms: { amountAtomic: bigint; payTo?: string }): Promise<Verified | Refused>;
  settle(seller: SellerAccountDoc, decoded: DecodedPaymentHeader, terms: SettleTerms): Promise<SettlementResult>;
  readonly permit2: {
    verify(seller: SellerAccountDoc, payload: ExactPermit2PaymentPayloadV2, terms: { amountAtomic: bigint; payTo?: string }): Promise<ExactPermit2Verified | ExactPermit2Refused>;
    settle(seller: SellerAccountDoc, payload: ExactPermit2PaymentPayloadV2, terms: SettleTerms): Promise<SettlementResult>;
  };
}

/**
 * Reads a request into the payment and the terms it must meet, or the reason it cannot be. The
 * requirements come from the seller, but what they may ask for is bounded here: our scheme, network and
 * asset, and payment to this seller's own accepting address only.
 */
function termsOf(request: FacilitatorRequest, seller: SellerAccountDoc, chain: ChainService): Terms | Refusal {
  const decoded = decodePaymentPayload(request.paymentPayload);
  if (!decoded.ok) return { reason: decoded.reason, message: decoded.message };
  if (decoded.version !== request.x402Version) return { reason: 'unsupported_x402_version', message: `x402Version ${request.x402Version} does not match the payload's ${decoded.version}` };
  const requirement = request.x402Version === 1 ? PaymentRequirementsV1Schema.safeParse(request.paymentRequirements) : PaymentRequirementsV2Schema.safeParse(request.paymentRequirements);
  if (!requirement.success) return requirementsIssue(requirement.error);
  const r = requirement.data;
  const network = request.x402Version === 1 ? toV1Network(r.network) === chain.network : toCaip2Network(r.network) === chain.caip2;
  if (!network) return { reason: 'network_mismatch', message: `this facilitator settles on ${request.x402Version === 1 ? chain.network : chain.caip2}, not ${r.network}` };
  if (!isAddressEqual(r.asset as Address, chain.usdc.address)) return { reason: 'asset_mismatch', message: `this facilitator settles USDC at ${chain.usdc.address}, not ${r.asset}` };
  const payee = payeeRefusal(seller, r.payTo);
  if (payee) return payee;
  const amountAtomic = BigInt('maxAmountRequired' in r ? r.maxAmountRequired : r.amount);
  if (decoded.version === 2) {
    // The payload echoes the requirement it was signed for: it must be the one presented now.
    const accepted = decoded.payload.accepted;
    if (accepted.amount !== String(amountAtomic) || !isAddressEqual(accepted.payTo as Address, r.payTo as Address) || !isAddressEqual(accepted.asset as Address, r.asset as Address)) {
      return { reason: 'invalid_payment_requirements', message: 'the payload was accepted for other requirements (amount, payTo or asset differ)' };
    }
    // exact over EIP-3009 is facilitator-submitted: authorization (the default) or upfront (scheme_exact.md).
    const flow = paymentFlowRefusal(r.extra, accepted.extra, 'exact', ['authorization', 'upfront']);
    if (flow) return flow;
  }
  const rawResource = 'resource' in r ? r.resource : decoded.version === 2 ? decoded.payload.resource?.url : undefined;
  return { decoded, amountAtomic, resource: resourceOf(rawResource), payTo: r.payTo };
}

type Permit2Terms = { payload: ExactPermit2PaymentPayloadV2; amountAtomic: bigint; resource: string; payTo: string };

/** The same for a payload through Permit2 (x402 v2 only). */
function permit2TermsOf(request: FacilitatorRequest, seller: SellerAccountDoc, chain: ChainService): Permit2Terms | Refusal {
  if (request.x402Version !== 2) return { reason: 'unsupported_x402_version', message: 'exact through Permit2 is x402 v2 only' };
  const decoded = decodeExactPermit2Payload(request.paymentPayload);
  if (!decoded.ok) return { reason: 'invalid_payload', message: decoded.message };
  const requirement = PaymentRequirementsV2Schema.safeParse(request.paymentRequirements);
  if (!requirement.success) return requirementsIssue(requirement.error);
  const r = requirement.data;
  const accepted = decoded.payload.accepted;
  // @x402/evm's first two checks: the scheme (both exact, by the schemas), then the network of the payload against the requirements'.
  if (accepted.network !== r.network || toCaip2Network(r.network) !== chain.caip2) return { reason: 'network_mismatch', message: `this facilitator settles on ${chain.caip2}; the payload is for ${accepted.network}, the requirements for ${r.network}` };
  if (!isAddressEqual(r.asset as Address, chain.usdc.address)) return { reason: 'asset_mismatch', message: `this facilitator settles USDC at ${chain.usdc.address}, not ${r.asset}` };
  const payee = payeeRefusal(seller, r.payTo);
  if (payee) return payee;
  if (accepted.amount !== r.amount || !isAddressEqual(accepted.payTo as Address, r.payTo as Address) || !isAddressEqual(accepted.asset as Address, r.asset as Address)) {
    return { reason: 'invalid_payment_requirements', message: 'the payload was accepted for other requirements (amount, payTo or asset differ)' };
  }
  // Facilitator-submitted like EIP-3009: authorization (the default) or upfront.
  const flow = paymentFlowRefusal(r.extra, accepted.extra, 'exact', ['authorization', 'upfront']);
  if (flow) return flow;
  return { payload: decoded.payload, amountAtomic: BigInt(r.amount), resource: resourceOf(decoded.payload.resource?.url), payTo: r.payTo };
}

export class ExactFacilitator {
  constructor(private readonly exact: ExactPayments, private readonly endpoints: Endpoints) {}

  async verify(request: FacilitatorRequest, seller: SellerAccountDoc, chain: ChainService): Promise<FacilitatorAnswer> {
    if (isExactPermit2Payload(request.paymentPayload)) return this.verifyPermit2(request, seller, chain);
    const terms = termsOf(request, seller, chain);
    if ('reason' in terms) return { body: verifyRefused(exactSpecReason, terms) };
    const verified = await this.exact.verify(seller, terms.decoded, terms);
    return { body: verified.ok ? { isValid: true, payer: verified.payer } : verifyRefused(exactSpecReason, verified) };
  }

  async settle(request: FacilitatorRequest, seller: SellerAccountDoc, chain: ChainService, network: string): Promise<FacilitatorAnswer> {
    const permit2 = isExactPermit2Payload(request.paymentPayload);
    const terms = permit2 ? permit2TermsOf(request, seller, chain) : termsOf(request, seller, chain);
    const specReason = permit2 ? exactPermit2SpecReason : exactSpecReason;
    if ('reason' in terms) return { body: settleRefused(specReason, network, terms) };
    const endpoint = await this.endpoints.forResource(seller._id, terms.resource);
    const settleTerms = { ...terms, endpoint, door: 'facilitator' as const };
    const outcome = 'decoded' in terms ? await this.exact.settle(seller, terms.decoded, settleTerms) : await this.exact.permit2.settle(seller, terms.payload, settleTerms);
    if (!outcome.ok) return { ...(outcome.reason === 'payment_identifier_conflict' ? { status: 409 } : {}), body: settleRefused(specReason, network, outcome) };
    return {
      body: {
        success: true, transaction: outcome.txHash, network, payer: outcome.payer, amount: terms.amountAtomic.toString(),
        // The official resource servers pass `extensions` through to the buyer's PAYMENT-RESPONSE header.
        ...(outcome.offerReceipt ? { extensions: offerReceiptExtension(outcome.offerReceipt) } : {}),
      },
    };
  }

  private async verifyPermit2(request: FacilitatorRequest, seller: SellerAccountDoc, chain: ChainService): Promise<FacilitatorAnswer> {
    const terms = permit2TermsOf(request, seller, chain);
    if ('reason' in terms) return { body: verifyRefused(exactPermit2SpecReason, terms) };
    const verified = await this.exact.permit2.verify(seller, terms.payload, terms);
    return { body: verified.ok ? { isValid: true, payer: verified.payer } : { ...verifyRefused(exactPermit2SpecReason, verified), payer: terms.payload.payload.permit2Authorization.from } };
  }
}
