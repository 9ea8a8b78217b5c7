import { Schema } from 'mongoose';
import type { SealedSecret } from '../platform/secret-box.js';
import type { JwsReceipt } from 'agentgate-x402-wire';
import type { StoredPaymentInfo } from './schemes/auth-capture/evm/chain.js';

/** Per org: whether it accepts payments, and where they go. */
export interface SellerAccountDoc {
  _id: string; // orgId
  enabled: boolean;
  payTo: string; // checksummed address
  /** Other addresses a route may pay per request (the middleware's `payTo` function), checksummed. */
  payees?: string[];
  /** Where another network's payments go, by the network's v1 name (absent: payTo), checksummed. */
  payToByNetwork?: Record<string, string>;
  /** How often the backend claims this seller's channel calls on chain (absent: every sweep round, CHANNEL_SWEEP_EVERY_MS). */
  channelClaimEverySeconds?: number;
  updatedAt: Date;
}

export const sellerAccountSchema = new Schema<SellerAccountDoc>({
  _id: String,
  enabled: { type: Boolean, required: true },
  payTo: { type: String, required: true },
  payees: [String],
  payToByNetwork: { type: Schema.Types.Mixed },
  channelClaimEverySeconds: Number,
  updatedAt: { type: Date, required: true },
}, { versionKey: false });

/** A protected resource the seller registered: `<scheme>://<host><path>` (or `mcp://tool/<name>`) at a price. */
export interface EndpointDoc {
  _id: string;
  orgId: string;
  url: string;
  /** The price; for a dynamic price (`pricing: 'dynamic'`) the most one request may cost. */
  priceUsdc: string;
  priceAtomic: string;
  /** fixed: every request costs priceUsdc; dynamic: the middleware prices each request, up to priceUsdc. */
  pricing?: 'fixed' | 'dynamic';
  description: string;
  webhookUrl?: string;
  webhookSecret?: SealedSecret;
  /** Listed by the facilitator's bazaar discovery (GET /v0/x402/discovery/resources). */
  discoverable?: boolean;
  /**
   * JSON Schemas the seller declared for the call and its answer, kept as JSON text: a schema's own keys
   * ("$schema", "$ref") are not storable as field names in MongoDB.
   */
  inputSchemaJson?: string;
  outputSchemaJson?: string;
  createdAt: Date;
  updatedAt: Date;
  deletedAt?: Date;
}

export const endpointSchema = new Schema<EndpointDoc>({
  _id: String,
  orgId: { type: String, required: true },
  url: { type: String, required: true },
  priceUsdc: { type: String, required: true },
  priceAtomic: { type: String, required: true },
  pricing: { type: String, default: 'fixed' },
  description: { type: String, default: '' },
  webhookUrl: String,
  webhookSecret: Schema.Types.Mixed,
  discoverable: { type: Boolean, default: false },
  inputSchemaJson: String,
  outputSchemaJson: String,
  createdAt: { type: Date, required: true },
  updatedAt: { type: Date, required: true },
  deletedAt: Date,
}, { versionKey: false });
endpointSchema.index({ orgId: 1, url: 1 });
endpointSchema.index({ discoverable: 1 });

/** The seal context of an endpoint's webhook secret (see platform/secret-box.ts): binds the ciphertext to its endpoint. */
export const webhookSecretContext = (endpointId: string) => `webhook-secret:${endpointId}`;

/**
 * held: claimed and waiting for the seller's handler (captured: settled; released or expired: the claim is
 * removed); verified: claimed and being settled; settled and failed: what the chain did. auth-capture:
 * held is authorized into escrow (the buyer's money held there), and voided is an authorization given
 * back to the buyer (the handler failed, or the hold expired).
 */
export const PAYMENT_STATUSES = ['settled', 'held', 'verified', 'failed', 'voided'] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

export interface SignedReceipt {
  body: Record<string, unknown>;
  signature: string;
  publicKey: string;
  did: string;
}

export interface PaymentDoc {
  _id: string;
  orgId: string;
  direction: 'in';
  /** The registered endpoint paid for; null for a resource settled through the facilitator API unregistered. */
  endpointId: string | null;
  network: string;
  chainId: number;
  asset: string;
  payerAddress: string;
  recipientAddress: string;
  /** What was charged: for `upto`, the amount the seller named at settlement (before it, the maximum). */
  amountUsdcRaw: string;
  resourceUrl: string;
  x402Version: 1 | 2;
  /** absent: exact (EIP-3009); upto: a Permit2 permit for at most maxAmountUsdcRaw, settled for the amount used. */
  scheme?: 'exact' | 'upto' | 'auth-capture';
  /** exact through the x402ExactPermit2Proxy (a Permit2 witness transfer of the exact amount); absent: EIP-3009. */
  assetTransferMethod?: 'permit2';
  /**
   * auth-capture: the escrow payment (its id `hash`, the PaymentInfo the operator calls with), how it was
   * collected, and the transactions of its authorization and void. The capture is `txHash`.
   */
  escrow?: { hash: string; paymentInfo: StoredPaymentInfo; method: 'eip3009' | 'permit2'; collector: string; authorizeTx?: string; voidTx?: string };
  /** What was refunded of it so far (atomic USDC; refunds are in escrow_operations). */
  refundedUsdcRaw?: string;
  /** upto: the most the buyer allowed (the permit's amount). */
  maxAmountUsdcRaw?: string;
  /**
   * `${chainId}:${asset}:${payer}:${nonce}` (exact) or `${chainId}:permit2:${payer}:${nonce}` (upto, Permit2 exact), lower-case:
   * the unique claim that makes settlement at-most-once.
   */
  authorizationKey: string;
  authorizationNonce: string;
  /** exact: the EIP-3009 authorization. upto: the permit read the same way (value = the maximum, validBefore = the deadline). */
  authorization: { from: string; to: string; value: string; validAfter: string; validBefore: string; nonce: string };
  /** upto and Permit2 exact with the eip2612GasSponsoring extension: the buyer's USDC permit for Permit2, sent with the settlement. */
  eip2612Permit?: { value: string; deadline: string; v: number; r: string; s: string };
  /**
   * Permit2 exact with the erc20ApprovalGasSponsoring extension: the buyer's signed `approve(Permit2, ...)`
   * transaction, broadcast (its gas funded if the buyer has none) before the settlement.
   */
  erc20Approval?: { signedTransaction: string };
  /** upto and Permit2 exact: the signed Permit2 authorization as the buyer sent it (what settlement and reconciliation send); upto's witness names the facilitator. */
  permit2Authorization?: { from: string; permitted: { token: string; amount: string }; spender: string; nonce: string; deadline: string; witness: { to: string; facilitator?: string; validAfter: string } };
  signature: string;
  /**
   * exact on Solana: the complete transaction (base64, co-signed by our fee payer), its blockhash (it can
   * land only while the blockhash lives) and its fee payer. `authorizationNonce` is its id (signature).
   */
  svm?: { transaction: string; blockhash: string; feePayer: string };
  /** ERC-8021 builder-code attribution appended to the settlement transaction's calldata (builder-code.ts). */
  dataSuffix?: string;
  status: PaymentStatus;
  txHash?: string;
  failureReason?: string;
  signedReceipt?: SignedReceipt;
  /** The offer-receipt extension's JWS form of the same receipt. */
  offerReceipt?: JwsReceipt;
  /** payment.received outbox entry, written with the settlement (server/webhooks dispatches it). */
  webhook?: { status: 'pending' | 'dispatched' | 'skipped'; eventId: string; deliveryId?: string };
  /**
   * Set (true) while the outbox entry waits to be dispatched, and removed when it is: the outbox sweep
   * finds pending entries by this field's small index instead of reading every payment.
   */
  webhookUndispatched?: true;
  createdAt: Date;
  /**
   * The UTC hour of createdAt (`2026-12-01T14`), which pages and totals find the payment by (one equality
   * each: platform/history-buckets.ts). Absent on payments written before it was: they are read the old way.
   */
  hour?: string;
  /** A held claim not captured by then is released (the buyer was not charged). */
  holdExpiresAt?: Date;
  submittedAt?: Date;
  settledAt?: Date;
}

export const paymentSchema = new Schema<PaymentDoc>({
  _id: String,
  orgId: { type: String, required: true },
  direction: { type: String, default: 'in' },
  endpointId: { type: String, default: null },
  network: { type: String, required: true },
  chainId: { type: Number, required: true },
  asset: { type: String, required: true },
  payerAddress: { type: String, required: true },
  recipientAddress: { type: String, required: true },
  amountUsdcRaw: { type: String, required: true },
  resourceUrl: { type: String, required: true },
  x402Version: { type: Number, required: true },
  scheme: String,
  maxAmountUsdcRaw: String,
  escrow: Schema.Types.Mixed,
  refundedUsdcRaw: String,
  permit2Authorization: Schema.Types.Mixed,
  eip2612Permit: Schema.Types.Mixed,
  assetTransferMethod: String,
  erc20Approval: Schema.Types.Mixed,
  svm: Schema.Types.Mixed,
  authorizationKey: { type: String, required: true, unique: true },
  authorizationNonce: { type: String, required: true },
  authorization: { type: Schema.Types.Mixed, required: true },
  signature: { type: String, required: true },
  dataSuffix: String,
  status: { type: String, required: true },
  txHash: String,
  failureReason: String,
  signedReceipt: Schema.Types.Mixed,
  offerReceipt: Schema.Types.Mixed,
  webhook: Schema.Types.Mixed,
  webhookUndispatched: Boolean,
  createdAt: { type: Date, required: true },
  hour: String,
  holdExpiresAt: Date,
  submittedAt: Date,
  settledAt: Date,
}, { versionKey: false, minimize: false });
paymentSchema.index({ orgId: 1, createdAt: -1, _id: -1 });
// A seller's payments of one hour (pages, totals, the CSV export: records.ts), and its undated ones (hour: null).
paymentSchema.index({ orgId: 1, hour: 1 });
paymentSchema.index({ status: 1, createdAt: 1 });
// The webhook outbox sweep (webhook-outbox.ts): only payments whose entry waits are in it.
paymentSchema.index({ webhookUndispatched: 1, settledAt: 1 }, { sparse: true });
// Sign-In-With-X: a payer's settled payments for a resource (records.ts latestSettled).
paymentSchema.index({ orgId: 1, payerAddress: 1, resourceUrl: 1, createdAt: -1 });
