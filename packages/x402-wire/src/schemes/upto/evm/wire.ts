import { z } from 'zod';
import { decodeBase64Json } from '../../../codec/base64-json.js';
import { EvmAddress, SignatureHex, TokenDomainExtraSchema, Uint256String } from '../../../evm.js';
import { Permit2TransferSchema } from '../../../permit2.js';
import { Caip2NetworkSchema, ResourceInfoSchema } from '../../../codec/v2.js';

/**
 * The x402 `upto` scheme on EVM (v2 only), field names from specs/schemes/upto/scheme_upto_evm.md and
 * @x402/evm 2.27: the buyer signs a Permit2 PermitWitnessTransferFrom for a maximum amount; the seller
 * settles the amount actually used, at most that maximum, possibly zero.
 *
 * `amount` in the requirements is phase-dependent between seller and facilitator: the maximum at verify
 * time, the amount to charge at settle time. The payload's `accepted.amount` is always the maximum.
 */

export const UptoRequirementsExtraSchema = TokenDomainExtraSchema.extend({
  /** The facilitator account that will send the settlement: the buyer binds it into the witness. */
  facilitatorAddress: EvmAddress.optional(),
}).loose();

export const UptoRequirementsV2Schema = z.object({
  scheme: z.literal('upto'),
  network: Caip2NetworkSchema,
  /** Atomic token units as a decimal string: the maximum (or, at settlement, the amount to charge). */
  amount: z.string().regex(/^\d{1,78}$/),
  asset: EvmAddress,
  payTo: EvmAddress,
  maxTimeoutSeconds: z.number().int().positive(),
  extra: UptoRequirementsExtraSchema,
});
export type UptoRequirementsV2 = z.infer<typeof UptoRequirementsV2Schema>;

export const UptoPermit2AuthorizationSchema = Permit2TransferSchema.extend({
  witness: z.object({ to: EvmAddress, facilitator: EvmAddress, validAfter: Uint256String }),
});
export type UptoPermit2Authorization = z.infer<typeof UptoPermit2AuthorizationSchema>;

export const UptoEvmPayloadSchema = z.object({
  signature: SignatureHex,
  permit2Authorization: UptoPermit2AuthorizationSchema,
});

export const UptoPaymentPayloadV2Schema = z.object({
  x402Version: z.literal(2),
  resource: ResourceInfoSchema.nullish(),
  accepted: UptoRequirementsV2Schema,
  payload: UptoEvmPayloadSchema,
  extensions: z.record(z.string(), z.unknown()).nullish(),
});
export type UptoPaymentPayloadV2 = z.infer<typeof UptoPaymentPayloadV2Schema>;

export type UptoDecoded = { ok: true; payload: UptoPaymentPayloadV2 } | { ok: false; reason: 'invalid_payload' | 'invalid_base64' | 'invalid_json' | 'header_too_large'; message: string };

/** Whether a payment payload (decoded JSON) says it is an `upto` one; then decodeUptoPayload reads it. */
export function isUptoPayload(value: unknown): boolean {
  const accepted = typeof value === 'object' && value !== null ? (value as { accepted?: { scheme?: unknown } }).accepted : undefined;
  return typeof accepted === 'object' && accepted !== null && accepted.scheme === 'upto';
}

export function decodeUptoPayload(value: unknown): UptoDecoded {
  const parsed = UptoPaymentPayloadV2Schema.safeParse(value);
  if (parsed.success) return { ok: true, payload: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, reason: 'invalid_payload', message: `the upto payment payload is malformed: ${issue?.path.join('.') || 'payload'} ${issue?.message ?? ''}`.trim() };
}

/** A `PAYMENT-SIGNATURE` header carrying an upto payload. */
export function decodeUptoPaymentHeader(header: string): UptoDecoded {
  const decoded = decodeBase64Json(header);
  if (!decoded.ok) return { ok: false, reason: decoded.reason, message: `payment header: ${decoded.reason}` };
  return decodeUptoPayload(decoded.value);
}

