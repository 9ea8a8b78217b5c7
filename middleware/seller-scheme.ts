import type { Facilitator } from './facilitator.js';
import type { PaywallOutcome } from './paywall-types.js';
import type { PaymentChallenges } from './payment-required.js';
import type { Charge } from './route-pricing.js';

// What one x402 scheme is to the Paywall on the seller's side: given what a request costs and the
// buyer's payment header, check the header against the 402 locally, then redeem it, or hold it while the
// handler runs (exact-payment.ts, upto-payment.ts). A new scheme is one more such flow.

export interface SellerScheme {
  pay(charge: Charge, paymentHeader: string): Promise<PaywallOutcome>;
}

/** What a scheme's flow works with: the facilitator, the paywall's 402s, the seller's network and the clock. */
export interface SellerSchemeDeps {
  readonly facilitator: Facilitator;
  readonly challenges: PaymentChallenges;
  /** The seller's network, v1 name (what a RequestPayment names). */
  readonly network: string;
  readonly now: () => number;
}
