import { caip2FromChainId } from './networks.js';
import { encodeBase64Json } from './codec/base64-json.js';
import { X402_V1, type PaymentRequirementsV1 } from './codec/v1.js';
import { X402_V2, type PaymentRequiredV2, type PaymentRequirementsV2 } from './codec/v2.js';
import type { UptoRequirementsV2 } from './schemes/upto/evm/wire.js';
import type { AuthCaptureRequirements } from './schemes/auth-capture/evm/wire.js';
import { DEFAULT_MAX_TIMEOUT_SECONDS, type SellerSettings } from './seller-settings.js';
import { DEFAULT_PAYMENT_FLOW, withPaymentFlow, type PaymentFlow } from './payment-flow.js';

/** What is being sold: one resource at one price. */
export interface Offer {
  readonly amountAtomic: bigint;
  /** `<scheme>://<host><path>` */
  readonly resource: string;
  readonly description?: string;
  readonly mimeType?: string;
  readonly maxTimeoutSeconds?: number;
  readonly outputSchema?: Record<string, unknown>;
  /** The x402 v2 payment flow (payment-flow.ts); `authorization` when absent, and then not written. */
  readonly paymentFlow?: PaymentFlow;
  /** batch-settlement: `permit2` asks for deposits through the Permit2 collector (written then only; ERC-3009 is the default). */
  readonly assetTransferMethod?: 'eip3009' | 'permit2';
}

export interface PaymentRequiredBody {
  readonly x402Version: 1;
  /** Machine code: "payment_required" when no payment was sent, else why the payment was refused. */
  readonly error: string;
  readonly message: string;
  readonly status: 402;
  readonly accepts: readonly PaymentRequirementsV1[];
}

export interface PaymentRequiredResponse {
  readonly status: 402;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: PaymentRequiredBody;
  /** `body` serialized once, for adapters that write raw bytes. */
  readonly bodyText: string;
  readonly requirementV1: PaymentRequirementsV1;
  readonly requirementV2: PaymentRequirementsV2;
}

/** The 402 of a route sold by usage: v2 only (x402 v1 has no `upto`), so the v1 body offers nothing. */
export interface UptoPaymentRequiredResponse extends Omit<PaymentRequiredResponse, 'requirementV1' | 'requirementV2'> {
  readonly requirementV1?: undefined;
  readonly requirementV2: UptoRequirementsV2;
}

export const PAYMENT_REQUIRED = { reason: 'payment_required', message: 'This resource requires payment' } as const;

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

/** The parts every 402 shares: the v2 header, the v1 body (prebuilt, frozen: it is served as is). */
function challengeResponse(v2: unknown, body: PaymentRequiredBody) {
  return {
    status: 402 as const,
    headers: Object.freeze({
      'Content-Type': 'application/json; charset=utf-8',
      'PAYMENT-REQUIRED': encodeBase64Json(v2),
      // A 402 is specific to this moment and this buyer; no cache should replay it.
      'Cache-Control': 'no-store',
      'Access-Control-Expose-Headers': 'PAYMENT-REQUIRED',
    }),
    body: deepFreeze(body),
    bodyText: JSON.stringify(body),
  };
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

/** The gas sponsoring extensions' declarations (specs/extensions/): the client fills in everything else. */
const EIP2612_GAS_SPONSORING_DECLARATION = { info: { description: 'The facilitator accepts EIP-2612 gasless Permit to `Permit2` canonical contract.', version: '1' } } as const;
const ERC20_APPROVAL_GAS_SPONSORING_DECLARATION = { info: { description: 'The facilitator accepts a raw signed approval transaction and will sponsor the gas fees.', version: '1' } } as const;

/** What a 402 offering `exact` through Permit2 declares: a buyer without a Permit2 allowance, or without gas, pays anyway. */
export const PERMIT2_GAS_SPONSORING_EXTENSIONS = { eip2612GasSponsoring: EIP2612_GAS_SPONSORING_DECLARATION, erc20ApprovalGasSponsoring: ERC20_APPROVAL_GAS_SPONSORING_DECLARATION } as const;

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

/** The 402 of a route sold by auth-capture: v2 only, like upto. */
export interface AuthCapturePaymentRequiredResponse extends Omit<PaymentRequiredResponse, 'requirementV1' | 'requirementV2'> {
  readonly requirementV1?: undefined;
  readonly requirementV2: AuthCaptureRequirements;
}

/** How long an auth-capture offer holds: the capture window after the buyer may pay, and the refund window. */
export interface EscrowWindows { readonly captureSeconds: number; readonly refundSeconds: number; readonly nowSeconds: number }

/**
 * An x402 `auth-capture` requirement (specs/schemes/auth-capture/, EVM): the backend's relayer is the
 * (delegated) operator, no receiver authorizer, no fee; the capture deadline leaves the buyer its
 * maxTimeoutSeconds to pay and the handler its capture window; refunds until the refund deadline. The
 * lifecycle runs through the backend's API (captureMode `deferred`, as the spec asks of such routes).
 */
export function buildAuthCaptureRequirementV2(settings: SellerSettings, offer: Offer, windows: EscrowWindows): AuthCaptureRequirements {
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
  windows: EscrowWindows,
  failure: { readonly reason: string; readonly message: string } = PAYMENT_REQUIRED,
): AuthCapturePaymentRequiredResponse {
  const requirementV2 = buildAuthCaptureRequirementV2(settings, offer, windows);
  const v2 = { x402Version: X402_V2, error: failure.reason, resource: { url: offer.resource, description: offer.description ?? '', mimeType: offer.mimeType ?? 'application/json' }, accepts: [requirementV2] };
  const body: PaymentRequiredBody = { x402Version: X402_V1, error: failure.reason, message: failure.message, status: 402, accepts: [] };
  return { ...challengeResponse(v2 as never, body), requirementV2: deepFreeze(requirementV2) };
}

function timeoutOf(settings: SellerSettings, offer: Offer): number {
  return offer.maxTimeoutSeconds ?? settings.maxTimeoutSeconds ?? DEFAULT_MAX_TIMEOUT_SECONDS;
}

// Responses are shared between requests (cached per route), so nobody may mutate them.
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const item of Object.values(value)) deepFreeze(item);
  }
  return value;
}

/** The x402 `batch-settlement` requirement (a payment channel): the price per call, and what the buyer's channel must name. */
export interface ChannelRequirementsV2 {
  scheme: 'batch-settlement';
  network: string;
  amount: string;
  asset: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra: { name: string; version: string; receiverAuthorizer: string; withdrawDelay: number } & Record<string, unknown>;
}

/** The channel's withdrawal delay our 402s name (the contract's minimum). */
export const CHANNEL_WITHDRAW_DELAY = 900;

export function buildChannelRequirementV2(settings: SellerSettings, offer: Offer): ChannelRequirementsV2 {
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
export function buildChannelPaymentRequired(
  settings: SellerSettings,
  offer: Offer,
  failure: { readonly reason: string; readonly message: string } = PAYMENT_REQUIRED,
  extra?: Readonly<Record<string, unknown>>,
): ChannelPaymentRequiredResponse {
  const requirementV2 = buildChannelRequirementV2(settings, offer);
  const offered = extra ? { ...requirementV2, extra: { ...requirementV2.extra, ...extra } } : requirementV2;
  const v2 = { x402Version: X402_V2, error: failure.reason, resource: { url: offer.resource, description: offer.description ?? '', mimeType: offer.mimeType ?? 'application/json' }, accepts: [offered] };
  const body: PaymentRequiredBody = { x402Version: X402_V1, error: failure.reason, message: failure.message, status: 402, accepts: [] };
  return { ...challengeResponse(v2, body), requirementV2: deepFreeze(requirementV2) };
}

export interface ChannelPaymentRequiredResponse extends Omit<PaymentRequiredResponse, 'requirementV1' | 'requirementV2'> {
  readonly requirementV1?: undefined;
  readonly requirementV2: ChannelRequirementsV2;
}
