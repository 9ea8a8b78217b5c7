import { X402_V1 } from '../../../codec/v1.js';
import { X402_V2 } from '../../../codec/v2.js';
import { challengeResponse, deepFreeze, PAYMENT_REQUIRED, type Offer, type PaymentRequiredBody, type PaymentRequiredResponse } from '../../../challenge.js';
import type { SolanaOffer } from '../../../seller-settings.js';
import type { ExactSvmRequirementsV2 } from './wire.js';

// The x402 `exact` scheme's requirement and 402 on Solana: v2 only (a seller's route offers it beside its
// EVM networks, in the v2 header's accepts; the v1 body leaves it out, as x402 1.x clients read it).

/** A payment requirement of `exact` on a Solana network, with the fee payer that co-signs. */
export function exactSvmRequirements(input: { network: string; amountAtomic: bigint | string; mint: string; payTo: string; feePayer: string; maxTimeoutSeconds?: number; memo?: string }): ExactSvmRequirementsV2 {
  return {
    scheme: 'exact', network: input.network, amount: String(input.amountAtomic), asset: input.mint, payTo: input.payTo,
    maxTimeoutSeconds: input.maxTimeoutSeconds ?? 60, extra: { feePayer: input.feePayer, ...(input.memo ? { memo: input.memo } : {}) },
  };
}

/** The 402 of `exact` on one Solana network: v2 only, its requirement named (`requirementV2`). */
export interface ExactSvmPaymentRequiredResponse extends Omit<PaymentRequiredResponse, 'requirementV1' | 'requirementV2'> {
  readonly requirementV1?: undefined;
  readonly requirementV2: ExactSvmRequirementsV2;
}

export function buildExactSvmPaymentRequired(solana: SolanaOffer, offer: Offer, failure: { readonly reason: string; readonly message: string } = PAYMENT_REQUIRED): ExactSvmPaymentRequiredResponse {
  const requirementV2 = exactSvmRequirements({ network: solana.network, amountAtomic: offer.amountAtomic, mint: solana.asset, payTo: solana.payTo, feePayer: solana.feePayer, maxTimeoutSeconds: offer.maxTimeoutSeconds });
  const v2 = { x402Version: X402_V2, error: failure.reason, resource: { url: offer.resource, description: offer.description ?? '', mimeType: offer.mimeType ?? 'application/json' }, accepts: [requirementV2] };
  const body: PaymentRequiredBody = { x402Version: X402_V1, error: failure.reason, message: failure.message, status: 402, accepts: [] };
  return { ...challengeResponse(v2, body), requirementV2: deepFreeze(requirementV2) };
}
