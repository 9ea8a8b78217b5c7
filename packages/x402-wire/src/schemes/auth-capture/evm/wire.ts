import { z } from 'zod';
import { decodeBase64Json } from '../../../codec/base64-json.js';
import { Bytes32Hex, EvmAddress, SignatureHex, TokenDomainExtraSchema, Uint256String } from '../../../evm.js';
import { ExactEvmAuthorizationSchema } from '../../exact/evm/wire.js';
import { Permit2TransferSchema } from '../../../permit2.js';
import { Caip2NetworkSchema, ResourceInfoSchema } from '../../../codec/v2.js';

/**
 * The x402 `auth-capture` scheme on EVM (v2 only), field names from specs/schemes/auth-capture/
 * (scheme_auth_capture_evm.md) and @x402/evm 2.27's `auth-capture/client`: the buyer signs one token
 * authorization (ERC-3009 ReceiveWithAuthorization to the escrow's collector, or a Permit2
 * PermitTransferFrom) for `amount`, whose nonce is the payer-agnostic hash of the escrow payment it funds;
 * the payment's terms (operator, deadlines, fees) are in `extra`. See middleware/PROTOCOL.md.
 */

export const AUTH_CAPTURE = 'auth-capture' as const;

/** uint48 / uint16 as JSON numbers, as the official client requires them. */
const Uint48 = z.number().int().min(0).max(2 ** 48 - 1);
const Bps = z.number().int().min(0).max(10_000);

export const AuthCaptureExtraSchema = TokenDomainExtraSchema.extend({
  /** Absent: the v1.1 deployment. */
  authCaptureEscrow: EvmAddress.optional(),
  captureAuthorizer: EvmAddress,
  captureDeadline: Uint48,
  refundDeadline: Uint48,
  feeRecipient: EvmAddress,
  minFeeBps: Bps,
  maxFeeBps: Bps,
  assetTransferMethod: z.enum(['eip3009', 'permit2']).optional(),
  paymentFlow: z.string().optional(),
  operatorType: z.string().optional(),
  captureMode: z.string().optional(),
  receiverAuthorizer: EvmAddress.optional(),
  policy: EvmAddress.optional(),
}).loose();
export type AuthCaptureExtra = z.infer<typeof AuthCaptureExtraSchema>;

export const AuthCaptureRequirementsSchema = z.object({
  scheme: z.literal(AUTH_CAPTURE),
  network: Caip2NetworkSchema,
  amount: z.string().regex(/^\d{1,36}$/),
  asset: EvmAddress,
  payTo: EvmAddress,
  maxTimeoutSeconds: z.number().int().positive(),
  extra: AuthCaptureExtraSchema,
}).loose();
export type AuthCaptureRequirements = z.infer<typeof AuthCaptureRequirementsSchema>;

/** Collected by the escrow's Permit2 collector: a plain transfer (no witness), its nonce a decimal uint256. */
const Permit2Authorization = Permit2TransferSchema.extend({ nonce: Uint256String });

/** The collect payload: exactly one of the two shapes, `salt` always, `saltNonce` only when bound. */
export const AuthCaptureEip3009PayloadSchema = z.object({ authorization: ExactEvmAuthorizationSchema, signature: SignatureHex, salt: Bytes32Hex, saltNonce: Bytes32Hex.optional() }).strict();
export const AuthCapturePermit2PayloadSchema = z.object({ permit2Authorization: Permit2Authorization, signature: SignatureHex, salt: Bytes32Hex, saltNonce: Bytes32Hex.optional() }).strict();
export const AuthCaptureCollectPayloadSchema = z.union([AuthCaptureEip3009PayloadSchema, AuthCapturePermit2PayloadSchema]);
export type AuthCaptureCollectPayload = z.infer<typeof AuthCaptureCollectPayloadSchema>;

export const AuthCapturePaymentPayloadSchema = z.object({
  x402Version: z.literal(2),
  resource: ResourceInfoSchema.nullish(),
  accepted: AuthCaptureRequirementsSchema,
  payload: z.record(z.string(), z.unknown()),
  extensions: z.record(z.string(), z.unknown()).nullish(),
});
export type AuthCapturePaymentPayload = Omit<z.infer<typeof AuthCapturePaymentPayloadSchema>, 'payload'> & { payload: AuthCaptureCollectPayload };

export type AuthCaptureDecoded =
  | { ok: true; payload: AuthCapturePaymentPayload }
  | { ok: false; reason: 'invalid_payload' | 'invalid_payload_format' | 'invalid_base64' | 'invalid_json' | 'header_too_large'; message: string };

/** Whether a decoded payment payload says it is an auth-capture one (then decodeAuthCapturePayload reads it). */
export function isAuthCapturePayload(value: unknown): boolean {
  const accepted = typeof value === 'object' && value !== null ? (value as { accepted?: { scheme?: unknown } }).accepted : undefined;
  return typeof accepted === 'object' && accepted !== null && accepted.scheme === AUTH_CAPTURE;
}

const firstIssue = (error: z.ZodError) => `${error.issues[0]?.path.join('.') || 'payload'} ${error.issues[0]?.message ?? ''}`.trim();

export function decodeAuthCapturePayload(value: unknown): AuthCaptureDecoded {
  const parsed = AuthCapturePaymentPayloadSchema.safeParse(value);
  if (!parsed.success) return { ok: false, reason: 'invalid_payload', message: `the auth-capture payment payload is malformed: ${firstIssue(parsed.error)}` };
  // The shape guard (the spec's first check) has its own reason.
  const collect = AuthCaptureCollectPayloadSchema.safeParse(parsed.data.payload);
  if (!collect.success) return { ok: false, reason: 'invalid_payload_format', message: 'the payload is neither the ERC-3009 nor the Permit2 auth-capture shape (authorization or permit2Authorization, signature, salt)' };
  return { ok: true, payload: { ...parsed.data, payload: collect.data } };
}

export function decodeAuthCapturePaymentHeader(header: string): AuthCaptureDecoded {
  const decoded = decodeBase64Json(header);
  if (!decoded.ok) return { ok: false, reason: decoded.reason, message: `payment header: ${decoded.reason}` };
  return decodeAuthCapturePayload(decoded.value);
}

/** The payer and the signature's expiry (the escrow's preApprovalExpiry) of a collect payload. */
export function collectTerms(payload: AuthCaptureCollectPayload): { from: string; expiry: bigint; amount: bigint; nonce: bigint; method: 'eip3009' | 'permit2' } {
  if ('permit2Authorization' in payload) {
    const p = payload.permit2Authorization;
    return { from: p.from, expiry: BigInt(p.deadline), amount: BigInt(p.permitted.amount), nonce: BigInt(p.nonce), method: 'permit2' };
  }
  const a = payload.authorization;
  return { from: a.from, expiry: BigInt(a.validBefore), amount: BigInt(a.value), nonce: BigInt(a.nonce), method: 'eip3009' };
}
