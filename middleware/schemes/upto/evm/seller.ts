import type { PaywallOutcome } from '../../../paywall-types.js';
import { decodeUptoPaymentHeader, parseCharge, toV1Network, type Price, type UptoPaymentRequiredResponse } from 'agentgate-x402-wire';
import { checkPermitAgainstRequirement } from '../../../payment-checks.js';
import type { Charge } from '../../../route-pricing.js';
import { paidOutcome } from '../../../settlement-response.js';
import { holdWhileHandlerRuns, type SellerScheme, type SellerSchemeDeps } from '../../seller-scheme.js';

// The x402 `upto` scheme on the seller's side (a route priced by usage): the buyer's Permit2 permit
// checked against the 402 locally (the backend verifies the rest), held for the maximum while the handler
// runs, and captured for what the handler reported it used (or released when the handler failed).

export class UptoPayment implements SellerScheme {
  constructor(private readonly deps: SellerSchemeDeps) {}

  /**
   * An upto route: the cheap checks of the permit against the 402 (the backend verifies the rest), then a
   * hold for the maximum while the handler runs; capture charges what the handler reported.
   */
  async pay(charge: Charge, paymentHeader: string): Promise<PaywallOutcome> {
    const decoded = decodeUptoPaymentHeader(paymentHeader);
    if (!decoded.ok) return this.deps.challenges.refuse(charge, decoded.reason, decoded.message);
    // Checked against the requirement of the network the permit names, among those the route offers.
    const challenge = this.deps.challenges.challengeOn(charge, decoded.payload.accepted.network) as UptoPaymentRequiredResponse & { kind: 'payment-required' };
    const requirement = challenge.requirementV2;
    const { accepted, payload } = decoded.payload;
    const checked = checkPermitAgainstRequirement(accepted, payload.permit2Authorization, requirement, Math.floor(this.deps.now() / 1000));
    if (!checked.ok) return this.deps.challenges.refuse(charge, checked.reason, checked.message);
    const { max, unreported } = charge.route.value.usage!;
    let reported: bigint | undefined;
    /** What the capture charges, fixed when it starts. */
    let captured: bigint | undefined;
    const hold = { paymentHeader, version: 2 as const, resource: charge.resource, amountAtomic: charge.amountAtomic, requirement, holdSeconds: charge.route.value.config.holdSeconds };
    return holdWhileHandlerRuns(this.deps, charge, hold, ({ holdId, payer }) => ({
      payment: {
        version: 2, scheme: 'upto', paymentId: holdId, payer, settle: 'after-handler', network: toV1Network(requirement.network),
        amountAtomic: max, maxAmountAtomic: max, payTo: charge.payTo, resource: charge.resource, pattern: charge.route.pattern,
        charge: (price: Price) => {
          if (captured !== undefined) throw new Error('this payment is already being settled: report usage before the response is sent');
          const amount = parseCharge(price);
          if (amount > max) throw new RangeError(`charge ${String(price)} is above this route's maximum of ${max} atomic units: the buyer did not allow it`);
          reported = amount;
        },
      },
      usage: () => ({ amountAtomic: (captured = reported ?? unreported) }),
      paid: (result) => paidOutcome({ ...charge, amountAtomic: captured! }, 2, result, 'after-handler', max),
    }));
  }
}
