import { caip2FromChainId } from '../../../networks.js';
import { X402_V1 } from '../../../codec/v1.js';
import { X402_V2 } from '../../../codec/v2.js';
import type { SellerSettings } from '../../../seller-settings.js';
import { challengeResponse, deepFreeze, PAYMENT_REQUIRED, timeoutOf, type Offer, type PaymentRequiredBody, type PaymentRequiredResponse } from '../../../challenge.js';
import type { AuthCaptureRequirements } from './wire.js';

// The x402 `auth-capture` scheme's requirement and 402 (v2 only): an escrow offer with its windows.

/** The 402 of a route sold by auth-capture: v2 only, like upto. */
export interface AuthCapturePaymentRequiredResponse extends Omit<PaymentRequiredResponse, 'requirementV1' | 'requirementV2'> {
  readonly requirementV1?: undefined;
  readonly requirementV2: AuthCaptureRequirements;
}

/** How long an auth-capture offer holds: the capture window after the buyer may pay, and the refund window. */
export interface AuthCaptureWindows { readonly captureSeconds: number; readonly refundSeconds: number; readonly nowSeconds: number }

/**
 * An x402 `auth-capture` requirement (specs/schemes/auth-capture/, EVM): the backend's relayer is the
 * (delegated) operator, no receiver authorizer, no fee; the capture deadline leaves the buyer its
 * maxTimeoutSeconds to pay and the handler its capture window; refunds until the refund deadline. The
 * lifecycle runs through the backend's API (captureMode `deferred`, as the spec asks of such routes).
 */
export function buildAuthCaptureRequirementV2(settings: SellerSettings, offer: Offer, windows: AuthCaptureWindows): AuthCaptureRequirements {
  if (!settings.authCaptureOperator) throw new TypeError('the payment backend offers no auth-capture operator (seller settings have no authCaptureOperator): auth-capture routes need a backend that settles auth-capture');
  const maxTimeoutSeconds = timeoutOf(settings, offer);
  const captureDeadline = windows.nowSeconds + maxTimeoutSeconds + windows.captureSeconds;
  return {
    scheme: 'auth-capture',
    network: caip2FromChainId(settings.chainId),
    amount: offer.amountAtomic.toString(),
    asset: settings.asset,
    payTo: settings.payTo,
    maxTimeoutSeconds,
    extra: {
      name: settings.assetName, version: settings.assetVersion,
      ...(settings.authCaptureEscrow ? { authCaptureEscrow: settings.authCaptureEscrow } : {}),
      captureAuthorizer: settings.authCaptureOperator,
      captureDeadline, refundDeadline: Math.max(captureDeadline, windows.nowSeconds + windows.refundSeconds),
      minFeeBps: 0, maxFeeBps: 0, feeRecipient: '0x0000000000000000000000000000000000000000',
      assetTransferMethod: 'eip3009', paymentFlow: 'escrow', operatorType: 'delegated', captureMode: 'deferred',
    },
  };
}

export function buildAuthCapturePaymentRequired(
  settings: SellerSettings,
  offer: Offer,
  windows: AuthCaptureWindows,
  failure: { readonly reason: string; readonly message: string } = PAYMENT_REQUIRED,
): AuthCapturePaymentRequiredResponse {
  const requirementV2 = buildAuthCaptureRequirementV2(settings, offer, windows);
  const v2 = { x402Version: X402_V2, error: failure.reason, resource: { url: offer.resource, description: offer.description ?? '', mimeType: offer.mimeType ?? 'application/json' }, accepts: [requirementV2] };
  const body: PaymentRequiredBody = { x402Version: X402_V1, error: failure.reason, message: failure.message, status: 402, accepts: [] };
  return { ...challengeResponse(v2 as never, body), requirementV2: deepFreeze(requirementV2) };
}
