import type { PaymentRequiredOutcome, PaywallOutcome } from '../../../paywall-types.js';
import { collectTerms, decodeAuthCapturePaymentHeader, toV1Network } from 'agentgate-x402-wire';
import type { Charge } from '../../../route-pricing.js';
import { exactCharge, paidOutcome } from '../../../settlement-response.js';
import { holdWhileHandlerRuns, type SellerScheme, type SellerSchemeDeps } from '../../seller-scheme.js';

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
    // Checked against the offer on the network the payment names, among those the route offers.
    const offered = (challenges.challengeOn(charge, accepted.network) as PaymentRequiredOutcome & { requirementV2: { network: string; asset: string; payTo: string; amount: string; extra: { captureAuthorizer: string } } }).requirementV2;
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
    const hold = { paymentHeader, version: 2 as const, resource: charge.resource, amountAtomic: charge.amountAtomic, requirement: accepted, holdSeconds: charge.route.value.config.holdSeconds };
    return holdWhileHandlerRuns(this.deps, charge, hold, ({ holdId, payer }) => ({
      payment: {
        version: 2, scheme: 'auth-capture', paymentId: holdId, payer, settle: 'after-handler', network: toV1Network(accepted.network),
        amountAtomic: charge.amountAtomic, payTo: charge.payTo, resource: charge.resource, pattern: charge.route.pattern,
        charge: exactCharge(charge.route.pattern),
      },
      paid: (result) => paidOutcome(charge, 2, result, 'after-handler', undefined, 'auth-capture'),
    }));
  }
}
