import { decodeBase64Json, MAX_PAYMENT_HEADER_BYTES } from './base64-json.js';
import { PaymentPayloadV1Schema, PaymentPayloadV2Schema, type PaymentPayloadV1, type PaymentPayloadV2 } from '../schemes/exact/evm/wire.js';

/** Why a payment header could not be read; each is a distinct machine code for the 402 `error`. */
export type PaymentHeaderFailure =
  | 'header_too_large'
  | 'invalid_base64'
  | 'invalid_json'
  | 'unsupported_x402_version'
  | 'invalid_payload';

export type DecodedPaymentHeader =
  | { ok: true; version: 1; payload: PaymentPayloadV1 }
  | { ok: true; version: 2; payload: PaymentPayloadV2 };

export type PaymentHeaderResult = DecodedPaymentHeader | { ok: false; reason: PaymentHeaderFailure; message: string };

const MESSAGES: Record<PaymentHeaderFailure, string> = {
  header_too_large: `payment header is longer than ${MAX_PAYMENT_HEADER_BYTES} characters`,
  invalid_base64: 'payment header is not base64',
  invalid_json: 'payment header is not base64 of UTF-8 JSON',
  unsupported_x402_version: 'payment header has an x402Version other than 1 or 2',
  invalid_payload: 'payment header does not match the x402 exact EVM payment payload',
};

/**
 * Decodes `X-Payment` (v1) or `PAYMENT-SIGNATURE` (v2). The version comes from the payload itself, so
 * either header may carry either version. Never throws.
 */
export function decodePaymentHeader(headerValue: string): PaymentHeaderResult {
  const decoded = decodeBase64Json(headerValue);
  if (!decoded.ok) return fail(decoded.reason);
  return decodePaymentPayload(decoded.value);
}

/** The same checks for a payment payload that arrives as JSON (the facilitator API's `paymentPayload`). */
export function decodePaymentPayload(value: unknown): PaymentHeaderResult {
  const version = typeof value === 'object' && value !== null ? (value as { x402Version?: unknown }).x402Version : undefined;
  if (version === 1) {
    const parsed = PaymentPayloadV1Schema.safeParse(value);
    return parsed.success ? { ok: true, version: 1, payload: parsed.data } : fail('invalid_payload');
  }
  if (version === 2) {
    const parsed = PaymentPayloadV2Schema.safeParse(value);
    return parsed.success ? { ok: true, version: 2, payload: parsed.data } : fail('invalid_payload');
  }
  return fail('unsupported_x402_version');
}

function fail(reason: PaymentHeaderFailure): PaymentHeaderResult {
  return { ok: false, reason, message: MESSAGES[reason] };
}
