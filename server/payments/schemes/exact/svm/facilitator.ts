import { address, type Transaction } from '@solana/kit';
import { EXACT_SVM_REASONS as R, type ExactSvmPaymentPayloadV2, ExactSvmPaymentPayloadV1Schema, ExactSvmPaymentPayloadV2Schema, ExactSvmRequirementsV1Schema, ExactSvmRequirementsV2Schema, offerReceiptExtension } from 'agentgate-x402-wire';
import type { SellerAccountDoc } from '../../../models.js';
import type { Endpoints } from '../../../endpoints.js';
import { requirementsIssue, resourceOf, settleRefused, verifyRefused, type FacilitatorAnswer, type FacilitatorRequest, type Refusal } from '../../../facilitator-api.js';
import type { IdentifiedPayment } from '../../../payment-identifier.js';
import type { RedeemInput, RedeemOutcome, Redemption } from '../../../redemption.js';
import { decodeSvmTransaction } from './verify.js';
import type { SvmExactScheme } from './scheme.js';

// The facilitator API (`/verify`, `/settle`) for `exact` payments on Solana, v2 and v1: the request read
// into the buyer's transaction and the terms it must meet, answered in the spec's reason names (ours).

const asIs = (reason: string) => reason;

type Terms = { tx: Transaction; payTo: string; amountAtomic: bigint; mint: ReturnType<typeof address>; feePayer: string; memo?: string; resource: string; identified: IdentifiedPayment; version: 1 | 2 };

/** The seller's address on this Solana network (payToByNetwork): a Solana payment may go there only. */
export function solanaPayTo(seller: Pick<SellerAccountDoc, 'payToByNetwork'>, network: string): string | undefined {
  return seller.payToByNetwork?.[network];
}

export class SvmExactFacilitator {
  constructor(private readonly scheme: SvmExactScheme, private readonly endpoints: Endpoints) {}

  /** The network as this request's answers name it. */
  networkOf(request: FacilitatorRequest): string {
    return request.x402Version === 1 ? this.scheme.chain.network : this.scheme.chain.caip2;
  }

  /**
   * Reads a request into the transaction and its terms, or the reason it cannot be. The requirements come
   * from the seller, bounded here: exact, this network, USDC, this seller's Solana address.
   */
  private termsOf(request: FacilitatorRequest, seller: SellerAccountDoc): Terms | Refusal {
    const chain = this.scheme.chain;
    const v2 = request.x402Version === 2;
    const requirement = v2 ? ExactSvmRequirementsV2Schema.safeParse(request.paymentRequirements) : ExactSvmRequirementsV1Schema.safeParse(request.paymentRequirements);
    if (!requirement.success) {
      const scheme = request.paymentRequirements.scheme;
      if (scheme !== 'exact') return { reason: R.unsupportedScheme, message: `this facilitator settles exact on ${chain.caip2}, not ${String(scheme)}` };
      if (!(request.paymentRequirements.extra as { feePayer?: unknown } | undefined)?.feePayer) return { reason: R.missingFeePayer, message: 'paymentRequirements.extra.feePayer is required on Solana' };
      return requirementsIssue(requirement.error);
    }
    const r = requirement.data;
    const parsed = v2 ? ExactSvmPaymentPayloadV2Schema.safeParse(request.paymentPayload) : ExactSvmPaymentPayloadV1Schema.safeParse(request.paymentPayload);
    if (!parsed.success) return { reason: 'invalid_payload', message: `paymentPayload: ${parsed.error.issues[0]?.path.join('.') || 'body'} ${parsed.error.issues[0]?.message ?? 'is invalid'}` };
    const p = parsed.data as { payload: { transaction: string }; network?: string; accepted?: { network: string; amount: string; payTo: string; asset: string; extra: { feePayer: string } }; resource?: { url?: string } };
    const payloadNetwork = p.accepted?.network ?? p.network;
    if (r.network !== (v2 ? chain.caip2 : chain.network) || payloadNetwork !== r.network) return { reason: R.networkMismatch, message: `this facilitator settles on ${v2 ? chain.caip2 : chain.network}; the requirements name ${r.network} and the payload ${payloadNetwork}` };
    if (r.asset !== chain.usdcMint) return { reason: 'invalid_payment_requirements', message: `this facilitator settles USDC (mint ${chain.usdcMint}) on ${chain.caip2}, not ${r.asset}` };
    const payTo = solanaPayTo(seller, chain.network);
    if (!payTo || r.payTo !== payTo) return { reason: 'invalid_payment_requirements', message: payTo ? `payTo must be this seller's address on ${chain.network}, ${payTo}` : `this seller has no address on ${chain.network} (PUT /v0/payments/acceptance with payToByNetwork["${chain.network}"])` };
    const amountAtomic = BigInt(String('amount' in r ? r.amount : r.maxAmountRequired));
    const accepted = p.accepted;
    if (accepted && (accepted.amount !== String(amountAtomic) || accepted.payTo !== r.payTo || accepted.asset !== r.asset || accepted.extra.feePayer !== r.extra.feePayer)) {
      return { reason: 'invalid_payment_requirements', message: 'the payload was accepted for other requirements (amount, payTo, asset or feePayer differ)' };
    }
    const tx = decodeSvmTransaction(p.payload.transaction);
    if (!tx) return { reason: R.couldNotDecode, message: 'payload.transaction is not a base64 Solana transaction' };
    const resourceUrl = 'resource' in r && typeof r.resource === 'string' ? r.resource : p.resource?.url;
    const identified = (v2 ? { version: 2, payload: p } : { version: 1, payload: p }) as IdentifiedPayment;
    return { tx, payTo, amountAtomic, mint: chain.usdcMint, feePayer: r.extra.feePayer, ...(r.extra.memo ? { memo: r.extra.memo } : {}), resource: resourceOf(resourceUrl), identified, version: request.x402Version };
  }

  /**
   * Our middleware's door (POST /v0/payments/redeem) for a payment on this network: the seller-side checks
   * (accepting seller, registered endpoint, price) as for any scheme, then this seller's Solana address,
   * then verified, co-signed, sent and recorded as through the facilitator API.
   */
  async redeem(orgId: string, input: RedeemInput, payload: ExactSvmPaymentPayloadV2, redemption: Pick<Redemption, 'prepareTerms'>): Promise<RedeemOutcome> {
    const chain = this.scheme.chain;
    const prepared = await redemption.prepareTerms(orgId, { ...input, payTo: undefined }, { pricedByUsage: false, paidInV1: false });
    if ('refused' in prepared) return prepared.refused;
    const { seller, terms, refuse } = prepared;
    const payTo = solanaPayTo(seller, chain.network);
    if (!payTo) return refuse('recipient_not_allowed', `this seller has no address on ${chain.network} (PUT /v0/payments/acceptance with payToByNetwork["${chain.network}"])`);
    const { accepted } = payload;
    if (accepted.payTo !== payTo) return refuse('recipient_not_allowed', `${accepted.payTo} is not this seller's address on ${chain.network}`);
    if (accepted.asset !== chain.usdcMint) return refuse('invalid_payment_requirements', `this backend settles USDC (mint ${chain.usdcMint}) on ${chain.caip2}, not ${accepted.asset}`);
    if (BigInt(accepted.amount) !== terms.amountAtomic) return refuse('amount_mismatch', `the payment was accepted for ${accepted.amount}, not ${terms.amountAtomic}`);
    const tx = decodeSvmTransaction(payload.payload.transaction);
    if (!tx) return refuse(R.couldNotDecode, 'payload.transaction is not a base64 Solana transaction');
    const outcome = await this.scheme.settle(seller, tx, { ...terms, payTo, mint: chain.usdcMint, feePayer: accepted.extra.feePayer, ...(accepted.extra.memo ? { memo: accepted.extra.memo } : {}) }, { version: 2, payload } as IdentifiedPayment, 2);
    if (!outcome.ok) return refuse(outcome.reason, outcome.message);
    return {
      ok: true, paymentId: outcome.paymentId,
      paymentResponse: { success: true, transaction: outcome.txHash, network: chain.caip2, payer: outcome.payer, ...(outcome.offerReceipt ? { extensions: offerReceiptExtension(outcome.offerReceipt) } : {}) },
    };
  }

  async verify(request: FacilitatorRequest, seller: SellerAccountDoc): Promise<FacilitatorAnswer> {
    const terms = this.termsOf(request, seller);
    if ('reason' in terms) return { body: verifyRefused(asIs, terms) };
    const verified = await this.scheme.verify(terms.tx, terms);
    return { body: verified.ok ? { isValid: true, payer: verified.payer } : { ...verifyRefused(asIs, verified), payer: verified.payer ?? '' } };
  }

  async settle(request: FacilitatorRequest, seller: SellerAccountDoc): Promise<FacilitatorAnswer> {
    const network = this.networkOf(request);
    const terms = this.termsOf(request, seller);
    if ('reason' in terms) return { body: settleRefused(asIs, network, terms) };
    const endpoint = await this.endpoints.forResource(seller._id, terms.resource);
    const outcome = await this.scheme.settle(seller, terms.tx, { ...terms, endpoint, door: 'facilitator' }, terms.identified, terms.version);
    if (!outcome.ok) return { ...(outcome.reason === 'payment_identifier_conflict' ? { status: 409 } : {}), body: settleRefused(asIs, network, outcome) };
    return {
      body: {
        success: true, transaction: outcome.txHash, network, payer: outcome.payer, amount: terms.amountAtomic.toString(),
        ...(outcome.offerReceipt ? { extensions: offerReceiptExtension(outcome.offerReceipt) } : {}),
      },
    };
  }
}
