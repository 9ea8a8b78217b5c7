import { BATCH_SETTLEMENT_REASONS as R } from 'agentgate-x402-wire';
import { Schema, type Connection, type Model } from 'mongoose';
import { getAddress, isAddressEqual, parseEventLogs, type Address, type Hex, type TransactionReceipt } from 'viem';
import type { ChainService } from '../../../../chain/chain-service.js';
import {
  BATCH_SETTLEMENT_ADDRESS,
  batchSettlementAbi,
  channelIdOf,
  channelSnapshot,
  claimWithSignatureCalldata,
  depositCalldata,
  readChannelState,
  readChannelStates,
  refundCalldata,
  refundWithSignatureCalldata,
  settleCalldata,
  simulateBatchSettlement,
  type ChannelConfig,
  type VoucherClaim,
} from './chain.js';
import { authorizationState } from '../../../../chain/usdc.js';
import { permit2NonceUsed } from '../../../../chain/permit2.js';
import { blockBefore } from '../../../../chain/authorization-events.js';
import { isDuplicateKey } from '../../../../platform/errors.js';
import { retryWhileDatabaseAway } from '../../../../platform/database-outage.js';
import type { Logger } from '../../../../platform/logger.js';
import { RelayerUnavailableError, shortReason } from '../../../../settlement/relayer-lane.js';
import type { SendTools, SettlementWork, WorkExecutor, WorkOutcome } from '../../../../settlement/work.js';
import type { DepositAuthorization } from './verify.js';


// What the batch-settlement facilitator sends on chain (a deposit, a claim of many channels, a settle, a
// refund), each an "action": recorded first by a unique insert of what makes it one (the deposit's
// authorization, the claim rows, the receiver's claimed total, the channel's refund nonce), so a replay or
// a concurrent copy sends nothing and answers the first one's outcome. The transaction goes out through the
// settlement engine as work of kind `batch-settlement.<action>`, run by whichever process holds a relayer
// lane; that process records the outcome on the action. Every executor asks the chain first whether its
// action happened already (a lane taken over from a holder that died runs it again): the contract's own
// at-most-once (an authorization nonce, a refund nonce, claims that never go down) then names the first
// transaction instead of sending a second.

export type ActionKind = 'deposit' | 'claim' | 'settle' | 'refund';

/** The facilitator's /settle answer for an action (the x402 SettleResponse). */
export type ActionAnswer = Record<string, unknown> & { success: boolean };

export interface ChannelActionDoc {
  /** `<kind>:<chainId>:<what makes it one>`: the unique key. */
  _id: string;
  kind: ActionKind;
  orgId: string;
  chainId: number;
  channelIds: string[];
  receiver: string;
  payer?: string;
  amount?: string;
  status: 'sending' | 'succeeded' | 'failed';
  txHash?: string;
  answer?: ActionAnswer;
  /** The work as handed to the engine (plain data), to hand it again if its process died. */
  work: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
}

const schema = new Schema<ChannelActionDoc>({
  _id: String,
  kind: { type: String, required: true },
  orgId: { type: String, required: true, index: true },
  chainId: Number,
  // Not indexed: nothing looks actions up by channel, and FerretDB indexes an array as one btree row (at
  // most 2,704 bytes), so the record of a claim of about 40 channels or more could not be inserted.
  channelIds: [String],
  receiver: String,
  payer: String,
  amount: String,
  status: { type: String, required: true },
  txHash: String,
  answer: Schema.Types.Mixed,
  work: Schema.Types.Mixed,
  createdAt: Date,
  updatedAt: Date,
}, { versionKey: false, minimize: false });
// The claim webhooks' outbox sweep reads the recent successful claims (claim-webhooks.ts).
schema.index({ status: 1, updatedAt: 1 });

export const channelActionModel = (conn: Connection): Model<ChannelActionDoc> =>
  (conn.models.ChannelAction as Model<ChannelActionDoc>) ?? conn.model<ChannelActionDoc>('ChannelAction', schema, 'channel_actions');

// --- the work each kind carries (plain JSON: it may travel through the database) --------------------

interface Common { actionId: string; network: string; createdAt: string }
export type DepositWork = Common & {
  config: ChannelConfig; channelId: Hex; payer: Address; amount: string; collector: Address; collectorData: Hex;
  authorization: DepositAuthorization;
};
export interface WireClaim { voucher: { channel: ChannelConfig; maxClaimableAmount: string }; signature: Hex; totalClaimed: string }
export type ClaimWork = Common & { claims: WireClaim[]; authorizerSignature: Hex };
export type SettleWork = Common & { receiver: Address; token: Address; /** The receiver's claimed total when asked: settled once totalSettled reaches it. */ claimedTotal: string };
export type RefundWork = Common & {
  config: ChannelConfig; channelId: Hex; amount: string; nonce: string; refundSignature: Hex;
  claims: WireClaim[]; claimSignature?: Hex;
};

export const wireClaim = (c: VoucherClaim): WireClaim => ({ voucher: { channel: c.voucher.channel, maxClaimableAmount: c.voucher.maxClaimableAmount.toString() }, signature: c.signature, totalClaimed: c.totalClaimed.toString() });
const claimOf = (c: WireClaim): VoucherClaim => ({ voucher: { channel: c.voucher.channel, maxClaimableAmount: BigInt(c.voucher.maxClaimableAmount) }, signature: c.signature, totalClaimed: BigInt(c.totalClaimed) });

const failure = (reason: string, message: string, network: string, extra: Record<string, unknown> = {}): ActionAnswer =>
  ({ success: false, errorReason: reason, errorMessage: message, transaction: '', network, ...extra });

/** The executors, registered on the settlement engine as the scheme's `otherWork`. */
export function actionExecutors(chain: () => ChainService, records: () => Model<ChannelActionDoc>, log: Logger): Record<string, WorkExecutor> {
  /** Records the outcome on the action (the one writer of a sent action), then relays it. */
  const finish = async (work: Common, answer: ActionAnswer): Promise<WorkOutcome> => {
    const txHash = typeof answer.transaction === 'string' && answer.transaction ? answer.transaction : undefined;
    await retryWhileDatabaseAway(() => records().updateOne({ _id: work.actionId }, { $set: { status: answer.success ? 'succeeded' : 'failed', answer, ...(txHash ? { txHash } : {}), updatedAt: new Date() } }), log, 'recording a channel action');
    return { done: answer };
  };

  /**
   * Sends one transaction to the contract from a relayer of this process and waits for it to be mined.
   * `unavailable`: nothing was sent. `unknown`: it may have been sent, and the chain decides (the action
   * stays open; run again, the executor finds what happened).
   */
  const send = async (tools: SendTools, data: Hex, label: Record<string, unknown>): Promise<{ receipt: TransactionReceipt } | { unavailable: string } | { unknown: string }> => {
    try {
      return { receipt: await tools.sendTransaction({ to: BATCH_SETTLEMENT_ADDRESS, data }, { scheme: 'batch-settlement', ...label }) };
    } catch (err) {
      if (err instanceof RelayerUnavailableError) return { unavailable: err.message };
      return { unknown: shortReason(err) };
    }
  };

  const eventsSince = async (work: Common, eventName: 'Deposited' | 'Claimed' | 'Settled' | 'Refunded', args: Record<string, unknown>) => {
    const c = chain();
    const fromBlock = await blockBefore(c, new Date(work.createdAt));
    return c.publicClient.getContractEvents({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, eventName, args: args as never, fromBlock, toBlock: 'latest' });
  };

  const snapshotAfter = async (channelId: Hex) => ({ channelState: channelSnapshot(channelId, await readChannelState(chain().publicClient, channelId)) });

  /** What a sent transaction came to: its receipt, or the outcome to relay without one. */
  const landed = async (work: Common, sent: Awaited<ReturnType<typeof send>>, failedReason: string): Promise<TransactionReceipt | WorkOutcome> => {
    if ('unavailable' in sent) {
      // Nothing reached the chain: the action goes, so the same request may be made again.
      await retryWhileDatabaseAway(() => records().deleteOne({ _id: work.actionId, status: 'sending' }), log, 'releasing an unsent channel action');
      return { unavailable: sent.unavailable };
    }
    if ('unknown' in sent) {
      log.warn({ actionId: work.actionId, err: sent.unknown }, 'channel action sent without a known outcome; it is asked of the chain when the action is requested again');
      return { done: failure(R.pending, `the transaction's outcome is not known yet (${sent.unknown}); request the same action again for it`, work.network) };
    }
    if (sent.receipt.status !== 'success') return finish(work, failure(failedReason, `the transaction ${sent.receipt.transactionHash} reverted`, work.network, { transaction: sent.receipt.transactionHash }));
    return sent.receipt;
  };
  const isReceipt = (v: TransactionReceipt | WorkOutcome): v is TransactionReceipt => 'transactionHash' in v;

  const deposit: WorkExecutor = async (raw, tools) => {
    const work = (raw as SettlementWork<DepositWork>).data;
    const c = chain();
    const used = work.authorization.kind === 'eip3009'
      ? await authorizationState({ client: c.publicClient, token: work.authorization.token, authorizer: work.payer, nonce: work.authorization.nonce })
      : await permit2NonceUsed(c.publicClient, work.payer, BigInt(work.authorization.nonce));
    if (used) {
      // Run again after its sender died: the deposit is on chain already (or the authorization went elsewhere).
      const logs = await eventsSince(work, 'Deposited', { channelId: work.channelId });
      const mine = logs.find((l) => (l.args as { amount: bigint }).amount === BigInt(work.amount));
      if (!mine) return finish(work, failure(R.depositFailed, 'the deposit\'s authorization was used, and no deposit of it into this channel was found', work.network, { payer: work.payer }));
      return finish(work, { success: true, transaction: mine.transactionHash, network: work.network, payer: work.payer, amount: work.amount, extra: await snapshotAfter(work.channelId) });
    }
    const data = depositCalldata(work.config, BigInt(work.amount), work.collector, work.collectorData);
    const reverted = await simulateBatchSettlement(c.publicClient, data);
    if (reverted) return finish(work, failure(R.depositSimulation, `the deposit would revert: ${reverted}`, work.network, { payer: work.payer }));
    const receipt = await landed(work, await send(tools, data, { action: 'deposit', channelId: work.channelId }), R.depositFailed);
    if (!isReceipt(receipt)) return receipt;
    return finish(work, { success: true, transaction: receipt.transactionHash, network: work.network, payer: work.payer, amount: work.amount, extra: await snapshotAfter(work.channelId) });
  };

  const claim: WorkExecutor = async (raw, tools) => {
    const work = (raw as SettlementWork<ClaimWork>).data;
    const c = chain();
    const claims = work.claims.map(claimOf);
    const ids = claims.map((row) => channelIdOf(row.voucher.channel, c.chainId));
    const states = await readChannelStates(c.publicClient, ids);
    if (claims.every((row, i) => row.totalClaimed <= states[i]!.totalClaimed)) {
      // Every row is claimed already (by this action run before, or another): nothing to send.
      const logs = await eventsSince(work, 'Claimed', { channelId: ids[0] });
      const mine = logs.find((l) => (l.args as { newTotalClaimed: bigint }).newTotalClaimed === claims[0]!.totalClaimed);
      return finish(work, { success: true, transaction: mine?.transactionHash ?? '', network: work.network });
    }
    const data = claimWithSignatureCalldata(claims, work.authorizerSignature);
    const reverted = await simulateBatchSettlement(c.publicClient, data);
    if (reverted) return finish(work, failure(R.claimSimulation, `the claim would revert: ${reverted}`, work.network));
    const receipt = await landed(work, await send(tools, data, { action: 'claim', channels: ids.length }), R.claimFailed);
    if (!isReceipt(receipt)) return receipt;
    return finish(work, { success: true, transaction: receipt.transactionHash, network: work.network });
  };

  const settle: WorkExecutor = async (raw, tools) => {
    const work = (raw as SettlementWork<SettleWork>).data;
    const c = chain();
    const [, totalSettled] = await c.publicClient.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'receivers', args: [work.receiver, work.token] });
    if (totalSettled >= BigInt(work.claimedTotal)) {
      const logs = await eventsSince(work, 'Settled', { receiver: work.receiver, token: work.token });
      const last = logs.at(-1);
      return finish(work, { success: true, transaction: last?.transactionHash ?? '', network: work.network, amount: (last?.args as { amount?: bigint } | undefined)?.amount?.toString() ?? '0' });
    }
    const data = settleCalldata(work.receiver, work.token);
    const reverted = await simulateBatchSettlement(c.publicClient, data);
    if (reverted) return finish(work, failure(R.settleSimulation, `the settle would revert: ${reverted}`, work.network));
    const receipt = await landed(work, await send(tools, data, { action: 'settle' }), R.settleFailed);
    if (!isReceipt(receipt)) return receipt;
    const settled = parseEventLogs({ abi: batchSettlementAbi, eventName: 'Settled', logs: receipt.logs.filter((l) => isAddressEqual(l.address, BATCH_SETTLEMENT_ADDRESS)) })
      .find((l) => isAddressEqual(l.args.receiver, work.receiver) && isAddressEqual(l.args.token, work.token));
    return finish(work, { success: true, transaction: receipt.transactionHash, network: work.network, amount: settled?.args.amount.toString() ?? '0' });
  };

  const refund: WorkExecutor = async (raw, tools) => {
    const work = (raw as SettlementWork<RefundWork>).data;
    const c = chain();
    const payer = getAddress(work.config.payer);
    const before = await readChannelState(c.publicClient, work.channelId);
    if (before.refundNonce > BigInt(work.nonce)) {
      // This refund's nonce is used: it went through already (run again after its sender died).
      const logs = await eventsSince(work, 'Refunded', { channelId: work.channelId });
      const last = logs.at(-1);
      if (!last) return finish(work, failure(R.refundSimulation, 'the refund nonce was used, and no refund of this channel was found', work.network, { payer }));
      return finish(work, { success: true, transaction: last.transactionHash, network: work.network, payer, amount: (last.args as { amount: bigint }).amount.toString(), extra: await snapshotAfter(work.channelId) });
    }
    const refundCall = refundWithSignatureCalldata(work.config, BigInt(work.amount), BigInt(work.nonce), work.refundSignature);
    const claimCall = work.claims.length && work.claimSignature ? claimWithSignatureCalldata(work.claims.map(claimOf), work.claimSignature) : undefined;
    const data = refundCalldata(refundCall, claimCall);
    const reverted = await simulateBatchSettlement(c.publicClient, data);
    if (reverted) return finish(work, failure(R.refundSimulation, `the refund would revert: ${reverted}`, work.network, { payer }));
    const receipt = await landed(work, await send(tools, data, { action: 'refund', channelId: work.channelId }), R.refundFailed);
    if (!isReceipt(receipt)) return receipt;
    const refunded = parseEventLogs({ abi: batchSettlementAbi, eventName: 'Refunded', logs: receipt.logs.filter((l) => isAddressEqual(l.address, BATCH_SETTLEMENT_ADDRESS)) })
      .find((l) => l.args.channelId.toLowerCase() === work.channelId.toLowerCase());
    return finish(work, { success: true, transaction: receipt.transactionHash, network: work.network, payer, amount: refunded?.args.amount.toString() ?? '0', extra: await snapshotAfter(work.channelId) });
  };

  return { 'batch-settlement.deposit': deposit, 'batch-settlement.claim': claim, 'batch-settlement.settle': settle, 'batch-settlement.refund': refund };
}

/**
 * Runs an action once: the unique insert of its record, then its work handed to the engine (`submit`),
 * whose executor records the outcome. A copy of an action already recorded answers that one's outcome
 * (waiting for it while it is being sent); one that failed may be asked again; one whose process died
 * while sending (still `sending` after `staleMs`) is handed to the engine again, whose executor finds on
 * chain what became of it.
 */
export async function runAction(
  records: Model<ChannelActionDoc>,
  action: Omit<ChannelActionDoc, 'status' | 'createdAt' | 'updatedAt' | 'work'>,
  work: Omit<Common, 'actionId' | 'createdAt'> & Record<string, unknown>,
  submit: (work: SettlementWork) => Promise<WorkOutcome>,
  options: { waitMs: number; staleMs: number; log: Logger },
): Promise<{ answer: ActionAnswer } | { unavailable: string }> {
  const now = new Date();
  const data = { ...work, actionId: action._id, createdAt: now.toISOString() };
  const hand = async (d: Record<string, unknown>) => {
    const outcome = await submit({ id: action._id, kind: `batch-settlement.${action.kind}`, data: d });
    return 'done' in outcome ? { answer: outcome.done as ActionAnswer } : outcome;
  };
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await records.create({ ...action, status: 'sending', work: data, createdAt: now, updatedAt: now });
      return await hand(data);
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
    const deadline = Date.now() + options.waitMs;
    let existing = await records.findById(action._id).lean();
    const stale = (doc: typeof existing) => !!doc && Date.now() - new Date(doc.createdAt).getTime() > options.staleMs;
    while (existing?.status === 'sending' && !stale(existing) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      existing = await records.findById(action._id).lean();
    }
    if (!existing) continue; // released (nothing was sent): ask again
    if (existing.status === 'succeeded') return { answer: existing.answer! };
    if (existing.status === 'failed') {
      // Nothing moved: the same action may be asked again (once per request).
      if (attempt === 0) await records.deleteOne({ _id: action._id, status: 'failed' });
      if (attempt === 0) continue;
      return { answer: existing.answer! };
    }
    if (stale(existing)) {
      options.log.info({ actionId: action._id }, 'a channel action still sending after its process went quiet: handed to the engine again');
      return hand(existing.work);
    }
    return { answer: failure(R.pending, 'the same action is being sent; ask again for its outcome', String(work.network)) };
  }
  return { answer: failure(R.pending, 'the same action is being sent; ask again for its outcome', String(work.network)) };
}
