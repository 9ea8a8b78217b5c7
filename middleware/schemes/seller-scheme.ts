import type { CaptureUsage, Facilitator, HoldRequest, RedeemResult } from '../facilitator.js';
import type { HeldPayment, PaidOutcome, PaymentRequiredOutcome, PaywallOutcome, RequestPayment, UnavailableOutcome } from '../paywall-types.js';
import { unavailable } from '../paywall-types.js';
import type { PaymentChallenges } from '../payment-required.js';
import type { Charge } from '../route-pricing.js';

// What one x402 scheme is to the Paywall on the seller's side: given what a request costs and the
// buyer's payment header, check the header against the 402 locally, then redeem it, or hold it while the
// handler runs (schemes/<scheme>/evm/seller.ts). A new scheme is one more such flow.

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
  /** Where a flow reports what the seller must know and no buyer sees (a capture that failed after the answer went out). */
  readonly warn: (message: string) => void;
}

/** What a flow makes of a hold the facilitator granted: the payment its handler sees, and how it is captured. */
export interface HeldFlow {
  readonly payment: RequestPayment;
  /** What the capture charges (upto: what the handler reported); absent: the hold's amount. Asked once, when the capture starts. */
  readonly usage?: () => CaptureUsage;
  /** The paid answer of a capture that went through. */
  paid(result: Extract<RedeemResult, { ok: true }>): PaidOutcome;
}

/**
 * Settling after the handler, alike for every scheme that holds through the facilitator: the hold asked
 * for (503/502 when the facilitator cannot be asked, the 402 when it refuses), then captured or released
 * once each, however often the paywall asks.
 */
export async function holdWhileHandlerRuns(deps: SellerSchemeDeps, charge: Charge, request: HoldRequest, flow: (held: { holdId: string; payer: string }) => HeldFlow): Promise<PaywallOutcome> {
  const facilitator = deps.facilitator as Required<Facilitator>;
  let held;
  try {
    held = await facilitator.hold(request);
  } catch (error) {
    return unavailable(error);
  }
  if (!held.ok) return deps.challenges.refuse(charge, held.reason, held.message);
  const { holdId } = held;
  const { payment, usage, paid } = flow(held);
  let capturing: Promise<PaidOutcome | PaymentRequiredOutcome | UnavailableOutcome> | undefined;
  let releasing: Promise<void> | undefined;
  const hold: HeldPayment = {
    payment,
    capture: () => (capturing ??= (async () => {
      let result;
      try {
        result = await (usage ? facilitator.capture(holdId, usage()) : facilitator.capture(holdId));
      } catch (error) {
        return unavailable(error);
      }
      if (!result.ok) return deps.challenges.refuse(charge, result.reason, result.message);
      return paid(result);
    })()),
    // A release that cannot reach the facilitator is not the buyer's problem: the hold expires by itself.
    release: () => (releasing ??= facilitator.release(holdId).catch(() => {})),
  };
  return { kind: 'held', hold };
}
