import { z } from 'zod';
import type { Address, Hex } from 'viem';
import type { ChannelConfig, VoucherClaim } from './chain.js';

// The x402 `batch-settlement` scheme's payloads on EVM as the facilitator API receives them, with the
// field names of the official SDK (@x402/evm 2.27, batch-settlement/types): what /verify takes (deposit,
// voucher, refund) and what /settle takes (deposit, claim, settle, and the refund the seller enriched with
// its claims and nonce). And the scheme's reason codes, as the SDK names them.

const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed address').transform((a) => a as Address);
const bytes32 = z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be 0x-prefixed 32 bytes').transform((h) => h as Hex);
const hex = z.string().regex(/^0x([0-9a-fA-F]{2})*$/, 'must be 0x-prefixed hex').transform((h) => h as Hex);
/** A token amount in atomic units, as a decimal string; uint128 in the contract. */
const amount = z.string().regex(/^\d{1,39}$/, 'must be a whole number of atomic units').transform(BigInt).refine((n) => n < 2n ** 128n, 'must fit in uint128');
const uint = z.union([z.string().regex(/^\d{1,78}$/), z.number().int().nonnegative()]).transform((v) => BigInt(v));

export const channelConfigSchema = z.object({
  payer: address,
  payerAuthorizer: address,
  receiver: address,
  receiverAuthorizer: address,
  token: address,
  withdrawDelay: z.number().int().nonnegative().max(2 ** 40 - 1),
  salt: bytes32,
});

const voucherFields = z.object({ channelId: bytes32, maxClaimableAmount: amount, signature: hex });

const erc3009Authorization = z.object({ validAfter: uint, validBefore: uint, salt: bytes32, signature: hex });
const permit2Authorization = z.object({
  from: address,
  permitted: z.object({ token: address, amount: uint }),
  spender: address,
  nonce: uint,
  deadline: uint,
  witness: z.object({ channelId: bytes32 }),
  signature: hex,
});

export const depositPayloadSchema = z.object({
  type: z.literal('deposit'),
  channelConfig: channelConfigSchema,
  voucher: voucherFields,
  deposit: z.object({
    amount,
    authorization: z.object({ erc3009Authorization: erc3009Authorization.optional(), permit2Authorization: permit2Authorization.optional() }),
  }),
});

export const voucherPayloadSchema = z.object({ type: z.literal('voucher'), channelConfig: channelConfigSchema, voucher: voucherFields });

const voucherClaim = z.object({
  voucher: z.object({ channel: channelConfigSchema, maxClaimableAmount: amount }),
  signature: hex,
  totalClaimed: amount,
});

export const refundPayloadSchema = z.object({
  type: z.literal('refund'),
  channelConfig: channelConfigSchema,
  voucher: voucherFields,
  amount: amount.optional(),
  // What the seller adds before /settle (the SDK's enriched refund).
  refundNonce: uint.optional(),
  claims: z.array(voucherClaim).max(1_000).optional(),
  refundAuthorizerSignature: hex.optional(),
  claimAuthorizerSignature: hex.optional(),
});

export const claimPayloadSchema = z.object({
  type: z.literal('claim'),
  claims: z.array(voucherClaim).min(1).max(1_000),
  claimAuthorizerSignature: hex.optional(),
});

export const settlePayloadSchema = z.object({ type: z.literal('settle'), receiver: address, token: address });

export type DepositPayload = z.output<typeof depositPayloadSchema>;
export type VoucherPayload = z.output<typeof voucherPayloadSchema>;
export type RefundPayload = z.output<typeof refundPayloadSchema>;
export type ClaimPayload = z.output<typeof claimPayloadSchema>;
export type SettlePayload = z.output<typeof settlePayloadSchema>;
export type BatchSettlementPayload = DepositPayload | VoucherPayload | RefundPayload | ClaimPayload | SettlePayload;

export const PAYLOAD_TYPES = ['deposit', 'voucher', 'refund', 'claim', 'settle'] as const;

const schemas = { deposit: depositPayloadSchema, voucher: voucherPayloadSchema, refund: refundPayloadSchema, claim: claimPayloadSchema, settle: settlePayloadSchema };

/** The payload read by its `type`, or what is wrong with it. */
export function decodeBatchSettlementPayload(raw: unknown): { ok: true; payload: BatchSettlementPayload } | { ok: false; message: string } {
  const type = (raw as { type?: unknown } | null)?.type;
  if (typeof type !== 'string' || !(type in schemas)) return { ok: false, message: `payload.type must be one of ${PAYLOAD_TYPES.join(', ')}` };
  const parsed = schemas[type as keyof typeof schemas].safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, message: `payload.${issue?.path.join('.') || 'payload'}: ${issue?.message ?? 'is invalid'}` };
  }
  return { ok: true, payload: parsed.data as BatchSettlementPayload };
}

/** Whether a payload looks like one of the scheme's (by its type and the fields that type carries). */
export function isBatchSettlementPayload(raw: unknown): boolean {
  if (typeof raw !== 'object' || raw === null) return false;
  const p = raw as Record<string, unknown>;
  switch (p.type) {
    case 'deposit': case 'voucher': case 'refund': return 'channelConfig' in p && 'voucher' in p;
    case 'claim': return 'claims' in p;
    case 'settle': return 'receiver' in p && 'token' in p;
    default: return false;
  }
}

/** The requirements a batch-settlement request names (x402 v2), as far as the facilitator reads them. */
export const channelRequirementsSchema = z.object({
  scheme: z.literal('batch-settlement'),
  network: z.string().min(1),
  asset: address,
  amount: z.string().regex(/^\d{1,39}$/).optional(),
  payTo: address.optional(),
  maxTimeoutSeconds: z.number().int().optional(),
  extra: z.object({
    receiverAuthorizer: address.optional(),
    withdrawDelay: z.union([z.number(), z.string()]).optional(),
    name: z.string().optional(),
    version: z.string().optional(),
    assetTransferMethod: z.enum(['eip3009', 'permit2']).optional(),
  }).passthrough().optional(),
}).passthrough();

export type BatchSettlementRequirements = z.output<typeof channelRequirementsSchema>;

export const toClaim = (c: z.output<typeof voucherClaim>): VoucherClaim => ({ voucher: { channel: c.voucher.channel as ChannelConfig, maxClaimableAmount: c.voucher.maxClaimableAmount }, signature: c.signature, totalClaimed: c.totalClaimed });
