import type { PaymentRequiredOutcome, PaywallOutcome } from '../../../paywall-types.js';
import { unavailable } from '../../../paywall-types.js';
import type { RedeemRequest } from '../../../facilitator.js';
import { checkPaymentAgainstRequirements, checkPermitAgainstRequirement } from '../../../payment-checks.js';
import { decodeExactPermit2PaymentHeader, decodePaymentHeader, toV1Network, type PaymentRequirementsV2 } from 'agentgate-x402-wire';
import type { Charge } from '../../../route-pricing.js';
import { exactCharge, paidOutcome } from '../../../settlement-response.js';
import { holdWhileHandlerRuns, type SellerScheme, type SellerSchemeDeps } from '../../seller-scheme.js';

// The x402 `exact` scheme on the seller's side (a route with a price, fixed or computed): the buyer's
// header (an EIP-3009 authorization, or a Permit2 permit on a route with assetTransferMethod 'permit2')
// checked against the 402 locally, then redeemed before the handler (settle: 'before-handler', or
// a facilitator that cannot hold), or held while the handler runs and captured or released after it.

export class ExactPayment implements SellerScheme {
  /** `solana`: the same scheme on the backend's Solana networks, when the seller is paid there too. */
  constructor(private readonly deps: SellerSchemeDeps, private readonly solana?: SellerScheme & { names(paymentHeader: string): boolean }) {}

  /** Checked locally first, so a malformed or mismatched header costs the facilitator nothing. */
  async pay(charge: Charge, paymentHeader: string): Promise<PaywallOutcome> {
    if (this.solana?.names(paymentHeader) && charge.route.value.config.assetTransferMethod !== 'permit2') return this.solana.pay(charge, paymentHeader);
    const checked = this.checkLocally(charge, paymentHeader);
    if (checked.kind === 'payment-required') return checked;
    const { version, request } = checked;
    // The flow the route's 402 announced (route-pricing.ts): authorization is held while the handler runs.
    if (charge.route.value.paymentFlow === 'authorization') return this.hold(charge, version, request);

    let result;
    try {
      result = await this.deps.facilitator.redeem(request);
    } catch (error) {
      return unavailable(error);
    }
    if (!result.ok) return this.deps.challenges.refuse(charge, result.reason, result.message);
    return paidOutcome(charge, version, result, 'before-handler');
  }

  /** The cheap checks before asking the facilitator: the header decodes and matches what was asked. */
  private checkLocally(charge: Charge, paymentHeader: string): PaymentRequiredOutcome | { kind: 'checked'; version: 1 | 2; request: RedeemRequest } {
    if (charge.route.value.config.assetTransferMethod === 'permit2') return this.checkPermit2(charge, paymentHeader);
    const decoded = decodePaymentHeader(paymentHeader);
    if (!decoded.ok) return this.deps.challenges.refuse(charge, decoded.reason, decoded.message);
    // Checked against the requirement of the network the payment names, among those the route offers.
    const challenge = this.deps.challenges.challengeOn(charge, decoded.version === 1 ? decoded.payload.network : decoded.payload.accepted.network);
    const checked = checkPaymentAgainstRequirements(
      decoded,
      challenge.requirementV1!,
      challenge.requirementV2 as PaymentRequirementsV2,
      Math.floor(this.deps.now() / 1000),
    );
    if (!checked.ok) return this.deps.challenges.refuse(charge, checked.reason, checked.message);
    return {
      kind: 'checked',
      version: decoded.version,
      request: {
        paymentHeader,
        version: decoded.version,
        resource: charge.resource,
        amountAtomic: charge.amountAtomic,
        requirement: decoded.version === 1 ? challenge.requirementV1! : challenge.requirementV2 as PaymentRequirementsV2,
      },
    };
  }

  /** A route paid through Permit2: the permit against the 402 (the backend verifies the rest, and the gas sponsoring extensions). */
  private checkPermit2(charge: Charge, paymentHeader: string): PaymentRequiredOutcome | { kind: 'checked'; version: 2; request: RedeemRequest } {
    const decoded = decodeExactPermit2PaymentHeader(paymentHeader);
    const requirement = this.deps.challenges.challengeOn(charge, decoded.ok ? decoded.payload.accepted.network : undefined).requirementV2 as PaymentRequirementsV2;
    if (!decoded.ok) return this.deps.challenges.refuse(charge, decoded.reason, `${decoded.message} (this route is paid through Permit2: extra.assetTransferMethod "permit2")`);
    const checked = checkPermitAgainstRequirement(decoded.payload.accepted, decoded.payload.payload.permit2Authorization, requirement, Math.floor(this.deps.now() / 1000));
    if (!checked.ok) return this.deps.challenges.refuse(charge, checked.reason, checked.message);
    return { kind: 'checked', version: 2, request: { paymentHeader, version: 2, resource: charge.resource, amountAtomic: charge.amountAtomic, requirement } };
  }

  private hold(charge: Charge, version: 1 | 2, request: RedeemRequest): Promise<PaywallOutcome> {
    return holdWhileHandlerRuns(this.deps, charge, { ...request, holdSeconds: charge.route.value.config.holdSeconds }, ({ holdId, payer }) => ({
      payment: {
        version, scheme: 'exact', paymentId: holdId, payer, settle: 'after-handler', network: toV1Network(request.requirement.network),
        amountAtomic: charge.amountAtomic, payTo: charge.payTo, resource: charge.resource, pattern: charge.route.pattern, charge: exactCharge(charge.route.pattern),
      },
      paid: (result) => paidOutcome(charge, version, result, 'after-handler'),
    }));
  }
}
