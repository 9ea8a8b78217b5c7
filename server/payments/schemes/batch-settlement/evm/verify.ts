import { BATCH_SETTLEMENT_REASONS as R } from 'agentgate-x402-wire';
import { getAddress, isAddressEqual, parseErc6492Signature, zeroAddress, type Address, type Hex } from 'viem';
import type { ChainService } from '../../../../chain/chain-service.js';
import {
  channelIdOf,
  depositCalldata,
  depositPermit2TypedData,
  erc3009CollectorData,
  erc3009DepositNonce,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  MAX_WITHDRAW_DELAY,
  MIN_WITHDRAW_DELAY,
  permit2CollectorData,
  PERMIT2_DEPOSIT_COLLECTOR_ADDRESS,
  readChannelState,
  simulateBatchSettlement,
  voucherDigest,
  voucherTypedData,
  type ChannelConfig,
  type ChannelState,
} from './chain.js';
import { receiveWithAuthorizationTypes, usdcAbi } from '../../../../chain/usdc.js';
import { erc20AllowanceAbi, PERMIT2_ADDRESS } from '../../../../chain/permit2.js';
import { recoverSigner } from '../../../../chain/recover.js';
import { nodeFault } from '../../../../chain/rpc-fault.js';
import { chainUnavailable, signedBy } from '../../chain-checks.js';
import {type BatchSettlementRequirements, type DepositPayload, type RefundPayload, type VoucherPayload } from './wire.js';

// The facilitator's read-only checks of the batch-settlement payloads a buyer signs (deposit, voucher,
// refund voucher), in the order of the x402 batch-settlement EVM scheme as @x402/evm's facilitator runs
// them: the channel config against the requirements, the deposit's authorization, the voucher's signature,
// then the channel as the chain has it (and the payer's balance), then a simulation of the deposit. Each
// refusal carries the scheme's reason; an answer that passes carries the channel's snapshot.

export type ChannelVerdict =
  | { ok: true; payer: Address; channelId: Hex; state: ChannelState }
  | { ok: false; reason: string; message: string; payer?: Address };

/** A deposit's authorization as the chain records its use: Permit2's nonce, or the ERC-3009 nonce the collector derives from the channel and salt. */
export type DepositAuthorization = { kind: 'eip3009'; token: Address; nonce: Hex } | { kind: 'permit2'; nonce: string };

/** A deposit that passed: what its transaction sends. */
export type DepositVerdict = Extract<ChannelVerdict, { ok: true }> & { collector: Address; collectorData: Hex; amount: bigint; authorization: DepositAuthorization };

const refuse = (reason: string, message: string, payer?: Address) => ({ ok: false as const, reason, message, ...(payer ? { payer } : {}) });

/** The channel config against the requirements (the SDK's validateChannelConfig, in its order). */
export function channelConfigRefusal(config: ChannelConfig, channelId: Hex, requirements: BatchSettlementRequirements, chainId: number): { reason: string; message: string } | undefined {
  if (channelIdOf(config, chainId).toLowerCase() !== channelId.toLowerCase()) return { reason: R.channelIdMismatch, message: 'the voucher\'s channelId is not the hash of channelConfig' };
  if (!requirements.payTo || !isAddressEqual(config.receiver, requirements.payTo)) return { reason: R.receiverMismatch, message: 'channelConfig.receiver is not the requirements\' payTo' };
  const authorizer = requirements.extra?.receiverAuthorizer;
  if (!authorizer || isAddressEqual(authorizer, zeroAddress) || !isAddressEqual(config.receiverAuthorizer, authorizer)) {
    return { reason: R.receiverAuthorizerMismatch, message: 'channelConfig.receiverAuthorizer is not the non-zero receiverAuthorizer the requirements name' };
  }
  if (!isAddressEqual(config.token, requirements.asset)) return { reason: R.tokenMismatch, message: 'channelConfig.token is not the requirements\' asset' };
  const delay = requirements.extra?.withdrawDelay;
  if (delay !== undefined && config.withdrawDelay !== Number(delay)) return { reason: R.withdrawDelayMismatch, message: `channelConfig.withdrawDelay ${config.withdrawDelay} is not the ${delay} the requirements name` };
  if (config.withdrawDelay < MIN_WITHDRAW_DELAY || config.withdrawDelay > MAX_WITHDRAW_DELAY) {
    return { reason: R.withdrawDelayOutOfRange, message: `withdrawDelay must be ${MIN_WITHDRAW_DELAY}–${MAX_WITHDRAW_DELAY} seconds` };
  }
  return undefined;
}

/** Whether the voucher is the payer's (its payerAuthorizer's key, or the payer's own signature: ECDSA or ERC-1271). */
export async function voucherSigned(chain: ChainService, config: ChannelConfig, channelId: Hex, maxClaimableAmount: bigint, signature: Hex): Promise<boolean> {
  if (!isAddressEqual(config.payerAuthorizer, zeroAddress)) {
    const recovered = recoverSigner(voucherDigest(channelId, maxClaimableAmount, chain.chainId), signature);
    return recovered !== undefined && isAddressEqual(recovered, config.payerAuthorizer);
  }
  return signedBy(chain, config.payer, { ...voucherTypedData(channelId, maxClaimableAmount, chain.chainId), signature });
}

/** Reads the chain, a node that cannot answer being a 503 (nothing is refused for it). */
async function read<T>(fn: () => Promise<T>): Promise<T | { failed: string }> {
  try {
    return await fn();
  } catch (err) {
    if (nodeFault(err)) throw chainUnavailable(err);
    return { failed: (err as Error).message };
  }
}
const failed = (v: unknown): v is { failed: string } => typeof v === 'object' && v !== null && 'failed' in v && !(v instanceof Array);

/**
 * A voucher (or a refund's voucher) against the channel on chain: it must be funded (a balance), ask no
 * more than the balance, and be above what was claimed already (a refund's voucher may equal it).
 */
export async function verifyVoucher(chain: ChainService, payload: VoucherPayload | RefundPayload, requirements: BatchSettlementRequirements): Promise<ChannelVerdict> {
  const { channelConfig: config, voucher } = payload;
  const payer = getAddress(config.payer);
  const bad = channelConfigRefusal(config, voucher.channelId, requirements, chain.chainId);
  if (bad) return refuse(bad.reason, bad.message, payer);
  if (!(await voucherSigned(chain, config, voucher.channelId, voucher.maxClaimableAmount, voucher.signature))) {
    return refuse(R.voucherSignature, 'the voucher is not signed by the channel\'s payer (or its payerAuthorizer)', payer);
  }
  const state = await read(() => readChannelState(chain.publicClient, voucher.channelId));
  if (failed(state)) return refuse(R.rpcReadFailed, `the channel could not be read: ${state.failed}`, payer);
  if (state.balance === 0n) return refuse(R.channelNotFound, 'the channel has no deposit', payer);
  const max = voucher.maxClaimableAmount;
  if (max > state.balance) return refuse(R.exceedsBalance, `the voucher's ${max} is above the channel's balance ${state.balance}`, payer);
  if (payload.type === 'refund' ? max < state.totalClaimed : max <= state.totalClaimed) {
    return refuse(R.belowClaimed, `the voucher's ${max} is not above the ${state.totalClaimed} claimed already`, payer);
  }
  return { ok: true, payer, channelId: voucher.channelId, state };
}

/** How a deposit pays in: the requirements' assetTransferMethod, else what the authorization is. */
const transferMethodOf = (payload: DepositPayload, requirements: BatchSettlementRequirements) =>
  requirements.extra?.assetTransferMethod ?? (payload.deposit.authorization.permit2Authorization ? 'permit2' : 'eip3009');

/** The deposit's authorization for the way it pays in (undefined: the payload lacks it). */
export function depositAuthorization(payload: DepositPayload, requirements: BatchSettlementRequirements): DepositAuthorization | undefined {
  const auth = payload.deposit.authorization;
  if (transferMethodOf(payload, requirements) === 'permit2') return auth.permit2Authorization && { kind: 'permit2', nonce: auth.permit2Authorization.nonce.toString() };
  return auth.erc3009Authorization && { kind: 'eip3009', token: getAddress(requirements.asset), nonce: erc3009DepositNonce(payload.voucher.channelId, BigInt(auth.erc3009Authorization.salt)) };
}

/** What makes a deposit one, its authorization: the key of its action (a deposit presented again finds the first one's answer). */
export const depositKey = (chainId: number, payer: Address, authorization: DepositAuthorization): string =>
  (authorization.kind === 'permit2' ? `${chainId}:permit2:${payer}:${authorization.nonce}` : `${chainId}:${payer}:${authorization.nonce}`).toLowerCase();

/**
 * A deposit (with its first voucher): the channel config, the deposit's authorization (ERC-3009
 * ReceiveWithAuthorization to the EIP-3009 collector, or a Permit2 witness transfer to the Permit2
 * collector), the voucher, the channel and the payer's balance, then the deposit simulated.
 */
export async function verifyDeposit(chain: ChainService, payload: DepositPayload, requirements: BatchSettlementRequirements, nowSeconds: number): Promise<DepositVerdict | Extract<ChannelVerdict, { ok: false }>> {
  const { channelConfig: config, voucher, deposit } = payload;
  const payer = getAddress(config.payer);
  const bad = channelConfigRefusal(config, voucher.channelId, requirements, chain.chainId);
  if (bad) return refuse(bad.reason, bad.message, payer);
  const method = transferMethodOf(payload, requirements);
  let collector: Address;
  let collectorData: Hex;
  if (method === 'permit2') {
    const auth = deposit.authorization.permit2Authorization;
    if (!auth) return refuse(R.payloadType, 'the requirements ask for a Permit2 deposit and the payload has no permit2Authorization', payer);
    if (!isAddressEqual(auth.from, payer)) return refuse(R.permit2Signature, 'permit2Authorization.from is not the channel\'s payer', payer);
    if (!isAddressEqual(auth.spender, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS)) return refuse(R.permit2Spender, `the spender must be the Permit2 deposit collector ${PERMIT2_DEPOSIT_COLLECTOR_ADDRESS}`, payer);
    if (!isAddressEqual(auth.permitted.token, requirements.asset)) return refuse(R.tokenMismatch, 'the permitted token is not the requirements\' asset', payer);
    if (auth.permitted.amount !== deposit.amount) return refuse(R.permit2Amount, 'the permitted amount is not the deposit\'s amount', payer);
    if (auth.witness.channelId.toLowerCase() !== voucher.channelId.toLowerCase()) return refuse(R.channelIdMismatch, 'the permit\'s witness names another channel', payer);
    if (auth.deadline < BigInt(nowSeconds + 6)) return refuse(R.permit2Deadline, 'the permit\'s deadline has passed (or is less than 6 s away)', payer);
    const typed = depositPermit2TypedData({
      from: payer, token: getAddress(auth.permitted.token), amount: auth.permitted.amount, spender: getAddress(auth.spender), nonce: auth.nonce, deadline: auth.deadline, channelId: auth.witness.channelId,
    }, chain.chainId);
    if (!(await signedBy(chain, payer, { ...typed, signature: auth.signature }))) return refuse(R.permit2Signature, 'the Permit2 signature is not the payer\'s', payer);
    const allowance = await read(() => chain.publicClient.readContract({ address: requirements.asset, abi: erc20AllowanceAbi, functionName: 'allowance', args: [payer, PERMIT2_ADDRESS] }));
    if (failed(allowance) || allowance < deposit.amount) return refuse(R.permit2Allowance, 'the payer has not approved Permit2 for the deposit (approve Permit2 once, then retry)', payer);
    collector = PERMIT2_DEPOSIT_COLLECTOR_ADDRESS;
    collectorData = permit2CollectorData(auth.nonce, auth.deadline, parseErc6492Signature(auth.signature).signature);
  } else {
    const auth = deposit.authorization.erc3009Authorization;
    if (!auth) return refuse(R.erc3009Required, 'the payload has no erc3009Authorization', payer);
    const name = requirements.extra?.name;
    const version = requirements.extra?.version;
    if (!name || !version) return refuse(R.missingEip712Domain, 'the requirements\' extra must name the token\'s EIP-712 name and version', payer);
    if (auth.validBefore < BigInt(nowSeconds + 6)) return refuse(R.validBefore, 'the authorization expired (or expires within 6 s)', payer);
    if (auth.validAfter > BigInt(nowSeconds)) return refuse(R.validAfter, 'the authorization is not valid yet', payer);
    const wrapped = parseErc6492Signature(auth.signature);
    if (wrapped.address && wrapped.data && !isAddressEqual(wrapped.address, zeroAddress)) {
      const code = await read(() => chain.publicClient.getCode({ address: payer }));
      if (failed(code) || !code || code === '0x') return refuse(R.factoryNotAllowed, 'this facilitator deploys no counterfactual wallet (no ERC-6492 factory is allowed)', payer);
    }
    const nonce = erc3009DepositNonce(voucher.channelId, BigInt(auth.salt));
    const typed = {
      domain: { name, version, chainId: chain.chainId, verifyingContract: getAddress(requirements.asset) },
      types: receiveWithAuthorizationTypes, primaryType: 'ReceiveWithAuthorization' as const,
      message: { from: payer, to: ERC3009_DEPOSIT_COLLECTOR_ADDRESS, value: deposit.amount, validAfter: auth.validAfter, validBefore: auth.validBefore, nonce },
    };
    if (!(await signedBy(chain, payer, { ...typed, signature: wrapped.signature }))) return refuse(R.receiveAuthorizationSignature, 'the ReceiveWithAuthorization is not signed by the payer', payer);
    collector = ERC3009_DEPOSIT_COLLECTOR_ADDRESS;
    collectorData = erc3009CollectorData(auth.validAfter, auth.validBefore, BigInt(auth.salt), wrapped.signature);
  }
  if (!(await voucherSigned(chain, config, voucher.channelId, voucher.maxClaimableAmount, voucher.signature))) {
    return refuse(R.voucherSignature, 'the voucher is not signed by the channel\'s payer (or its payerAuthorizer)', payer);
  }
  const reads = await read(() => Promise.all([
    readChannelState(chain.publicClient, voucher.channelId),
    chain.publicClient.readContract({ address: requirements.asset, abi: usdcAbi, functionName: 'balanceOf', args: [payer] }),
  ]));
  if (failed(reads)) return refuse(R.rpcReadFailed, `the channel could not be read: ${reads.failed}`, payer);
  const [state, payerBalance] = reads;
  if (payerBalance < deposit.amount) return refuse(R.insufficientBalance, `the payer holds ${payerBalance}, less than the deposit ${deposit.amount}`, payer);
  const max = voucher.maxClaimableAmount;
  if (max > state.balance + deposit.amount) return refuse(R.exceedsBalance, `the voucher's ${max} is above the channel's balance after the deposit, ${state.balance + deposit.amount}`, payer);
  if (max <= state.totalClaimed) return refuse(R.belowClaimed, `the voucher's ${max} is not above the ${state.totalClaimed} claimed already`, payer);
  const reverted = await simulateBatchSettlement(chain.publicClient, depositCalldata(config, deposit.amount, collector, collectorData));
  if (reverted) return refuse(R.depositSimulation, `the deposit would revert: ${reverted}`, payer);
  return { ok: true, payer, channelId: voucher.channelId, state, collector, collectorData, amount: deposit.amount, authorization: depositAuthorization(payload, requirements)! };
}

