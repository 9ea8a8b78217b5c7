/**
 * Test support for the batch-settlement contracts (contracts/X402BatchSettlement.sol and its collectors) as
 * the dev chain has them: a private anvil node per test file (test/chain/dev-chain.ts, placed by the same code
 * as `agentgate dev`), the official @x402/evm batch-settlement client to sign deposits and vouchers, and the
 * official facilitator to verify and to send deposits, claims, settlements and refunds.
 */
import { CHANNEL_WITHDRAW_DELAY } from 'agentgate-x402-wire';
import { BatchSettlementEvmScheme as OfficialChannelClient, signVoucher } from '@x402/evm/batch-settlement/client';
import { BatchSettlementEvmScheme as OfficialBatchSettlementFacilitator } from '@x402/evm/batch-settlement/facilitator';
import {
  toClientEvmSigner,
  toFacilitatorEvmSigner,
  type BatchSettlementDepositPayload,
  type BatchSettlementVoucherClaim,
  type BatchSettlementVoucherFields,
  type ChannelConfig as SdkChannelConfig,
} from '@x402/evm';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import {
  BaseError,
  ContractFunctionRevertedError,
  decodeEventLog,
  encodeAbiParameters,
  maxUint256,
  parseAbi,
  parseUnits,
  publicActions,
  toHex,
  type Address,
  type Hash,
  type Hex,
  type Log,
  type TransactionReceipt,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { randomBytes } from 'node:crypto';
import {
  BATCH_SETTLEMENT_ADDRESS,
  batchSettlementAbi,
  channelIdOf,
  type ChannelConfig,
} from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { erc20AllowanceAbi, PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { balanceOf, usdcAbi } from '../../server/chain/usdc.js';
import { DEV_ACCOUNTS } from '../../server/dev/chain/dev-accounts.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';
import { startDevChain, type DevChain } from '../chain/dev-chain.js';

export { BATCH_SETTLEMENT_ADDRESS, batchSettlementAbi, channelIdOf, OfficialChannelClient, type ChannelConfig };
export const ONE_USDC = parseUnits('1', 6);
export const WITHDRAW_DELAY = CHANNEL_WITHDRAW_DELAY;

/** A chain with the channel contracts, the official facilitator (relayer + its own receiver authorizer), and a seller. */
export interface ChannelWorld {
  dev: DevChain;
  network: `eip155:${number}`;
  chainId: number;
  usdc: Address;
  /** Sends the facilitator's transactions. */
  relayer: PrivateKeyAccount;
  /** The receiver authorizer the facilitator signs claims and refunds with (it has gas, to call claim/refund itself). */
  authorizer: PrivateKeyAccount;
  facilitator: OfficialBatchSettlementFacilitator;
  /** The seller's payTo (a fresh address per world). */
  receiver: Address;
  stop(): Promise<void>;
}

export async function startChannelWorld(): Promise<ChannelWorld> {
  const dev = await startDevChain();
  const relayer = privateKeyToAccount(DEV_ACCOUNTS[5]!.privateKey);
  const authorizer = privateKeyToAccount(generatePrivateKey());
  await setEthBalance(dev, authorizer.address, parseUnits('10', 18));
  const client = dev.walletFor(relayer).extend(publicActions);
  const signer = toFacilitatorEvmSigner({
    address: relayer.address,
    readContract: (args) => client.readContract(args as never),
    verifyTypedData: (args) => client.verifyTypedData(args as never),
    writeContract: (args) => client.writeContract(args as never),
    sendTransaction: (args) => client.sendTransaction(args),
    waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
    getCode: (args) => client.getCode(args),
  });
  return {
    dev,
    network: `eip155:${dev.node.chainId}`,
    chainId: dev.node.chainId,
    usdc: dev.deployment.usdcAddress,
    relayer,
    authorizer,
    facilitator: new OfficialBatchSettlementFacilitator(signer, authorizer),
    receiver: privateKeyToAccount(generatePrivateKey()).address,
    stop: () => dev.stop(),
  };
}

export async function setEthBalance(dev: DevChain, address: Address, wei: bigint): Promise<void> {
  await dev.publicClient.request({ method: 'anvil_setBalance' as never, params: [address, toHex(wei)] as never });
}

/** A fresh buyer with `usdc` whole USDC (from dev buyer 0) and gas. */
export async function fundedBuyer(world: ChannelWorld, usdc = '1000'): Promise<PrivateKeyAccount> {
  const buyer = privateKeyToAccount(generatePrivateKey());
  await setEthBalance(world.dev, buyer.address, parseUnits('10', 18));
  const hash = await world.dev.walletFor(world.dev.buyers[0]!).writeContract({
    address: world.usdc, abi: usdcAbi, functionName: 'transfer', args: [buyer.address, parseUnits(usdc, 6)],
  });
  await world.dev.publicClient.waitForTransactionReceipt({ hash });
  return buyer;
}

export async function approvePermit2(world: ChannelWorld, buyer: PrivateKeyAccount): Promise<void> {
  const hash = await world.dev.walletFor(buyer).writeContract({ address: world.usdc, abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
  await world.dev.publicClient.waitForTransactionReceipt({ hash });
}

export const usdcOf = (world: ChannelWorld, account: Address) => balanceOf({ client: world.dev.publicClient, token: world.usdc, account });

/** What a batch-settlement seller's 402 offers (spec: payTo = receiver, extra carries the receiver authorizer). */
export function requirements(world: ChannelWorld, overrides: { amount?: bigint; receiver?: Address; receiverAuthorizer?: Address; assetTransferMethod?: 'eip3009' | 'permit2'; withdrawDelay?: number; asset?: Address; maxTimeoutSeconds?: number } = {}): PaymentRequirements {
  return {
    scheme: 'batch-settlement',
    network: world.network,
    amount: (overrides.amount ?? ONE_USDC / 100n).toString(),
    asset: overrides.asset ?? world.usdc,
    payTo: overrides.receiver ?? world.receiver,
    maxTimeoutSeconds: overrides.maxTimeoutSeconds ?? 3600,
    extra: {
      receiverAuthorizer: overrides.receiverAuthorizer ?? world.authorizer.address,
      withdrawDelay: overrides.withdrawDelay ?? WITHDRAW_DELAY,
      name: DEV_USDC_NAME,
      version: DEV_USDC_VERSION,
      ...(overrides.assetTransferMethod ? { assetTransferMethod: overrides.assetTransferMethod } : {}),
    },
  };
}

/** The official client for `buyer` (it reads the chain to recover channel state, as in production). */
function officialClient(world: ChannelWorld, buyer: PrivateKeyAccount, options: { salt?: Hex; payerAuthorizer?: Address; voucherSigner?: PrivateKeyAccount; depositUsdc?: bigint } = {}) {
  return new OfficialChannelClient(toClientEvmSigner(buyer, world.dev.publicClient), {
    ...(options.salt ? { salt: options.salt } : {}),
    ...(options.payerAuthorizer ? { payerAuthorizer: options.payerAuthorizer } : {}),
    ...(options.voucherSigner ? { voucherSigner: options.voucherSigner } : {}),
    ...(options.depositUsdc ? { depositStrategy: () => options.depositUsdc!.toString() } : {}),
  });
}

export const randomSalt = (): Hex => toHex(randomBytes(32));

/** The payment payload envelope the client sends, as the facilitator receives it. */
export function envelope(accepted: PaymentRequirements, payload: unknown, extensions?: Record<string, unknown>): PaymentPayload {
  return { x402Version: 2, accepted, payload: payload as Record<string, unknown>, ...(extensions ? { extensions } : {}) };
}

/** A first deposit signed by the official client (EIP-3009 unless the requirements say permit2). */
export async function officialDeposit(world: ChannelWorld, buyer: PrivateKeyAccount, options: Parameters<typeof officialClient>[2] & { requirements?: PaymentRequirements; extensions?: Record<string, unknown> } = {}) {
  const accepted = options.requirements ?? requirements(world);
  const created = await officialClient(world, buyer, options).createPaymentPayload(2, accepted, options.extensions ? { extensions: options.extensions } as never : undefined);
  const payload = created.payload as unknown as BatchSettlementDepositPayload;
  if (payload.type !== 'deposit') throw new Error(`expected a deposit payload, got ${payload.type}`);
  return { accepted, payload, payment: envelope(accepted, payload, created.extensions as Record<string, unknown> | undefined) };
}

/** Deposits through the official facilitator and returns the settle response. */
export async function depositThroughFacilitator(world: ChannelWorld, deposit: Awaited<ReturnType<typeof officialDeposit>>) {
  const verified = await world.facilitator.verify(deposit.payment, deposit.accepted);
  if (!verified.isValid) throw new Error(`deposit did not verify: ${verified.invalidReason} ${verified.invalidMessage ?? ''}`);
  const settled = await world.facilitator.settle(deposit.payment, deposit.accepted);
  if (!settled.success) throw new Error(`deposit failed: ${settled.errorReason} ${settled.errorMessage ?? ''}`);
  return settled;
}

/** The contract's form of the SDK's channel config (checksummed, numbers as numbers). */
export function contractConfig(config: SdkChannelConfig): ChannelConfig {
  return { ...config, withdrawDelay: Number(config.withdrawDelay), salt: config.salt as Hex } as ChannelConfig;
}

/** A voucher the official client signs for a cumulative `maxClaimable` on the channel. */
export function officialVoucher(world: ChannelWorld, signer: Parameters<typeof signVoucher>[0], channelId: Hex, maxClaimable: bigint): Promise<BatchSettlementVoucherFields> {
  return signVoucher(signer, channelId, maxClaimable.toString(), world.network);
}

/** A claim row in the SDK's wire form. */
export function claimRow(config: ChannelConfig, voucher: BatchSettlementVoucherFields, totalClaimed: bigint): BatchSettlementVoucherClaim {
  return { voucher: { channel: config as SdkChannelConfig, maxClaimableAmount: voucher.maxClaimableAmount }, signature: voucher.signature, totalClaimed: totalClaimed.toString() };
}

/** The same row as the contract's `claim` takes it. */
export function contractClaim(row: BatchSettlementVoucherClaim) {
  return {
    voucher: { channel: contractConfig(row.voucher.channel), maxClaimableAmount: BigInt(row.voucher.maxClaimableAmount) },
    signature: row.signature,
    totalClaimed: BigInt(row.totalClaimed),
  };
}

export async function channelState(world: ChannelWorld, channelId: Hex) {
  const read = <T>(functionName: 'channels' | 'pendingWithdrawals' | 'refundNonce') =>
    world.dev.publicClient.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName, args: [channelId] }) as Promise<T>;
  const [[balance, totalClaimed], [withdrawing, initiatedAt], refundNonce] = await Promise.all([
    read<readonly [bigint, bigint]>('channels'),
    read<readonly [bigint, number]>('pendingWithdrawals'),
    read<bigint>('refundNonce'),
  ]);
  return { balance, totalClaimed, withdrawing, initiatedAt, refundNonce };
}

export async function receiverState(world: ChannelWorld, receiver: Address) {
  const [totalClaimed, totalSettled] = await world.dev.publicClient.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'receivers', args: [receiver, world.usdc] });
  return { totalClaimed, totalSettled };
}

type WriteName = 'deposit' | 'claim' | 'claimWithSignature' | 'settle' | 'initiateWithdraw' | 'finalizeWithdraw' | 'refund' | 'refundWithSignature' | 'multicall';

/** Sends a call to the settlement contract from `sender` and waits for its receipt (which must succeed). */
export async function send(world: ChannelWorld, sender: PrivateKeyAccount, functionName: WriteName, args: readonly unknown[]): Promise<TransactionReceipt> {
  const hash: Hash = await world.dev.walletFor(sender).writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName, args: args as never });
  const receipt = await world.dev.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== 'success') throw new Error(`${functionName} ${hash} reverted`);
  return receipt;
}

/** Errors a deposit can surface from the collectors and Permit2, besides the settlement contract's own. */
const passThroughErrors = parseAbi([
  'error OnlyX402BatchSettlement()',
  'error Permit2612AmountMismatch()',
  'error InvalidNonce()',
  'error InvalidSigner()',
  'error InvalidContractSignature()',
  'error InvalidSignatureLength()',
  'error SignatureExpired(uint256 signatureDeadline)',
]);

/** The custom error (or revert string) a call reverts with (simulated: nothing is mined). */
export async function revertOf(world: ChannelWorld, sender: Address, functionName: WriteName, args: readonly unknown[], target: Address = BATCH_SETTLEMENT_ADDRESS, abi: readonly unknown[] = batchSettlementAbi): Promise<string> {
  try {
    await world.dev.publicClient.simulateContract({ account: sender, address: target, abi: [...abi, ...passThroughErrors] as unknown as typeof batchSettlementAbi, functionName, args: args as never });
  } catch (err) {
    const reverted = err instanceof BaseError ? err.walk((e) => e instanceof ContractFunctionRevertedError) : undefined;
    if (reverted instanceof ContractFunctionRevertedError) {
      return reverted.data?.errorName === 'Error' ? String(reverted.reason) : reverted.data?.errorName ?? reverted.signature ?? String(reverted.reason);
    }
    throw err;
  }
  throw new Error(`expected ${functionName} to revert, but it would succeed`);
}

/** The settlement contract's events in a receipt, decoded. */
export function eventsOf(receipt: { logs: Log[] }) {
  return receipt.logs
    .filter((log) => log.address.toLowerCase() === BATCH_SETTLEMENT_ADDRESS.toLowerCase())
    .map((log) => decodeEventLog({ abi: batchSettlementAbi, data: log.data, topics: log.topics }));
}

export async function increaseTime(world: ChannelWorld, seconds: number): Promise<void> {
  await world.dev.publicClient.request({ method: 'evm_increaseTime' as never, params: [toHex(seconds)] as never });
  await world.dev.publicClient.request({ method: 'evm_mine' as never, params: [] as never });
}

/** collectorData for the EIP-3009 collector, from a deposit payload (spec: validAfter, validBefore, salt, signature). */
export function erc3009CollectorData(payload: BatchSettlementDepositPayload): Hex {
  const auth = payload.deposit.authorization.erc3009Authorization!;
  return encodeAbiParameters(
    [{ type: 'uint256' }, { type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }],
    [BigInt(auth.validAfter), BigInt(auth.validBefore), BigInt(auth.salt), auth.signature as Hex],
  );
}

/** collectorData for the Permit2 collector, from a deposit payload (nonce, deadline, signature, EIP-2612 data). */
export function permit2CollectorData(payload: BatchSettlementDepositPayload, eip2612PermitData: Hex = '0x'): Hex {
  const auth = payload.deposit.authorization.permit2Authorization!;
  return encodeAbiParameters(
    [{ type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }, { type: 'bytes' }],
    [BigInt(auth.nonce), BigInt(auth.deadline), auth.signature as Hex, eip2612PermitData],
  );
}
