import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';

/**
 * `payment.received` webhooks (SPEC 6.1). The backend signs the raw body with HMAC-SHA256 keyed with the
 * endpoint's `whsec_` secret and sends `X-Service-Signature: sha256=<hex>`. Receivers verify over the
 * raw, unparsed bytes: re-serialized JSON is not the same bytes.
 */

export const WEBHOOK_HEADERS = {
  signature: 'x-service-signature',
  event: 'x-service-event',
  idempotencyKey: 'x-service-idempotency-key',
} as const;

export type WebhookEventName = 'payment.received' | 'payment.refunded' | 'payment.voided' | 'channel.claimed';

/** The JSON body of a `payment.received` delivery: the signed receipt plus the event envelope. */
export interface PaymentReceivedEvent {
  event: WebhookEventName;
  paymentId: string;
  /** When the event was created (the settlement time), ISO 8601. */
  createdAt: string;
  /** The signed receipt: verify it with `verifyReceipt` against the service's did:web key. */
  body: Record<string, unknown>;
  signature: string;
  publicKey: string;
  did: string;
}

/**
 * `payment.refunded`: a refund of an auth-capture payment reached the buyer on chain. Carries the refund's
 * own signed receipt (body, signature, publicKey, did: verify it with `verifyReceipt`).
 */
export interface PaymentRefundedEvent {
  event: 'payment.refunded';
  paymentId: string;
  refundId: string;
  createdAt: string;
  amountUsdcRaw: string;
  reason: string;
  txHash: string;
  body: Record<string, unknown>;
  signature: string;
  publicKey: string;
  did: string;
}

/** `payment.voided`: an auth-capture authorization went back to the buyer (the handler failed, or the hold expired). */
export interface PaymentVoidedEvent {
  event: 'payment.voided';
  paymentId: string;
  createdAt: string;
  /** What went back to the buyer. */
  amountUsdcRaw: string;
  payerAddress: string;
  txHash: string;
}

/**
 * `channel.claimed`: a claim transaction carried the value of paid calls made through batch-settlement
 * channels. One event per claim transaction and endpoint (in parts of at most 100 calls), not one per call:
 * calls come hundreds a minute and are each paid the moment their voucher is accepted; what a seller
 * reconciles is which transaction moved which calls' value. Each call carries its own signed receipt
 * (verify it with `verifyReceipt`); the call's record is GET /v0/payments/{paymentId}.
 */
export interface ChannelClaimedEvent {
  event: 'channel.claimed';
  /** The claim (one transaction, many channels): the same id in every part. */
  claimId: string;
  /** When the claim's outcome was recorded, ISO 8601. */
  createdAt: string;
  network: string;
  /** The claim transaction ("" when the claim found its calls claimed already and named no transaction). */
  txHash: string;
  endpointId: string;
  /** This event's part, from 1, of `parts` (a claim of more than 100 calls for one endpoint comes in parts). */
  part: number;
  parts: number;
  /** What this part's calls add up to (atomic USDC). */
  amountUsdcRaw: string;
  calls: Array<{
    paymentId: string;
    channelId: string;
    payerAddress: string;
    amountUsdcRaw: string;
    cumulativeAmountUsdcRaw: string;
    resourceUrl: string;
    acceptedAt: string;
    receipt: { body: Record<string, unknown>; signature: string; publicKey: string; did: string } | null;
  }>;
}

const encoder = new TextEncoder();
const bytesOf = (value: string | Uint8Array) => (typeof value === 'string' ? encoder.encode(value) : value);

/** `sha256=<hex>`, the value of `X-Service-Signature` for this body and secret. */
export function webhookSignature(rawBody: string | Uint8Array, secret: string): string {
  return `sha256=${bytesToHex(hmac(sha256, encoder.encode(secret), bytesOf(rawBody)))}`;
}

/**
 * True when `signatureHeader` is the HMAC of `rawBody` under `secret`. Compares in constant time; an
 * empty secret or a missing/malformed header is false (a misconfigured receiver refuses everything
 * rather than accepting everything).
 */
export function verifyWebhook(rawBody: string | Uint8Array, signatureHeader: string | string[] | null | undefined, secret: string): boolean {
  if (typeof secret !== 'string' || secret.length === 0) return false;
  const header = Array.isArray(signatureHeader) ? signatureHeader[0] : signatureHeader;
  if (typeof header !== 'string' || !/^sha256=[0-9a-fA-F]{64}$/.test(header.trim())) return false;
  const expected = encoder.encode(webhookSignature(rawBody, secret));
  const given = encoder.encode(`sha256=${header.trim().slice(7).toLowerCase()}`);
  if (expected.length !== given.length) return false;
  let diff = 0;
  for (let i = 0; i < expected.length; i++) diff |= expected[i]! ^ given[i]!;
  return diff === 0;
}
