import { caip2FromChainId } from '../../../networks.js';
import { X402_V1 } from '../../../codec/v1.js';
import { X402_V2 } from '../../../codec/v2.js';
import type { SellerSettings } from '../../../seller-settings.js';
import { EIP2612_GAS_SPONSORING_DECLARATION } from '../../../permit2.js';
import { challengeResponse, deepFreeze, PAYMENT_REQUIRED, timeoutOf, type Offer, type PaymentRequiredBody, type PaymentRequiredResponse } from '../../../challenge.js';
import type { UptoRequirementsV2 } from './wire.js';

// The x402 `upto` scheme's requirement and 402 (v2 only).

/** The 402 of a route sold by usage: v2 only (x402 v1 has no `upto`), so the v1 body offers nothing. */
export interface UptoPaymentRequiredResponse extends Omit<PaymentRequiredResponse, 'requirementV1' | 'requirementV2'> {
  readonly requirementV1?: undefined;
  readonly requirementV2: UptoRequirementsV2;
}

/**
 * An x402 `upto` requirement (specs/schemes/upto/scheme_upto_evm.md): `amount` is the most the request may
 * cost; `extra.facilitatorAddress` is the account the buyer must name in its permit (from the seller
 * settings the backend serves).
 */
export function buildUptoRequirementV2(settings: SellerSettings, offer: Offer): UptoRequirementsV2 {
  if (!settings.uptoFacilitator) throw new TypeError('the payment backend offers no upto facilitator (seller settings have no uptoFacilitator): upto routes need a backend that settles upto');
  return {
    scheme: 'upto',
    network: caip2FromChainId(settings.chainId),
    amount: offer.amountAtomic.toString(),
    asset: settings.asset,
    payTo: settings.payTo,
    maxTimeoutSeconds: timeoutOf(settings, offer),
    extra: { name: settings.assetName, version: settings.assetVersion, facilitatorAddress: settings.uptoFacilitator },
  };
}

export function buildUptoPaymentRequired(
  settings: SellerSettings,
  offer: Offer,
  failure: { readonly reason: string; readonly message: string } = PAYMENT_REQUIRED,
): UptoPaymentRequiredResponse {
  const requirementV2 = buildUptoRequirementV2(settings, offer);
  const description = offer.description ?? '';
  const mimeType = offer.mimeType ?? 'application/json';
  const v2 = {
    x402Version: X402_V2, error: failure.reason, resource: { url: offer.resource, description, mimeType }, accepts: [requirementV2],
    // A buyer that never approved Permit2 may sign USDC's EIP-2612 permit for it instead; the official
    // client does so when the 402 declares this extension, and the backend submits it with the settlement.
    extensions: { eip2612GasSponsoring: EIP2612_GAS_SPONSORING_DECLARATION },
  };
  const body: PaymentRequiredBody = { x402Version: X402_V1, error: failure.reason, message: failure.message, status: 402, accepts: [] };
  return { ...challengeResponse(v2, body), requirementV2: deepFreeze(requirementV2) };
}
