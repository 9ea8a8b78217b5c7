// agentgate-x402-wire: what an x402 seller and its facilitator both speak, and nothing either keeps to
// itself. The seller library (agentgate-x402) and the backend (agentgate-x402-server) both depend on this
// package and import it by this one entry point.

// Amounts, networks and the x402 codecs of both generations.
export * from './price.js';
export * from './networks.js';
export * from './svm-networks.js';
export * from './codec/base64-json.js';
export * from './codec/json-depth.js';
export * from './codec/v1.js';
export * from './codec/v2.js';
export * from './codec/payment-header.js';
// What the backend tells a seller's middleware, and how a route's 402 is built from it.
export * from './seller-settings.js';
export * from './payment-flow.js';
export * from './challenge.js';
export * from './schemes/exact/evm/challenge.js';
export * from './schemes/upto/evm/challenge.js';
export * from './schemes/batch-settlement/evm/challenge.js';
export * from './schemes/auth-capture/evm/challenge.js';
export * from './schemes/exact/svm/challenge.js';
// Each scheme's wire shapes.
export * from './evm.js';
export * from './permit2.js';
export * from './schemes/exact/evm/wire.js';
export * from './schemes/upto/evm/wire.js';
export * from './schemes/batch-settlement/evm/wire.js';
export * from './schemes/auth-capture/evm/wire.js';
export * from './schemes/exact/svm/wire.js';
// Each scheme's failure reasons, and the names the spec gives them.
export * from './schemes/exact/evm/reasons.js';
export * from './schemes/upto/evm/reasons.js';
export * from './schemes/batch-settlement/evm/reasons.js';
export * from './schemes/auth-capture/evm/reasons.js';
export * from './schemes/exact/svm/reasons.js';
// Receipts (Ed25519 and offer-receipt JWS), webhook signatures, and how resource URLs compare.
export * from './canonical-json.js';
export * from './multikey.js';
export * from './receipt.js';
export * from './offer-receipt.js';
export * from './webhook.js';
export * from './resource-url.js';
export * from './loopback.js';

// Each protocol version's codec as one namespace, as the seller package re-exports it (x402v1.PaymentRequirementsV1Schema, ...).
export * as x402v1 from './codec/v1.js';
export * as x402v2 from './codec/v2.js';
