// Public API of the framework-free x402 seller core. Adapters (express, koa, mcp) build on Paywall.

export { Paywall, isUsagePrice } from './paywall.js';
export type {
  ErrorBody,
  HeldPayment,
  PaidOutcome,
  PaymentRequiredOutcome,
  PaywallOptions,
  PaywallOutcome,
  PaywallRequest,
  RequestPayment,
  RouteConfig,
  SettledPayment,
  SettleMode,
  UnavailableOutcome,
  UsagePrice,
} from './paywall.js';

export { FacilitatorUnavailable } from './facilitator.js';
export type { CaptureUsage, ChannelPayResult, Facilitator, HoldRequest, HoldResult, PaymentResponse, RedeemRequest, RedeemResult } from './facilitator.js';

export { BackendRequestError, createBackendClient, SELLER_KEY_PREFIX } from './backend-client.js';
export type { BackendConnection, BackendTransport } from './backend-http.js';
export type { BackendClient, BackendClientOptions, BackendRedeemResponse, PaymentList, PaymentRecord, SignedReceipt } from './backend-client.js';
export { createBackendPaywall } from './backend-paywall.js';
export type { BackendPaywallOptions } from './backend-paywall.js';
export { createPaymentsClient } from './payments-client.js';
export type { PaymentsClient } from './payments-client.js';

export { parseSellerSettings, SellerSettingsSchema, DEFAULT_MAX_TIMEOUT_SECONDS } from './seller-settings.js';
export type { SellerSettings } from './seller-settings.js';

export { DEFAULT_PAYMENT_FLOW, PAYMENT_FLOWS, paymentFlowOf, readPaymentFlow, withPaymentFlow } from './payment-flow.js';
export type { PaymentFlow } from './payment-flow.js';
export { buildAuthCapturePaymentRequired, buildAuthCaptureRequirementV2, buildChannelPaymentRequired, buildChannelRequirementV2, buildPaymentRequired, buildPermit2PaymentRequired, buildPermit2RequirementV2, buildRequirementV1, buildRequirementV2, buildUptoPaymentRequired, buildUptoRequirementV2, PERMIT2_GAS_SPONSORING_EXTENSIONS } from './challenge.js';
export type { AuthCapturePaymentRequiredResponse, ChannelRequirementsV2, EscrowWindows, Offer, PaymentRequiredBody, PaymentRequiredResponse, UptoPaymentRequiredResponse } from './challenge.js';
export { DEFAULT_CAPTURE_SECONDS, DEFAULT_REFUND_SECONDS } from './payment-required.js';

export { formatUsdc, InvalidPriceError, MAX_PRICE_ATOMIC, parseCharge, parsePrice, USDC_DECIMALS } from './price.js';
export type { Price } from './price.js';

export { canonicalizePath } from './canonical-path.js';
export type { CanonicalPath, PathRejection } from './canonical-path.js';
export { compileRoute, InvalidRoutePatternError, RouteTable } from './routes.js';
export type { CompiledRoute, RouteMatch } from './routes.js';

export {
  caip2FromChainId,
  chainIdFromCaip2,
  LOCAL_CHAIN_ID,
  networkByChainId,
  networkByName,
  NETWORKS,
  toCaip2Network,
  toV1Network,
} from './networks.js';
export type { Caip2Id, NetworkInfo } from './networks.js';

export { decodePaymentHeader } from './protocol/payment-header.js';
export type { DecodedPaymentHeader, PaymentHeaderFailure, PaymentHeaderResult } from './protocol/payment-header.js';
export { decodeBase64Json, encodeBase64Json, MAX_PAYMENT_HEADER_BYTES } from './protocol/base64-json.js';
export * as x402v1 from './protocol/v1.js';
export * as x402v2 from './protocol/v2.js';
export { ExactEvmAuthorizationSchema, ExactEvmPayloadSchema } from './protocol/exact-evm.js';
export type { ExactEvmAuthorization, ExactEvmPayload } from './protocol/exact-evm.js';

export { canonicalJson, CanonicalJsonError } from './canonical-json.js';
export { verifyReceipt } from './receipt.js';
export { OFFER_RECEIPT, verifyJwsReceipt } from './offer-receipt.js';
export type { JwsReceipt, JwsReceiptVerification, OfferReceiptPayload } from './offer-receipt.js';
export type { DidDocument, Receipt, ReceiptVerification, TrustedKey } from './receipt.js';
export { ed25519ToMultibase, encodeBase64Url, parseEd25519PublicKey } from './multikey.js';
export { verifyWebhook, webhookSignature, WEBHOOK_HEADERS, type PaymentReceivedEvent, type ChannelClaimedEvent } from './webhook.js';

export { syncEndpoints } from './endpoint-sync.js';
export type { EndpointSyncReport, SyncedEndpoint, SyncEndpointsOptions } from './endpoint-sync.js';
export { canonicalLoopback, LOOPBACK_HOSTS, loopbackSpellings } from './loopback.js';
