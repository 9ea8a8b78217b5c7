import { encodeBase64Json } from './codec/base64-json.js';
import type { PaymentRequirementsV1 } from './codec/v1.js';
import type { PaymentRequirementsV2 } from './codec/v2.js';
import { DEFAULT_MAX_TIMEOUT_SECONDS, type SellerSettings } from './seller-settings.js';
import type { PaymentFlow } from './payment-flow.js';

// What every 402 shares, whatever its scheme: what is offered, the v1 body and v2 header, and how a
// response is made once and frozen (it is served to every unpaid request of its route). Each scheme's own
// builder is in schemes/<scheme>/evm/challenge.ts.

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

export const PAYMENT_REQUIRED = { reason: 'payment_required', message: 'This resource requires payment' } as const;

/** The parts every 402 shares: the v2 header, the v1 body (prebuilt, frozen: it is served as is). */
export function challengeResponse(v2: unknown, body: PaymentRequiredBody) {
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

/** How long the buyer's payment must stay valid: the offer's, the seller's, or x402's default. */
export function timeoutOf(settings: SellerSettings, offer: Offer): number {
  return offer.maxTimeoutSeconds ?? settings.maxTimeoutSeconds ?? DEFAULT_MAX_TIMEOUT_SECONDS;
}

// Responses are shared between requests (cached per route), so nobody may mutate them.
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const item of Object.values(value)) deepFreeze(item);
  }
  return value;
}
