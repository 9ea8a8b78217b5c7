import { z } from 'zod';
import { SOLANA_ADDRESS } from '../../../svm-networks.js';

// The `exact` scheme's shapes on Solana (scheme_exact_svm.md), v2 and v1: the requirements a seller's 402
// names, with the fee payer that co-signs, and the payload: the buyer's partially signed transaction.

export const SvmAddressSchema = z.string().regex(SOLANA_ADDRESS, 'must be a base58 Solana address');

/** The seller's memo, if it asks for one, and who pays the fees. */
export const ExactSvmExtraSchema = z.object({
  feePayer: SvmAddressSchema,
  memo: z.string().max(256).optional(),
}).loose();

export const ExactSvmRequirementsV2Schema = z.object({
  scheme: z.literal('exact'),
  network: z.string().regex(/^solana:[1-9A-HJ-NP-Za-km-z]{32}$/, 'must be a Solana CAIP-2 id'),
  amount: z.string().regex(/^\d{1,30}$/),
  asset: SvmAddressSchema,
  payTo: SvmAddressSchema,
  maxTimeoutSeconds: z.number().int().positive(),
  extra: ExactSvmExtraSchema,
}).loose();
export type ExactSvmRequirementsV2 = z.infer<typeof ExactSvmRequirementsV2Schema>;

export const ExactSvmRequirementsV1Schema = z.object({
  scheme: z.literal('exact'),
  network: z.string().regex(/^solana(-devnet|-testnet)?$/, 'must be solana, solana-devnet or solana-testnet'),
  maxAmountRequired: z.string().regex(/^\d{1,30}$/),
  resource: z.string(),
  payTo: SvmAddressSchema,
  asset: SvmAddressSchema,
  maxTimeoutSeconds: z.number().int().positive(),
  extra: ExactSvmExtraSchema,
}).loose();

/** The buyer's transaction: base64 of the wire bytes, its fee payer's signature left empty. */
export const ExactSvmPayloadSchema = z.object({ transaction: z.string().min(1).max(2_000) });

export const ExactSvmPaymentPayloadV2Schema = z.object({
  x402Version: z.literal(2),
  accepted: ExactSvmRequirementsV2Schema,
  payload: ExactSvmPayloadSchema,
  resource: z.object({ url: z.string().optional() }).loose().optional(),
  extensions: z.record(z.string(), z.unknown()).nullish(),
}).loose();
export type ExactSvmPaymentPayloadV2 = z.infer<typeof ExactSvmPaymentPayloadV2Schema>;

export const ExactSvmPaymentPayloadV1Schema = z.object({
  x402Version: z.literal(1),
  scheme: z.literal('exact'),
  network: z.string(),
  payload: ExactSvmPayloadSchema,
}).loose();
