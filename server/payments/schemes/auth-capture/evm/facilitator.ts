import { AuthCaptureRequirementsSchema, AUTH_CAPTURE, authCaptureReason as R, decodeAuthCapturePayload, type AuthCapturePaymentPayload, type AuthCaptureRequirements } from 'agentgate-x402-wire';
import type { Config } from '../../../../platform/config.js';
import type { SellerAccountDoc } from '../../../models.js';
import type { Endpoints } from '../../../endpoints.js';
import type { SettleTerms, ClaimOutcome } from '../../../payment-settlement.js';
import type { SettlementResult } from '../../../settlement.js';
import { payeeRefusal, requirementsIssue, resourceOf, settleRefused, verifyRefused, type FacilitatorAnswer, type FacilitatorRequest } from '../../../facilitator-api.js';
import { RESEND_MARGIN_SECONDS } from '../../scheme.js';
import type { AuthCaptureRefused, AuthCaptureVerified } from './verify.js';

// The facilitator API's /verify and /settle of an x402 auth-capture payment: the request read into the
// payload and the terms this seller may ask (its own payee), then verified, or authorized into escrow and
// held for the seller's capture or void.

/** What the facilitator asks of the scheme: its verification and its authorize. */
export interface AuthCapturePayments {
  readonly config: Pick<Config, 'PAYMENT_VALIDITY_MARGIN_SECONDS'>;
  readonly endpoints: Pick<Endpoints, 'forResource'>;
  verify(payload: AuthCapturePaymentPayload, requirements: AuthCaptureRequirements): Promise<AuthCaptureVerified | AuthCaptureRefused>;
  authorize(seller: SellerAccountDoc, payload: AuthCapturePaymentPayload, requirements: AuthCaptureRequirements, terms: SettleTerms, until: Date): Promise<{ claimed: ClaimOutcome; answer?: SettlementResult }>;
}

export class AuthCaptureFacilitator {
  constructor(private readonly payments: AuthCapturePayments) {}

  private termsOf(request: FacilitatorRequest, seller: SellerAccountDoc) {
    if (request.x402Version !== 2) return { reason: 'invalid_x402_version', message: 'the auth-capture scheme is x402 v2 only' };
    if ((request.paymentPayload as { payload?: { type?: unknown } }).payload?.type !== undefined) {
      return { reason: R('lifecycle_not_relayed'), message: 'capture, void and refund are not relayed through /settle (no receiver authorizer): the seller asks them of this backend\'s payments API' };
    }
    const decoded = decodeAuthCapturePayload(request.paymentPayload);
    if (!decoded.ok) return { reason: decoded.reason === 'invalid_payload_format' ? R('payload_format') : R('scheme'), message: decoded.message };
    const requirement = AuthCaptureRequirementsSchema.safeParse(request.paymentRequirements);
    if (!requirement.success) {
      const issue = requirementsIssue(requirement.error);
      return { reason: requirement.error.issues.some((i) => i.path[0] === 'extra') ? R('extra') : request.paymentRequirements.scheme !== AUTH_CAPTURE ? R('scheme') : issue.reason, message: issue.message };
    }
    const payee = payeeRefusal(seller, requirement.data.payTo);
    if (payee) return payee;
    return { payload: decoded.payload, requirements: requirement.data, resource: resourceOf(decoded.payload.resource?.url) };
  }

  async verifyRequest(request: FacilitatorRequest, seller: SellerAccountDoc): Promise<FacilitatorAnswer> {
    const terms = this.termsOf(request, seller);
    if ('reason' in terms) return { body: verifyRefused((r) => r, terms) };
    const verified = await this.payments.verify(terms.payload, terms.requirements);
    if (!verified.ok) return { body: { ...verifyRefused((r) => r, verified), ...(verified.payer ? { payer: verified.payer } : {}) } };
    return { body: { isValid: true, payer: verified.payer } };
  }

  /**
   * The facilitator's settle of a collect payload: the escrow's authorize (paymentFlow escrow). The
   * payment is then held for the seller, who captures or voids it through POST /v0/payments/holds/{id}/
   * capture|release with its key (or it is voided by itself just before its capture deadline).
   */
  async settleRequest(request: FacilitatorRequest, seller: SellerAccountDoc, network: string): Promise<FacilitatorAnswer> {
    const terms = this.termsOf(request, seller);
    if ('reason' in terms) return { body: settleRefused((r) => r, network, terms) };
    const endpoint = await this.payments.endpoints.forResource(seller._id, terms.resource);
    const until = new Date((terms.requirements.extra.captureDeadline - RESEND_MARGIN_SECONDS - this.payments.config.PAYMENT_VALIDITY_MARGIN_SECONDS) * 1000);
    const { claimed, answer } = await this.payments.authorize(seller, terms.payload, terms.requirements, { resource: terms.resource, amountAtomic: BigInt(terms.requirements.amount), endpoint, door: 'facilitator', payTo: terms.requirements.payTo }, until);
    if (!claimed.ok) {
      const reason = claimed.refused.reason === 'nonce_already_used' ? R('payment_already_collected') : claimed.refused.reason === 'settle_unconfirmed' ? 'settlement_pending' : claimed.refused.reason;
      return { body: settleRefused((r) => r, network, { ...claimed.refused, reason }) };
    }
    return { body: { success: true, transaction: answer!.ok ? answer!.txHash : '', network, payer: claimed.payment.payerAddress, amount: terms.requirements.amount, extensions: { authCapture: { paymentId: claimed.payment._id, paymentInfoHash: claimed.payment.escrow!.hash, status: 'authorized' } } } };
  }
}
