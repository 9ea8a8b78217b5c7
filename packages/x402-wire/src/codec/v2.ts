import { z } from 'zod';
import { encodeBase64Json } from './base64-json.js';
import { EvmAddress, TokenDomainExtraSchema } from '../evm.js';

/**
 * x402 v2 wire shapes (field names from `@x402/core` 2.27 `schemas/index`): the `PAYMENT-REQUIRED`
 * header, the `PAYMENT-SIGNATURE` payload (which echoes the chosen requirement as `accepted`) and the
 * `PAYMENT-RESPONSE` settlement. Networks are CAIP-2 ids ("eip155:8453").
 */

export const X402_V2 = 2 as const;

export const Caip2NetworkSchema = z.string().regex(/^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/, 'expected a CAIP-2 id');

export const ResourceInfoSchema = z.object({
  url: z.string().min(1),
  description: z.string().nullish(),
  mimeType: z.string().nullish(),
});
export type ResourceInfo = z.infer<typeof ResourceInfoSchema>;

export const PaymentRequirementsV2Schema = z.object({
  scheme: z.literal('exact'),
  network: Caip2NetworkSchema,
  /** Atomic token units as a decimal string. */
  amount: z.string().regex(/^\d+$/),
  asset: EvmAddress,
  payTo: EvmAddress,
  maxTimeoutSeconds: z.number().int().positive(),
  // The official client refuses to sign without extra.name and extra.version (EIP-712 domain).
  extra: TokenDomainExtraSchema.loose(),
});
export type PaymentRequirementsV2 = z.infer<typeof PaymentRequirementsV2Schema>;

export const PaymentRequiredV2Schema = z.object({
  x402Version: z.literal(X402_V2),
  error: z.string().optional(),
  resource: ResourceInfoSchema,
  accepts: z.array(PaymentRequirementsV2Schema).min(1),
  extensions: z.record(z.string(), z.unknown()).nullish(),
});
export type PaymentRequiredV2 = z.infer<typeof PaymentRequiredV2Schema>;

export const SettlementResponseV2Schema = z.object({
  success: z.boolean(),
  transaction: z.string(),
  network: z.string(),
  payer: z.string().optional(),
  errorReason: z.string().optional(),
  /** upto: the atomic amount actually charged. */
  amount: z.string().optional(),
  /** Extension data, e.g. the offer-receipt extension's signed receipt. */
  extensions: z.record(z.string(), z.unknown()).optional(),
});
export type SettlementResponseV2 = z.infer<typeof SettlementResponseV2Schema>;

/** Value of the `PAYMENT-REQUIRED` response header. */
export function encodePaymentRequiredV2(required: PaymentRequiredV2): string {
  return encodeBase64Json(required);
}

/** Value of the `PAYMENT-RESPONSE` response header. */
export function encodePaymentResponseV2(response: SettlementResponseV2): string {
  return encodeBase64Json(response);
}
