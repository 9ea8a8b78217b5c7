import { caip2FromChainId } from '../../../networks.js';
import { X402_V1, type PaymentRequirementsV1 } from '../../../codec/v1.js';
import { X402_V2, type PaymentRequiredV2, type PaymentRequirementsV2 } from '../../../codec/v2.js';
import type { SellerSettings } from '../../../seller-settings.js';
import { DEFAULT_PAYMENT_FLOW, withPaymentFlow } from '../../../payment-flow.js';
import { PERMIT2_GAS_SPONSORING_EXTENSIONS } from '../../../permit2.js';
import { challengeResponse, deepFreeze, PAYMENT_REQUIRED, timeoutOf, type Offer, type PaymentRequiredBody, type PaymentRequiredResponse } from '../../../challenge.js';

// The x402 `exact` scheme's requirements and 402: v1 and v2 for EIP-3009, v2 only through Permit2.

export function buildRequirementV1(settings: SellerSettings, offer: Offer): PaymentRequirementsV1 {
  const requirement: PaymentRequirementsV1 = {
    scheme: 'exact',
    network: settings.network,
    maxAmountRequired: offer.amountAtomic.toString(),
    resource: offer.resource,
    description: offer.description ?? '',
    mimeType: offer.mimeType ?? 'application/json',
    payTo: settings.payTo,
    maxTimeoutSeconds: timeoutOf(settings, offer),
    asset: settings.asset,
    extra: { name: settings.assetName, version: settings.assetVersion },
  };
  if (offer.outputSchema) requirement.outputSchema = offer.outputSchema;
  return requirement;
}

export function buildRequirementV2(settings: SellerSettings, offer: Offer): PaymentRequirementsV2 {
  return {
    scheme: 'exact',
    network: caip2FromChainId(settings.chainId),
    amount: offer.amountAtomic.toString(),
    asset: settings.asset,
    payTo: settings.payTo,
    maxTimeoutSeconds: timeoutOf(settings, offer),
    extra: withPaymentFlow({ name: settings.assetName, version: settings.assetVersion }, offer.paymentFlow ?? DEFAULT_PAYMENT_FLOW),
  };
}

/**
 * The 402 both client generations can pay: the v1 body `{x402Version: 1, accepts}` (read by `x402-fetch`)
 * and the v2 `PAYMENT-REQUIRED` header (read first by `@x402/fetch`).
 */
export function buildPaymentRequired(
  settings: SellerSettings,
  offer: Offer,
  failure: { readonly reason: string; readonly message: string } = PAYMENT_REQUIRED,
): PaymentRequiredResponse {
  const requirementV1 = buildRequirementV1(settings, offer);
  const requirementV2 = buildRequirementV2(settings, offer);
  const v2: PaymentRequiredV2 = {
    x402Version: X402_V2,
    error: failure.reason,
    resource: { url: offer.resource, description: requirementV1.description, mimeType: requirementV1.mimeType },
    accepts: [requirementV2],
  };
  const body: PaymentRequiredBody = {
    x402Version: X402_V1,
    error: failure.reason,
    message: failure.message,
    status: 402,
    accepts: [requirementV1],
  };
  return { ...challengeResponse(v2, body), requirementV1: deepFreeze(requirementV1), requirementV2: deepFreeze(requirementV2) };
}

/** The 402 of an `exact` route paid through Permit2: v2 only (x402 v1 has no Permit2 transfer). */
export interface Permit2PaymentRequiredResponse extends Omit<PaymentRequiredResponse, 'requirementV1'> {
  readonly requirementV1?: undefined;
}

/**
 * An x402 `exact` requirement paid through Permit2 (specs/schemes/exact/scheme_exact_evm.md): the buyer
 * signs a Permit2 witness transfer to the x402ExactPermit2Proxy instead of an EIP-3009 authorization, for
 * tokens without EIP-3009 or a wallet that prefers Permit2.
 */
export function buildPermit2RequirementV2(settings: SellerSettings, offer: Offer): PaymentRequirementsV2 {
  const requirement = buildRequirementV2(settings, offer);
  return { ...requirement, extra: { ...requirement.extra, assetTransferMethod: 'permit2' } };
}

/**
 * Its 402, declaring both gas sponsoring extensions: a buyer that never approved Permit2 signs USDC's
 * EIP-2612 permit (the official client prefers it) or an approve transaction, and pays no gas.
 */
export function buildPermit2PaymentRequired(
  settings: SellerSettings,
  offer: Offer,
  failure: { readonly reason: string; readonly message: string } = PAYMENT_REQUIRED,
): Permit2PaymentRequiredResponse {
  const requirementV2 = buildPermit2RequirementV2(settings, offer);
  const v2 = {
    x402Version: X402_V2, error: failure.reason, resource: { url: offer.resource, description: offer.description ?? '', mimeType: offer.mimeType ?? 'application/json' }, accepts: [requirementV2],
    extensions: PERMIT2_GAS_SPONSORING_EXTENSIONS,
  };
  const body: PaymentRequiredBody = { x402Version: X402_V1, error: failure.reason, message: failure.message, status: 402, accepts: [] };
  return { ...challengeResponse(v2, body), requirementV2: deepFreeze(requirementV2) };
}
