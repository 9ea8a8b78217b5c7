/**
 * The x402 `batch-settlement` scheme's on-chain surface: the x402BatchSettlement contract (payment channels)
 * and its two deposit collectors, at the addresses they have on every EVM network (the dev chain gets our own
 * implementation at the same addresses, contracts/X402BatchSettlement.sol, placed by
 * server/dev/chain/channel-contracts.ts). Addresses, the EIP-712 domain and types, the channel id, and the ABI.
 *
 * Facts from the x402 specification (specs/schemes/batch-settlement/scheme_batch_settlement_evm.md) and
 * @x402/evm 2.27 (its batch-settlement constants and ABI):
 * - a channel is the EIP-712 hash of its ChannelConfig under the domain ("x402 Batch Settlement", "1",
 *   chain id, the contract's address);
 * - the payer signs cumulative vouchers Voucher(channelId, maxClaimableAmount);
 * - the receiver authorizer signs ClaimBatch(ClaimEntry[]) for `claimWithSignature` and
 *   Refund(channelId, nonce, amount) for `refundWithSignature`;
 * - deposits: ERC-3009 ReceiveWithAuthorization to the EIP-3009 collector with nonce
 *   keccak256(abi.encode(channelId, salt)), or a Permit2 PermitWitnessTransferFrom with the Permit2 collector as
 *   spender and the witness DepositWitness(bytes32 channelId).
 */
import { permit2WitnessTypes } from 'agentgate-x402-wire';
import { concat, decodeErrorResult, domainSeparator, encodeAbiParameters, encodeFunctionData, getAddress, hashTypedData, keccak256, numberToHex, pad, parseAbi, toHex, type Address, type Hex, type PublicClient, type TypedDataDomain } from 'viem';
import { permit2Domain } from '../../../../chain/permit2.js';
import type { RequiredContract } from '../../../../chain/contract-code.js';

export const BATCH_SETTLEMENT_ADDRESS: Address = '0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003';
export const ERC3009_DEPOSIT_COLLECTOR_ADDRESS: Address = '0x4020806089470a89826cB9fB1f4059150b550004';
export const PERMIT2_DEPOSIT_COLLECTOR_ADDRESS: Address = '0x4020425FAf3B746C082C2f942b4E5159887B0005';

/** Bounds of ChannelConfig.withdrawDelay, in seconds (15 minutes – 30 days), as the contract enforces them. */
export const MIN_WITHDRAW_DELAY = 15 * 60;
export const MAX_WITHDRAW_DELAY = 30 * 24 * 60 * 60;

/** The immutable parameters of a channel; their EIP-712 hash is the channel id. */
export interface ChannelConfig {
  payer: Address;
  /** EOA that signs vouchers; the zero address: the payer signs (ECDSA, or ERC-1271 for a contract wallet). */
  payerAuthorizer: Address;
  receiver: Address;
  /** Signs claim batches and refunds. Never zero. */
  receiverAuthorizer: Address;
  token: Address;
  withdrawDelay: number;
  salt: Hex;
}

export const batchSettlementDomain = (chainId: number): TypedDataDomain => ({
  name: 'x402 Batch Settlement',
  version: '1',
  chainId,
  verifyingContract: BATCH_SETTLEMENT_ADDRESS,
});

export const channelConfigTypes = {
  ChannelConfig: [
    { name: 'payer', type: 'address' },
    { name: 'payerAuthorizer', type: 'address' },
    { name: 'receiver', type: 'address' },
    { name: 'receiverAuthorizer', type: 'address' },
    { name: 'token', type: 'address' },
    { name: 'withdrawDelay', type: 'uint40' },
    { name: 'salt', type: 'bytes32' },
  ],
} as const;

export const voucherTypes = {
  Voucher: [
    { name: 'channelId', type: 'bytes32' },
    { name: 'maxClaimableAmount', type: 'uint128' },
  ],
} as const;

export const refundTypes = {
  Refund: [
    { name: 'channelId', type: 'bytes32' },
    { name: 'nonce', type: 'uint256' },
    { name: 'amount', type: 'uint128' },
  ],
} as const;

export const claimBatchTypes = {
  ClaimBatch: [{ name: 'claims', type: 'ClaimEntry[]' }],
  ClaimEntry: [
    { name: 'channelId', type: 'bytes32' },
    { name: 'maxClaimableAmount', type: 'uint128' },
    { name: 'totalClaimed', type: 'uint128' },
  ],
} as const;

/** The channel id of `config` on chain `chainId` (what the contract's `getChannelId` returns). */
export function channelIdOf(config: ChannelConfig, chainId: number): Hex {
  // Every paid call checks its channel's id against its config: the same few configs, hashed once each.
  const key = `${chainId}|${config.payer}|${config.payerAuthorizer}|${config.receiver}|${config.receiverAuthorizer}|${config.token}|${config.withdrawDelay}|${config.salt}`;
  let id = channelIds.get(key);
  if (id === undefined) {
    id = hashTypedData({ domain: batchSettlementDomain(chainId), types: channelConfigTypes, primaryType: 'ChannelConfig', message: config });
    if (channelIds.size >= CHANNEL_IDS_KEPT) channelIds.delete(channelIds.keys().next().value!);
    channelIds.set(key, id);
  }
  return id;
}
const channelIds = new Map<string, Hex>();
const CHANNEL_IDS_KEPT = 100_000;

/**
 * The EIP-712 digest a Voucher's signature signs: what hashTypedData(voucherTypedData(...)) gives, with the
 * domain separator computed once per chain (every paid call recovers a voucher's signer from it).
 */
export function voucherDigest(channelId: Hex, maxClaimableAmount: bigint, chainId: number): Hex {
  let separator = voucherDomains.get(chainId);
  if (separator === undefined) {
    separator = domainSeparator({ domain: batchSettlementDomain(chainId) });
    voucherDomains.set(chainId, separator);
  }
  const struct = keccak256(concat([VOUCHER_TYPEHASH, pad(channelId, { size: 32 }), numberToHex(maxClaimableAmount, { size: 32 })]));
  return keccak256(concat(['0x1901', separator, struct]));
}
const voucherDomains = new Map<number, Hex>();
const VOUCHER_TYPEHASH = keccak256(toHex('Voucher(bytes32 channelId,uint128 maxClaimableAmount)'));

/** The ERC-3009 nonce a deposit authorization must carry: keccak256(abi.encode(channelId, salt)). */
export function erc3009DepositNonce(channelId: Hex, salt: bigint): Hex {
  return keccak256(encodeAbiParameters([{ type: 'bytes32' }, { type: 'uint256' }], [channelId, salt]));
}

const STRUCTS = [
  'struct ChannelConfig { address payer; address payerAuthorizer; address receiver; address receiverAuthorizer; address token; uint40 withdrawDelay; bytes32 salt; }',
  'struct Voucher { ChannelConfig channel; uint128 maxClaimableAmount; }',
  'struct VoucherClaim { Voucher voucher; bytes signature; uint128 totalClaimed; }',
] as const;

/** x402BatchSettlement: every function, event and error (what contracts/X402BatchSettlement.sol compiles to). */
export const batchSettlementAbi = parseAbi([
  ...STRUCTS,
  'function deposit(ChannelConfig config, uint128 amount, address collector, bytes collectorData)',
  'function claim(VoucherClaim[] voucherClaims)',
  'function claimWithSignature(VoucherClaim[] voucherClaims, bytes authorizerSignature)',
  'function settle(address receiver, address token)',
  'function initiateWithdraw(ChannelConfig config, uint128 amount)',
  'function finalizeWithdraw(ChannelConfig config)',
  'function refund(ChannelConfig config, uint128 amount)',
  'function refundWithSignature(ChannelConfig config, uint128 amount, uint256 nonce, bytes receiverAuthorizerSignature)',
  'function multicall(bytes[] data) returns (bytes[] results)',
  'function channels(bytes32 channelId) view returns (uint128 balance, uint128 totalClaimed)',
  'function pendingWithdrawals(bytes32 channelId) view returns (uint128 amount, uint40 initiatedAt)',
  'function refundNonce(bytes32 channelId) view returns (uint256)',
  'function receivers(address receiver, address token) view returns (uint128 totalClaimed, uint128 totalSettled)',
  'function getChannelId(ChannelConfig config) view returns (bytes32)',
  'function getVoucherDigest(bytes32 channelId, uint128 maxClaimableAmount) view returns (bytes32)',
  'function getRefundDigest(bytes32 channelId, uint256 nonce, uint128 amount) view returns (bytes32)',
  'function getClaimBatchDigest(VoucherClaim[] voucherClaims) view returns (bytes32)',
  'function eip712Domain() view returns (bytes1 fields, string name, string version, uint256 chainId, address verifyingContract, bytes32 salt, uint256[] extensions)',
  'function MIN_WITHDRAW_DELAY() view returns (uint40)',
  'function MAX_WITHDRAW_DELAY() view returns (uint40)',
  'function CHANNEL_CONFIG_TYPEHASH() view returns (bytes32)',
  'function VOUCHER_TYPEHASH() view returns (bytes32)',
  'function REFUND_TYPEHASH() view returns (bytes32)',
  'function CLAIM_ENTRY_TYPEHASH() view returns (bytes32)',
  'function CLAIM_BATCH_TYPEHASH() view returns (bytes32)',
  'event ChannelCreated(bytes32 indexed channelId, ChannelConfig config)',
  'event ChannelClosed(bytes32 indexed channelId, ChannelConfig config)',
  'event Deposited(bytes32 indexed channelId, address indexed sender, uint128 amount, uint128 newBalance)',
  'event Claimed(bytes32 indexed channelId, address indexed sender, uint128 claimAmount, uint128 newTotalClaimed)',
  'event Settled(address indexed receiver, address indexed token, address indexed sender, uint128 amount)',
  'event Refunded(bytes32 indexed channelId, address indexed sender, uint128 amount)',
  'event WithdrawInitiated(bytes32 indexed channelId, uint128 amount, uint40 finalizeAfter)',
  'event WithdrawFinalized(bytes32 indexed channelId, address indexed sender, uint128 amount)',
  'event EIP712DomainChanged()',
  'error InvalidChannel()',
  'error ZeroDeposit()',
  'error DepositOverflow()',
  'error InvalidSignature()',
  'error NotReceiverAuthorizer()',
  'error NotAuthorizedToClaim()',
  'error NotAuthorizedToRefund()',
  'error ClaimExceedsCeiling()',
  'error ClaimExceedsBalance()',
  'error WithdrawalAlreadyPending()',
  'error WithdrawalNotPending()',
  'error NotAuthorizedToFinalizeWithdraw()',
  'error WithdrawDelayNotElapsed()',
  'error NothingToWithdraw()',
  'error WithdrawAmountExceedsAvailable()',
  'error WithdrawDelayOutOfRange()',
  'error EmptyBatch()',
  'error DepositCollectionFailed()',
  'error InvalidCollector()',
  'error InvalidRefundNonce()',
  'error ZeroRefund()',
  'error ReentrancyGuardReentrantCall()',
  'error SafeERC20FailedOperation(address token)',
  'error ECDSAInvalidSignature()',
  'error ECDSAInvalidSignatureLength(uint256 length)',
  'error ECDSAInvalidSignatureS(bytes32 s)',
  'error FailedCall()',
]);

/** The deposit collectors (both kinds; `PERMIT2` and the EIP-2612 events exist on the Permit2 one only). */
export const depositCollectorAbi = parseAbi([
  'function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes collectorData)',
  'function x402BatchSettlement() view returns (address)',
  'function PERMIT2() view returns (address)',
  'function DEPOSIT_WITNESS_TYPE_STRING() view returns (string)',
  'function DEPOSIT_WITNESS_TYPEHASH() view returns (bytes32)',
  'event EIP2612PermitFailedWithReason(address indexed token, address indexed owner, string reason)',
  'event EIP2612PermitFailedWithPanic(address indexed token, address indexed owner, uint256 errorCode)',
  'event EIP2612PermitFailedWithData(address indexed token, address indexed owner, bytes data)',
  'error OnlyX402BatchSettlement()',
  'error InvalidX402BatchSettlementAddress()',
  'error InvalidPermit2Address()',
  'error Permit2612AmountMismatch()',
  'error SafeERC20FailedOperation(address token)',
]);

// --- what the facilitator sends and reads ----------------------------------------------------------------

/** ChannelConfig as the contract takes it (checksummed addresses). */
export function contractChannelConfig(config: ChannelConfig): ChannelConfig {
  return {
    payer: getAddress(config.payer), payerAuthorizer: getAddress(config.payerAuthorizer), receiver: getAddress(config.receiver),
    receiverAuthorizer: getAddress(config.receiverAuthorizer), token: getAddress(config.token), withdrawDelay: Number(config.withdrawDelay), salt: config.salt,
  };
}

/** A channel as the contract keeps it: its balance, what was claimed of it, a withdrawal's start (0: none) and the next refund nonce. */
export interface ChannelState { balance: bigint; totalClaimed: bigint; withdrawRequestedAt: number; refundNonce: bigint }

/** Reads a channel's state in one round trip (Multicall3). */
export async function readChannelState(client: PublicClient, channelId: Hex): Promise<ChannelState> {
  return (await readChannelStates(client, [channelId]))[0]!;
}

/** Reads many channels' states in one Multicall3 call (viem splits a long list into a few calls, sent together). */
export async function readChannelStates(client: PublicClient, channelIds: readonly Hex[]): Promise<ChannelState[]> {
  if (channelIds.length === 0) return [];
  const results = await client.multicall({
    allowFailure: false,
    contracts: channelIds.flatMap((channelId) => [
      { address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'channels', args: [channelId] },
      { address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'pendingWithdrawals', args: [channelId] },
      { address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'refundNonce', args: [channelId] },
    ] as const),
  });
  return channelIds.map((_, i) => {
    const [channel, withdrawal, nonce] = results.slice(3 * i, 3 * i + 3) as [readonly [bigint, bigint], readonly [bigint, number], bigint];
    return { balance: channel[0], totalClaimed: channel[1], withdrawRequestedAt: Number(withdrawal[1]), refundNonce: nonce };
  });
}

/** The channel snapshot every batch-settlement answer carries (amounts as decimal strings). */
export function channelSnapshot(channelId: Hex, state: ChannelState) {
  return { channelId, balance: state.balance.toString(), totalClaimed: state.totalClaimed.toString(), withdrawRequestedAt: state.withdrawRequestedAt, refundNonce: state.refundNonce.toString() };
}

/** The EIP-3009 collector's data: abi.encode(validAfter, validBefore, salt, signature). */
export function erc3009CollectorData(validAfter: bigint, validBefore: bigint, salt: bigint, signature: Hex): Hex {
  return encodeAbiParameters([{ type: 'uint256' }, { type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }], [validAfter, validBefore, salt, signature]);
}

/** The Permit2 collector's data: abi.encode(nonce, deadline, signature, eip2612PermitData). */
export function permit2CollectorData(nonce: bigint, deadline: bigint, signature: Hex, eip2612PermitData: Hex = '0x'): Hex {
  return encodeAbiParameters([{ type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }, { type: 'bytes' }], [nonce, deadline, signature, eip2612PermitData]);
}

/** The Permit2 witness transfer a Permit2 deposit signs (the spender is the Permit2 collector). */
export const depositPermit2Types = permit2WitnessTypes('DepositWitness', [{ name: 'channelId', type: 'bytes32' }]);

/** A Permit2 deposit's `permit2Authorization` (without its signature), with numbers as bigints. */
export interface ChannelDepositPermit {
  from: Address;
  token: Address;
  /** The deposit: always the whole permitted amount. */
  amount: bigint;
  /** The Permit2 deposit collector (the only spender a facilitator accepts). */
  spender: Address;
  nonce: bigint;
  deadline: bigint;
  channelId: Hex;
}

/** What the payer signs for a Permit2 deposit: PermitWitnessTransferFrom under Permit2's domain, the witness naming the channel. */
export function depositPermit2TypedData(permit: ChannelDepositPermit, chainId: number) {
  return {
    domain: permit2Domain(chainId), types: depositPermit2Types, primaryType: 'PermitWitnessTransferFrom' as const,
    message: { permitted: { token: permit.token, amount: permit.amount }, spender: permit.spender, nonce: permit.nonce, deadline: permit.deadline, witness: { channelId: permit.channelId } },
  };
}

/** One row of claimWithSignature: a payer's voucher and the total to claim of it (at most its maximum). */
export interface VoucherClaim { voucher: { channel: ChannelConfig; maxClaimableAmount: bigint }; signature: Hex; totalClaimed: bigint }

/** The ClaimBatch the receiver authorizer signs for these rows. */
export function claimBatchTypedData(claims: readonly VoucherClaim[], chainId: number) {
  return {
    domain: batchSettlementDomain(chainId), types: claimBatchTypes, primaryType: 'ClaimBatch' as const,
    message: { claims: claims.map((c) => ({ channelId: channelIdOf(c.voucher.channel, chainId), maxClaimableAmount: c.voucher.maxClaimableAmount, totalClaimed: c.totalClaimed })) },
  };
}

/** The Refund the receiver authorizer signs. */
export function refundTypedData(channelId: Hex, nonce: bigint, amount: bigint, chainId: number) {
  return { domain: batchSettlementDomain(chainId), types: refundTypes, primaryType: 'Refund' as const, message: { channelId, nonce, amount } };
}

/** The Voucher a payer (or its authorizer) signs. */
export function voucherTypedData(channelId: Hex, maxClaimableAmount: bigint, chainId: number) {
  return { domain: batchSettlementDomain(chainId), types: voucherTypes, primaryType: 'Voucher' as const, message: { channelId, maxClaimableAmount } };
}

const claimArgs = (claims: readonly VoucherClaim[]) => claims.map((c) => ({
  voucher: { channel: contractChannelConfig(c.voucher.channel), maxClaimableAmount: c.voucher.maxClaimableAmount }, signature: c.signature, totalClaimed: c.totalClaimed,
}));

export const depositCalldata = (config: ChannelConfig, amount: bigint, collector: Address, collectorData: Hex): Hex =>
  encodeFunctionData({ abi: batchSettlementAbi, functionName: 'deposit', args: [contractChannelConfig(config), amount, collector, collectorData] });

export const claimWithSignatureCalldata = (claims: readonly VoucherClaim[], authorizerSignature: Hex): Hex =>
  encodeFunctionData({ abi: batchSettlementAbi, functionName: 'claimWithSignature', args: [claimArgs(claims), authorizerSignature] });

export const settleCalldata = (receiver: Address, token: Address): Hex =>
  encodeFunctionData({ abi: batchSettlementAbi, functionName: 'settle', args: [getAddress(receiver), getAddress(token)] });

export const refundWithSignatureCalldata = (config: ChannelConfig, amount: bigint, nonce: bigint, signature: Hex): Hex =>
  encodeFunctionData({ abi: batchSettlementAbi, functionName: 'refundWithSignature', args: [contractChannelConfig(config), amount, nonce, signature] });

/** A refund with the claims it needs first, in one transaction (the contract's multicall), or the refund alone. */
export const refundCalldata = (refund: Hex, claim?: Hex): Hex =>
  (claim ? encodeFunctionData({ abi: batchSettlementAbi, functionName: 'multicall', args: [[claim, refund]] }) : refund);

/** What x402BatchSettlement's call would revert with, run against the latest block (undefined: it would succeed). */
export async function simulateBatchSettlement(client: PublicClient, data: Hex, from?: Address): Promise<string | undefined> {
  try {
    await client.call({ to: BATCH_SETTLEMENT_ADDRESS, data, ...(from ? { account: from } : {}) });
    return undefined;
  } catch (err) {
    return revertName(err);
  }
}

/** The contract error a failed call names (`ClaimExceedsBalance`), else viem's short message. */
export function revertName(err: unknown): string {
  const data = findRevertData(err);
  if (data) {
    try { return decodeErrorResult({ abi: batchSettlementAbi, data }).errorName; } catch { /* not one of ours */ }
    try { return decodeErrorResult({ abi: depositCollectorAbi, data }).errorName; } catch { /* nor the collectors' */ }
  }
  return (err as { shortMessage?: string }).shortMessage ?? (err as Error).message ?? String(err);
}

function findRevertData(err: unknown): Hex | undefined {
  let cursor = err as { data?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; cursor && depth < 8; depth++) {
    const data = (cursor.data as { data?: unknown } | undefined)?.data ?? cursor.data;
    if (typeof data === 'string' && data.startsWith('0x') && data.length >= 10) return data as Hex;
    cursor = cursor.cause as typeof cursor;
  }
  return undefined;
}

/** What a channel is opened, deposited into, claimed and settled through. */
export const BATCH_SETTLEMENT_CONTRACTS: readonly RequiredContract[] = [
  { name: 'X402BatchSettlement', address: BATCH_SETTLEMENT_ADDRESS },
  { name: 'ERC3009DepositCollector', address: ERC3009_DEPOSIT_COLLECTOR_ADDRESS },
];
