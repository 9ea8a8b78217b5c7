import { z } from 'zod';
import type { Address, Hex } from 'viem';
import type { ChannelConfig, VoucherClaim } from '../../../chain/batch-settlement.js';

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
export type ChannelPayload = DepositPayload | VoucherPayload | RefundPayload | ClaimPayload | SettlePayload;

export const PAYLOAD_TYPES = ['deposit', 'voucher', 'refund', 'claim', 'settle'] as const;

const schemas = { deposit: depositPayloadSchema, voucher: voucherPayloadSchema, refund: refundPayloadSchema, claim: claimPayloadSchema, settle: settlePayloadSchema };

/** The payload read by its `type`, or what is wrong with it. */
export function decodeChannelPayload(raw: unknown): { ok: true; payload: ChannelPayload } | { ok: false; message: string } {
  const type = (raw as { type?: unknown } | null)?.type;
  if (typeof type !== 'string' || !(type in schemas)) return { ok: false, message: `payload.type must be one of ${PAYLOAD_TYPES.join(', ')}` };
  const parsed = schemas[type as keyof typeof schemas].safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, message: `payload.${issue?.path.join('.') || 'payload'}: ${issue?.message ?? 'is invalid'}` };
  }
  return { ok: true, payload: parsed.data as ChannelPayload };
}

/** Whether a payload looks like one of the scheme's (by its type and the fields that type carries). */
export function isChannelPayload(raw: unknown): boolean {
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

export type ChannelRequirements = z.output<typeof channelRequirementsSchema>;

export const toClaim = (c: z.output<typeof voucherClaim>): VoucherClaim => ({ voucher: { channel: c.voucher.channel as ChannelConfig, maxClaimableAmount: c.voucher.maxClaimableAmount }, signature: c.signature, totalClaimed: c.totalClaimed });

/** The scheme's reason codes (@x402/evm batch-settlement/errors). */
export const R = {
  scheme: 'invalid_batch_settlement_evm_scheme',
  networkMismatch: 'invalid_batch_settlement_evm_network_mismatch',
  payloadType: 'invalid_batch_settlement_evm_payload_type',
  channelNotFound: 'invalid_batch_settlement_evm_channel_not_found',
  tokenMismatch: 'invalid_batch_settlement_evm_token_mismatch',
  voucherSignature: 'invalid_batch_settlement_evm_voucher_signature',
  exceedsBalance: 'invalid_batch_settlement_evm_cumulative_exceeds_balance',
  belowClaimed: 'invalid_batch_settlement_evm_cumulative_below_claimed',
  insufficientBalance: 'invalid_batch_settlement_evm_insufficient_balance',
  depositFailed: 'invalid_batch_settlement_evm_deposit_transaction_failed',
  claimFailed: 'invalid_batch_settlement_evm_claim_transaction_failed',
  settleFailed: 'invalid_batch_settlement_evm_settle_transaction_failed',
  refundFailed: 'invalid_batch_settlement_evm_refund_transaction_failed',
  missingEip712Domain: 'invalid_batch_settlement_evm_missing_eip712_domain',
  validBefore: 'invalid_batch_settlement_evm_payload_authorization_valid_before',
  validAfter: 'invalid_batch_settlement_evm_payload_authorization_valid_after',
  receiveAuthorizationSignature: 'invalid_batch_settlement_evm_receive_authorization_signature',
  erc3009Required: 'invalid_batch_settlement_evm_erc3009_authorization_required',
  withdrawDelayOutOfRange: 'invalid_batch_settlement_evm_withdraw_delay_out_of_range',
  channelIdMismatch: 'invalid_batch_settlement_evm_channel_id_mismatch',
  receiverMismatch: 'invalid_batch_settlement_evm_receiver_mismatch',
  receiverAuthorizerMismatch: 'invalid_batch_settlement_evm_receiver_authorizer_mismatch',
  withdrawDelayMismatch: 'invalid_batch_settlement_evm_withdraw_delay_mismatch',
  authorizerAddressMismatch: 'invalid_batch_settlement_evm_authorizer_address_mismatch',
  authorizerNotConfigured: 'invalid_batch_settlement_evm_authorizer_not_configured',
  depositSimulation: 'invalid_batch_settlement_evm_deposit_simulation_failed',
  factoryNotAllowed: 'invalid_batch_settlement_evm_eip6492_factory_not_allowed',
  claimSimulation: 'invalid_batch_settlement_evm_claim_simulation_failed',
  settleSimulation: 'invalid_batch_settlement_evm_settle_simulation_failed',
  nothingToSettle: 'invalid_batch_settlement_evm_nothing_to_settle',
  refundSimulation: 'invalid_batch_settlement_evm_refund_simulation_failed',
  rpcReadFailed: 'invalid_batch_settlement_evm_rpc_read_failed',
  permit2Required: 'invalid_batch_settlement_evm_permit2_authorization_required',
  permit2Spender: 'invalid_batch_settlement_evm_permit2_invalid_spender',
  permit2Amount: 'invalid_batch_settlement_evm_permit2_amount_mismatch',
  permit2Deadline: 'invalid_batch_settlement_evm_permit2_deadline_expired',
  permit2Signature: 'invalid_batch_settlement_evm_permit2_invalid_signature',
  permit2Allowance: 'invalid_batch_settlement_evm_permit2_allowance_required',
  refundNoBalance: 'invalid_batch_settlement_evm_refund_no_balance',
  refundPayload: 'invalid_batch_settlement_evm_refund_payload',
  /** Ours: the channel pays someone other than the seller whose key called. */
  payee: 'invalid_payment_requirements',
  pending: 'settlement_pending',
} as const;
