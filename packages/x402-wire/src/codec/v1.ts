import { z } from 'zod';
import { encodeBase64Json } from './base64-json.js';
import { EvmAddress, TokenDomainExtraSchema } from '../evm.js';

/**
 * x402 v1 wire shapes (field names from `x402` 1.2.0 `types/verify/x402Specs`): the 402 body
 * `{x402Version: 1, error, accepts}`, the `X-Payment` payload and the `X-Payment-Response` settlement.
 */

export const X402_V1 = 1 as const;

export const PaymentRequirementsV1Schema = z.object({
  scheme: z.literal('exact'),
  /** v1 network name, e.g. "base", "base-sepolia". */
  network: z.string().min(1),
  /** Atomic token units as a decimal string. */
  maxAmountRequired: z.string().regex(/^\d+$/),
  resource: z.url(),
  description: z.string(),
  // The official v1 client's schema requires mimeType, so we always send one.
  mimeType: z.string(),
  outputSchema: z.record(z.string(), z.unknown()).optional(),
  payTo: EvmAddress,
  maxTimeoutSeconds: z.number().int().positive(),
  asset: EvmAddress,
  extra: TokenDomainExtraSchema,
});
export type PaymentRequirementsV1 = z.infer<typeof PaymentRequirementsV1Schema>;

export const PaymentRequiredV1Schema = z.object({
  x402Version: z.literal(X402_V1),
  error: z.string().optional(),
  accepts: z.array(PaymentRequirementsV1Schema).min(1),
});
export type PaymentRequiredV1 = z.infer<typeof PaymentRequiredV1Schema>;

export const SettlementResponseV1Schema = z.object({
  success: z.boolean(),
  transaction: z.string(),
  network: z.string(),
  payer: z.string(),
  errorReason: z.string().optional(),
  /** Extension data, e.g. the offer-receipt extension's signed receipt. */
  extensions: z.record(z.string(), z.unknown()).optional(),
});
export type SettlementResponseV1 = z.infer<typeof SettlementResponseV1Schema>;

/** Value of the `X-Payment-Response` response header. */
export function encodePaymentResponseV1(response: SettlementResponseV1): string {
  return encodeBase64Json(response);
}
