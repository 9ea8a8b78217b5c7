import { caip2FromChainId } from '../../../networks.js';
import { X402_V1 } from '../../../codec/v1.js';
import { X402_V2 } from '../../../codec/v2.js';
import type { SellerSettings } from '../../../seller-settings.js';
import { challengeResponse, deepFreeze, PAYMENT_REQUIRED, timeoutOf, type Offer, type PaymentRequiredBody, type PaymentRequiredResponse } from '../../../challenge.js';

// The x402 `batch-settlement` scheme's requirement and 402 (v2 only): a payment channel's price per call
// and what the buyer's channel must name.

/** The x402 `batch-settlement` requirement (a payment channel): the price per call, and what the buyer's channel must name. */
export interface BatchSettlementRequirementsV2 {
  scheme: 'batch-settlement';
  network: string;
  amount: string;
  asset: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra: { name: string; version: string; receiverAuthorizer: string; withdrawDelay: number } & Record<string, unknown>;
}

/**
 * The channel's withdrawal delay our 402s name: the contract's minimum. A payer leaving waits 15 minutes,
 * and the claim sweep claims long before (CHANNEL_SWEEP_EVERY_MS is at most 10 minutes).
 */
export const CHANNEL_WITHDRAW_DELAY = 900;

export function buildBatchSettlementRequirementV2(settings: SellerSettings, offer: Offer): BatchSettlementRequirementsV2 {
  if (!settings.channelReceiverAuthorizer) throw new TypeError('the payment backend offers no batch-settlement receiver authorizer (seller settings have no channelReceiverAuthorizer): batch-settlement routes need a backend that takes channel payments');
  return {
    scheme: 'batch-settlement',
    network: caip2FromChainId(settings.chainId),
    amount: offer.amountAtomic.toString(),
    asset: settings.asset,
    payTo: settings.payTo,
    maxTimeoutSeconds: timeoutOf(settings, offer),
    extra: {
      name: settings.assetName, version: settings.assetVersion, receiverAuthorizer: settings.channelReceiverAuthorizer, withdrawDelay: CHANNEL_WITHDRAW_DELAY,
      ...(offer.assetTransferMethod === 'permit2' ? { assetTransferMethod: 'permit2' } : {}),
    },
  };
}

/** The 402 of a channel route: v2 only (the v1 body offers nothing). A refusal may add where the channel stands to the offer's extra. */
export function buildBatchSettlementPaymentRequired(
  settings: SellerSettings,
  offer: Offer,
  failure: { readonly reason: string; readonly message: string } = PAYMENT_REQUIRED,
  extra?: Readonly<Record<string, unknown>>,
): BatchSettlementPaymentRequiredResponse {
  const requirementV2 = buildBatchSettlementRequirementV2(settings, offer);
  const offered = extra ? { ...requirementV2, extra: { ...requirementV2.extra, ...extra } } : requirementV2;
  const v2 = { x402Version: X402_V2, error: failure.reason, resource: { url: offer.resource, description: offer.description ?? '', mimeType: offer.mimeType ?? 'application/json' }, accepts: [offered] };
  const body: PaymentRequiredBody = { x402Version: X402_V1, error: failure.reason, message: failure.message, status: 402, accepts: [] };
  return { ...challengeResponse(v2, body), requirementV2: deepFreeze(requirementV2) };
}

export interface BatchSettlementPaymentRequiredResponse extends Omit<PaymentRequiredResponse, 'requirementV1' | 'requirementV2'> {
  readonly requirementV1?: undefined;
  readonly requirementV2: BatchSettlementRequirementsV2;
}
