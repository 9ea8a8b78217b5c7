import { getAddress, parseEventLogs, type Address, type Hex } from 'viem';
import type { Model } from 'mongoose';
import { transferWithAuthorizationArgs, usdcAbi, type Authorization } from '../platform/chain/usdc.js';
import type { ChainService } from '../platform/chain/chain-service.js';
import type { PaymentDoc } from './models.js';

export const authorizationOf = (doc: Pick<PaymentDoc, 'authorization'>): Authorization => ({
  from: getAddress(doc.authorization.from),
  to: getAddress(doc.authorization.to),
  value: BigInt(doc.authorization.value),
  validAfter: BigInt(doc.authorization.validAfter),
  validBefore: BigInt(doc.authorization.validBefore),
  nonce: doc.authorization.nonce as Hex,
});

export type SettleOutcome = { ok: true; txHash: Hex } | { ok: false; reason: string; message: string; txHash?: Hex };

/**
 * Submits `transferWithAuthorization` for a claimed payment and waits for it to be mined. The hash is
 * written to the record the moment the node accepts the transaction, before waiting, so a crash after
 * sending leaves a record that reconciliation can finish.
 */
export async function settleOnChain(payments: Model<PaymentDoc>, payment: PaymentDoc, chain: ChainService): Promise<SettleOutcome> {
  const call = transferWithAuthorizationArgs(authorizationOf(payment), payment.signature as Hex);
  let txHash: Hex;
  try {
    const target = { address: chain.usdc.address, abi: usdcAbi, functionName: 'transferWithAuthorization', account: chain.walletClient.account, chain: chain.walletClient.chain } as const;
    txHash = call.form === 'vrs'
      ? await chain.walletClient.writeContract({ ...target, args: call.args })
      : await chain.walletClient.writeContract({ ...target, args: call.args });
  } catch (err) {
    return { ok: false, reason: 'settle_failed', message: `settlement was refused by the chain: ${shortReason(err)}` };
  }
  await payments.updateOne({ _id: payment._id }, { $set: { txHash, submittedAt: new Date() } });
  try {
    // A chain that mines on submission (anvil, some L2 sequencers) has the receipt already: skip the poll.
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: txHash }).catch(() => undefined)
      ?? await chain.publicClient.waitForTransactionReceipt({ hash: txHash, timeout: 120_000 });
    if (receipt.status !== 'success') return { ok: false, reason: 'settle_reverted', message: 'the settlement transaction reverted', txHash };
    return { ok: true, txHash };
  } catch (err) {
    return { ok: false, reason: 'settle_unconfirmed', message: `the settlement transaction was not confirmed: ${shortReason(err)}`, txHash };
  }
}

/** The transaction that used this authorization on chain, if any (AuthorizationUsed event). */
export async function findSettlementTx(chain: ChainService, authorizer: Address, nonce: Hex, fromBlock: bigint): Promise<Hex | undefined> {
  const logs = await chain.publicClient.getContractEvents({
    address: chain.usdc.address,
    abi: usdcAbi,
    eventName: 'AuthorizationUsed',
    args: { authorizer, nonce },
    fromBlock,
    toBlock: 'latest',
  }).catch(async () => {
    // Some nodes refuse indexed-argument filters over long ranges: fall back to decoding every log.
    const raw = await chain.publicClient.getLogs({ address: chain.usdc.address, fromBlock, toBlock: 'latest' });
    return parseEventLogs({ abi: usdcAbi, logs: raw, eventName: 'AuthorizationUsed' })
      .filter((l) => (l.args as { authorizer: Address }).authorizer.toLowerCase() === authorizer.toLowerCase() && (l.args as { nonce: Hex }).nonce === nonce);
  });
  return logs[0]?.transactionHash ?? undefined;
}

function shortReason(err: unknown): string {
  const e = err as { shortMessage?: string; message?: string };
  return (e.shortMessage ?? e.message ?? String(err)).split('\n')[0]!.slice(0, 300);
}
