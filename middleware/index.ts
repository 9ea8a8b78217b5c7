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

export { parseSellerSettings, SellerSettingsSchema, DEFAULT_MAX_TIMEOUT_SECONDS } from 'agentgate-x402-wire';
export type { SellerSettings } from 'agentgate-x402-wire';

export { DEFAULT_PAYMENT_FLOW, PAYMENT_FLOWS, paymentFlowOf, readPaymentFlow, withPaymentFlow } from 'agentgate-x402-wire';
export type { PaymentFlow } from 'agentgate-x402-wire';
export { buildAuthCapturePaymentRequired, buildAuthCaptureRequirementV2, buildBatchSettlementPaymentRequired, buildBatchSettlementRequirementV2, buildPaymentRequired, buildPermit2PaymentRequired, buildPermit2RequirementV2, buildRequirementV1, buildRequirementV2, buildUptoPaymentRequired, buildUptoRequirementV2, PERMIT2_GAS_SPONSORING_EXTENSIONS } from 'agentgate-x402-wire';
export type { AuthCapturePaymentRequiredResponse, BatchSettlementRequirementsV2, AuthCaptureWindows, Offer, PaymentRequiredBody, PaymentRequiredResponse, UptoPaymentRequiredResponse } from 'agentgate-x402-wire';
export { DEFAULT_CAPTURE_SECONDS, DEFAULT_REFUND_SECONDS } from './payment-required.js';

export { formatUsdc, InvalidPriceError, MAX_PRICE_ATOMIC, parseCharge, parsePrice, USDC_DECIMALS } from 'agentgate-x402-wire';
export type { Price } from 'agentgate-x402-wire';

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
} from 'agentgate-x402-wire';
export type { Caip2Id, NetworkInfo } from 'agentgate-x402-wire';

export { decodePaymentHeader } from 'agentgate-x402-wire';
export type { DecodedPaymentHeader, PaymentHeaderFailure, PaymentHeaderResult } from 'agentgate-x402-wire';
export { decodeBase64Json, encodeBase64Json, MAX_PAYMENT_HEADER_BYTES } from 'agentgate-x402-wire';
export { x402v1, x402v2 } from 'agentgate-x402-wire';
export { ExactEvmAuthorizationSchema, ExactEvmPayloadSchema } from 'agentgate-x402-wire';
export type { ExactEvmAuthorization, ExactEvmPayload } from 'agentgate-x402-wire';

export { canonicalJson, CanonicalJsonError } from 'agentgate-x402-wire';
export { verifyReceipt } from 'agentgate-x402-wire';
export { OFFER_RECEIPT, verifyJwsReceipt } from 'agentgate-x402-wire';
export type { JwsReceipt, JwsReceiptVerification, OfferReceiptPayload } from 'agentgate-x402-wire';
export type { DidDocument, Receipt, ReceiptVerification, TrustedKey } from 'agentgate-x402-wire';
export { ed25519ToMultibase, encodeBase64Url, parseEd25519PublicKey } from 'agentgate-x402-wire';
export { verifyWebhook, webhookSignature, WEBHOOK_HEADERS, type PaymentReceivedEvent, type ChannelClaimedEvent } from 'agentgate-x402-wire';

export { syncEndpoints } from './endpoint-sync.js';
export type { EndpointSyncReport, SyncedEndpoint, SyncEndpointsOptions } from './endpoint-sync.js';
export { canonicalLoopback, LOOPBACK_HOSTS, loopbackSpellings } from 'agentgate-x402-wire';
