import { decodeBase64Json, ExactSvmPaymentPayloadV2Schema, type ExactSvmRequirementsV2 } from 'agentgate-x402-wire';
import type { PaywallOutcome } from '../../../paywall-types.js';
import { unavailable } from '../../../paywall-types.js';
import type { Charge } from '../../../route-pricing.js';
import { paidOutcome } from '../../../settlement-response.js';
import type { SellerScheme, SellerSchemeDeps } from '../../seller-scheme.js';

// The x402 `exact` scheme on Solana, on the seller's side: an exact route offers the backend's Solana
// networks beside its EVM ones (payment-required.ts), and a buyer's partially signed transfer is checked
// against the 402 locally, then redeemed: the backend verifies it, co-signs it as the fee payer, sends
// it and records it before the handler runs. A Solana transaction lives only as long as its blockhash
// (60-90 s), so it is settled before the handler, never held.

/** Whether a payment header names a Solana network (v2 `accepted.network`). */
export function namesSolana(paymentHeader: string): boolean {
  const decoded = decodeBase64Json(paymentHeader);
  const network = decoded.ok ? (decoded.value as { accepted?: { network?: unknown } } | null)?.accepted?.network : undefined;
  return typeof network === 'string' && network.startsWith('solana:');
}

export class ExactSvmPayment implements SellerScheme {
  constructor(private readonly deps: SellerSchemeDeps) {}

  readonly names = namesSolana;

  async pay(charge: Charge, paymentHeader: string): Promise<PaywallOutcome> {
    const decoded = decodeBase64Json(paymentHeader);
    const parsed = decoded.ok ? ExactSvmPaymentPayloadV2Schema.safeParse(decoded.value) : undefined;
    if (!parsed?.success) return this.deps.challenges.refuse(charge, 'invalid_payload', `the Solana payment is not an exact v2 payload${parsed ? `: ${parsed.error.issues[0]?.path.join('.') ?? ''} ${parsed.error.issues[0]?.message ?? ''}` : ''}`.trim());
    const { accepted } = parsed.data;
    const requirement = this.deps.challenges.challengeOn(charge, accepted.network).requirementV2 as unknown as ExactSvmRequirementsV2 | undefined;
    if (!requirement || requirement.network !== accepted.network) return this.deps.challenges.refuse(charge, 'invalid_exact_svm_network_mismatch', `this route is not offered on ${accepted.network}`);
    // The payment must be for what this 402 asked: the amount, the mint, the seller's address, the fee payer.
    for (const field of ['amount', 'asset', 'payTo'] as const) {
      if (accepted[field] !== requirement[field]) return this.deps.challenges.refuse(charge, 'invalid_payment_requirements', `the payment was accepted for ${field} ${accepted[field]}, not ${requirement[field]}`);
    }
    if (accepted.extra.feePayer !== requirement.extra.feePayer) return this.deps.challenges.refuse(charge, 'invalid_exact_svm_fee_payer_mismatch', `the payment names the fee payer ${accepted.extra.feePayer}, not ${requirement.extra.feePayer}`);

    let result;
    try {
      result = await this.deps.facilitator.redeem({ paymentHeader, version: 2, resource: charge.resource, amountAtomic: charge.amountAtomic, requirement: requirement as never });
    } catch (error) {
      return unavailable(error);
    }
    if (!result.ok) return this.deps.challenges.refuse(charge, result.reason, result.message);
    const paid = paidOutcome(charge, 2, result, 'before-handler');
    return { ...paid, payment: { ...paid.payment, payTo: requirement.payTo } };
  }
}
