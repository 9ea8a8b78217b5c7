import type { HeldPayment, PaidOutcome, PaymentRequiredOutcome, PaywallOutcome, UnavailableOutcome } from './paywall-types.js';
import { unavailable } from './paywall-types.js';
import type { Facilitator } from './facilitator.js';
import { collectTerms, decodeAuthCapturePaymentHeader } from './protocol/auth-capture-evm.js';
import type { Charge } from './route-pricing.js';
import { exactCharge, paidOutcome } from './settlement-response.js';
import type { SellerScheme, SellerSchemeDeps } from './seller-scheme.js';

// The x402 `auth-capture` scheme on the seller's side (charge on success, with buyer protection): the
// buyer's escrow authorization checked against this route's offer locally (the backend verifies the
// rest: signature, nonce, balance, a simulation), authorized into escrow before the handler runs,
// captured after it succeeded, voided after it failed. A hold nobody decides is voided by the backend
// before the capture deadline; past that deadline the buyer can reclaim it from the escrow itself.

export class AuthCapturePayment implements SellerScheme {
  constructor(private readonly deps: SellerSchemeDeps) {}

  async pay(charge: Charge, paymentHeader: string): Promise<PaywallOutcome> {
    const { challenges } = this.deps;
    const decoded = decodeAuthCapturePaymentHeader(paymentHeader);
    if (!decoded.ok) return challenges.refuse(charge, decoded.reason, decoded.message);
    const { accepted, payload } = decoded.payload;
    const offered = (challenges.challengeFor(charge) as PaymentRequiredOutcome & { requirementV2: { network: string; asset: string; payTo: string; amount: string; extra: { captureAuthorizer: string } } }).requirementV2;
    const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
    if (accepted.network !== offered.network) return challenges.refuse(charge, 'network_mismatch', `payment is for network "${accepted.network}", expected "${offered.network}"`);
    if (!same(accepted.asset, offered.asset)) return challenges.refuse(charge, 'asset_mismatch', 'payment is for another asset');
    if (!same(accepted.payTo, offered.payTo)) return challenges.refuse(charge, 'recipient_mismatch', 'payment is to another recipient');
    if (accepted.amount !== offered.amount) return challenges.refuse(charge, 'amount_mismatch', `payment authorizes ${accepted.amount}; this route costs ${offered.amount}`);
    if (!same(accepted.extra.captureAuthorizer, offered.extra.captureAuthorizer)) return challenges.refuse(charge, 'invalid_auth_capture_evm_operator_not_admitted', 'payment names another capture authorizer than this seller\'s backend');
    const now = Math.floor(this.deps.now() / 1000);
    const { windows } = challenges;
    const w = windows(charge);
    // The buyer signed an offer at most its maxTimeoutSeconds old: its refund window must be about this route's.
    if (accepted.extra.refundDeadline < now + w.refundSeconds - accepted.maxTimeoutSeconds - 300) {
      return challenges.refuse(charge, 'invalid_auth_capture_evm_deadline_ordering', 'the payment\'s refund deadline is shorter than this route offers');
    }
    if (collectTerms(payload).expiry <= BigInt(now)) return challenges.refuse(charge, 'invalid_auth_capture_evm_authorization_expired', 'the authorization has expired');
    const facilitator = this.deps.facilitator as Required<Facilitator>;
    let held;
    try {
      held = await facilitator.hold({ paymentHeader, version: 2, resource: charge.resource, amountAtomic: charge.amountAtomic, requirement: accepted, holdSeconds: charge.route.value.config.holdSeconds });
    } catch (error) {
      return unavailable(error);
    }
    if (!held.ok) return challenges.refuse(charge, held.reason, held.message);
    const { holdId, payer } = held;
    let capturing: Promise<PaidOutcome | PaymentRequiredOutcome | UnavailableOutcome> | undefined;
    let releasing: Promise<void> | undefined;
    const hold: HeldPayment = {
      payment: {
        version: 2, scheme: 'auth-capture', paymentId: holdId, payer, settle: 'after-handler', network: this.deps.network,
        amountAtomic: charge.amountAtomic, payTo: charge.payTo, resource: charge.resource, pattern: charge.route.pattern,
        charge: exactCharge(charge.route.pattern),
      },
      capture: () => (capturing ??= (async () => {
        let result;
        try {
          result = await facilitator.capture(holdId);
        } catch (error) {
          return unavailable(error);
        }
        if (!result.ok) return challenges.refuse(charge, result.reason, result.message);
        return paidOutcome(charge, 2, result, 'after-handler', undefined, 'auth-capture');
      })()),
      release: () => (releasing ??= facilitator.release(holdId).catch(() => {})),
    };
    return { kind: 'held', hold };
  }
}
