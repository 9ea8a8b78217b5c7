import { z } from 'zod';
import { decodeBase64Json } from '../../../codec/base64-json.js';
import { Bytes32Hex, EvmAddress, SignatureHex, Uint256String } from '../../../evm.js';
import { Permit2TransferSchema } from '../../../permit2.js';
import { X402_V1 } from '../../../codec/v1.js';
import { PaymentRequirementsV2Schema, ResourceInfoSchema, X402_V2 } from '../../../codec/v2.js';

/**
 * The "exact" scheme's EVM payload: an EIP-3009 TransferWithAuthorization and its EIP-712 signature.
 * It is the same object in x402 v1 and v2 (`payload` of the payment payload).
 */

export const ExactEvmAuthorizationSchema = z.object({
  from: EvmAddress,
  to: EvmAddress,
  value: Uint256String,
  validAfter: Uint256String,
  validBefore: Uint256String,
  nonce: Bytes32Hex,
});
export type ExactEvmAuthorization = z.infer<typeof ExactEvmAuthorizationSchema>;

export const ExactEvmPayloadSchema = z.object({
  signature: SignatureHex,
  authorization: ExactEvmAuthorizationSchema,
});
export type ExactEvmPayload = z.infer<typeof ExactEvmPayloadSchema>;

/** The exact payment payload as x402 v1 carries it (`X-Payment`). */
export const PaymentPayloadV1Schema = z.object({
  x402Version: z.literal(X402_V1),
  scheme: z.literal('exact'),
  network: z.string().min(1).max(64),
  payload: ExactEvmPayloadSchema,
});
export type PaymentPayloadV1 = z.infer<typeof PaymentPayloadV1Schema>;

/** The exact payment payload as x402 v2 carries it (`PAYMENT-SIGNATURE`), echoing the requirement it accepts. */
export const PaymentPayloadV2Schema = z.object({
  x402Version: z.literal(X402_V2),
  resource: ResourceInfoSchema.nullish(),
  accepted: PaymentRequirementsV2Schema,
  payload: ExactEvmPayloadSchema,
  extensions: z.record(z.string(), z.unknown()).nullish(),
});
export type PaymentPayloadV2 = z.infer<typeof PaymentPayloadV2Schema>;

/**
 * The x402 `exact` scheme on EVM through Permit2 (v2; requirements with `extra.assetTransferMethod:
 * "permit2"`), field names from specs/schemes/exact/scheme_exact_evm.md and @x402/evm 2.27: the buyer
 * signs a Permit2 PermitWitnessTransferFrom of the exact amount with the x402ExactPermit2Proxy as spender
 * and the witness Witness(address to,uint256 validAfter). Gas sponsoring extensions may ride along
 * (`eip2612GasSponsoring`, `erc20ApprovalGasSponsoring`) for a buyer that never approved Permit2.
 */

export const EXACT_PERMIT2 = 'permit2';

export const ExactPermit2AuthorizationSchema = Permit2TransferSchema.extend({
  witness: z.object({ to: EvmAddress, validAfter: Uint256String }),
});
export type ExactPermit2Authorization = z.infer<typeof ExactPermit2AuthorizationSchema>;

export const ExactPermit2PayloadSchema = z.object({
  signature: SignatureHex,
  permit2Authorization: ExactPermit2AuthorizationSchema,
});

export const ExactPermit2PaymentPayloadV2Schema = z.object({
  x402Version: z.literal(2),
  resource: ResourceInfoSchema.nullish(),
  accepted: PaymentRequirementsV2Schema,
  payload: ExactPermit2PayloadSchema,
  extensions: z.record(z.string(), z.unknown()).nullish(),
});
export type ExactPermit2PaymentPayloadV2 = z.infer<typeof ExactPermit2PaymentPayloadV2Schema>;

export type ExactPermit2Decoded = { ok: true; payload: ExactPermit2PaymentPayloadV2 } | { ok: false; reason: 'invalid_payload' | 'invalid_base64' | 'invalid_json' | 'header_too_large'; message: string };

/** Whether a payment payload (decoded JSON) is an exact one through Permit2 (as @x402/evm's isPermit2Payload reads it). */
export function isExactPermit2Payload(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const { accepted, payload } = value as { accepted?: { scheme?: unknown }; payload?: { permit2Authorization?: unknown } };
  return typeof accepted === 'object' && accepted !== null && accepted.scheme === 'exact'
    && typeof payload === 'object' && payload !== null && typeof payload.permit2Authorization === 'object' && payload.permit2Authorization !== null;
}

export function decodeExactPermit2Payload(value: unknown): ExactPermit2Decoded {
  const parsed = ExactPermit2PaymentPayloadV2Schema.safeParse(value);
  if (parsed.success) return { ok: true, payload: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, reason: 'invalid_payload', message: `the Permit2 exact payment payload is malformed: ${issue?.path.join('.') || 'payload'} ${issue?.message ?? ''}`.trim() };
}

/** A `PAYMENT-SIGNATURE` header carrying a Permit2 exact payload. */
export function decodeExactPermit2PaymentHeader(header: string): ExactPermit2Decoded {
  const decoded = decodeBase64Json(header);
  if (!decoded.ok) return { ok: false, reason: decoded.reason, message: `payment header: ${decoded.reason}` };
  return decodeExactPermit2Payload(decoded.value);
}

/** Whether a base64 payment header carries a Permit2 exact payload (without validating it). */
export function isExactPermit2PaymentHeader(header: string): boolean {
  const decoded = decodeBase64Json(header);
  return decoded.ok && isExactPermit2Payload(decoded.value);
}
