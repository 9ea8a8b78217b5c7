import { decodeEventLog, encodeFunctionData, type Hex, type PublicClient, type TransactionReceipt } from 'viem';
import type { Connection, Model } from 'mongoose';
import type { ActivityLog } from '../../../../platform/activity-log.js';
import { AppError, isDuplicateKey } from '../../../../platform/errors.js';
import { BATCH_SETTLEMENT_ADDRESS, batchSettlementAbi, contractChannelConfig, readChannelState, revertName, type ChannelState } from '../../../../payments/schemes/batch-settlement/evm/chain.js';
import { formatUsdc } from 'agentgate-x402-wire';
import type { WalletService } from '../../../../wallet/wallet-service.js';
import type { MandateOwner } from '../../../mandate-service.js';
import { availableOf, chargedTotalOf, type BuyerChannelDoc, type BuyerVoucherDoc } from './records.js';
import { channelWithdrawalSchema, type ChannelWithdrawalDoc } from './withdrawal-records.js';

/** A start still `starting` after this long lost its process (an owner transaction is mined in seconds). */
const STALE_START_MS = 5 * 60_000;
/** Withdrawals finalized per round (the rest wait for the next one). */
const FINALIZE_PER_ROUND = 100;

/** A withdrawal as the route, the MCP tool and the channel list show it. */
export function presentWithdrawal(w: ChannelWithdrawalDoc) {
  return {
    status: w.status, startedBy: w.startedBy, amountUsdc: formatUsdc(BigInt(w.amountRaw)),
    startedAt: (w.startedAt ?? w.createdAt).toISOString(), finalizableAt: w.finalizableAt?.toISOString() ?? null,
    txHash: w.startTx ?? null, fundingTxHash: w.startFundingTx ?? null,
    finalizedAt: w.finalizedAt?.toISOString() ?? null, finalizeTxHash: w.finalizeTx ?? null, finalizeFundingTxHash: w.finalizeFundingTx ?? null,
    withdrawnUsdc: w.withdrawnRaw !== undefined ? formatUsdc(BigInt(w.withdrawnRaw)) : null,
  };
}

/** A started withdrawal, as POST /v0/wallet/channels/:id/withdraw answers it. */
export type WithdrawalStarted = { ok: true; channelId: string } & ReturnType<typeof presentWithdrawal>;

export interface ChannelWithdrawalDeps {
  /** The wallets (the default network's instance; each channel is withdrawn on its own chain). */
  wallets: WalletService;
  logs: ActivityLog;
  channels: Model<BuyerChannelDoc>;
  vouchers: Model<BuyerVoucherDoc>;
}

/**
 * The wallet's way to take a channel's deposit back without its seller (x402 batch-settlement's timed
 * withdrawal): the owner key, the channel's payerAuthorizer, sends `initiateWithdraw` for what the channel
 * holds above what the accepted vouchers committed, and `finalizeWithdraw` once the channel's withdraw delay
 * has passed on chain (WalletService.sendAsOwner gives the owner its gas from the relayer first). The seller
 * may claim its vouchers in between (its sweep claims a withdrawing channel at its next round): the chain
 * pays out only what is still unclaimed. While a withdrawal is under way the channel takes no voucher or deposit.
 */
export class ChannelWithdrawals {
  readonly records: Model<ChannelWithdrawalDoc>;

  constructor(conn: Connection, private readonly deps: ChannelWithdrawalDeps) {
    this.records = conn.models.BuyerChannelWithdrawal ?? conn.model<ChannelWithdrawalDoc>('BuyerChannelWithdrawal', channelWithdrawalSchema, 'buyer_channel_withdrawals');
  }

  /**
   * The channel's withdrawal under way, if any. A pending one the chain no longer has (a cooperative refund
   * ended it, or it was finalized by a process that died before recording it) is closed first.
   */
  async underway(channel: Pick<BuyerChannelDoc, '_id' | 'chainId'>): Promise<ChannelWithdrawalDoc | null> {
    const found = await this.records.findOne({ channelId: channel._id, status: { $in: ['starting', 'pending'] } }).lean();
    if (found?.status !== 'pending') return found;
    const client = chainOf(this.deps.wallets, channel).publicClient;
    const state = await readChannelState(client, channel._id as Hex);
    if (state.withdrawRequestedAt !== 0) return found;
    await this.closeGone(found, client);
    return null;
  }

  /** Each channel's latest withdrawal (for the channel list). */
  async latest(channelIds: string[]): Promise<Map<string, ChannelWithdrawalDoc>> {
    const found = await this.records.find({ channelId: { $in: channelIds } }).sort({ createdAt: -1 }).lean();
    const latest = new Map<string, ChannelWithdrawalDoc>();
    for (const w of found) if (!latest.has(w.channelId)) latest.set(w.channelId, w);
    return latest;
  }

  /**
   * Starts withdrawing what the channel holds above what its accepted vouchers committed. Undefined: not
   * this identity's channel. A 409 when one is under way or a call is still out on the channel (its voucher
   * decides what is committed), a 422 when nothing is left to withdraw.
   */
  async start(owner: MandateOwner, channelId: string, startedBy: ChannelWithdrawalDoc['startedBy']): Promise<WithdrawalStarted | undefined> {
    const { channels, vouchers } = this.deps;
    const channel = await channels.findOne({ _id: channelId, identityId: owner.identityId }).lean();
    if (!channel) return undefined;
    // The wallets on the channel's chain: the owner key sends there.
    const wallets = walletsOn(this.deps.wallets, channel);
    const wallet = await wallets.find(owner.identityId);
    if (!wallet) return undefined;
    const underway = await this.underway(channel);
    if (underway) throw pendingError(underway);
    const last = await vouchers.findOne({ channelId: channel._id }).sort({ _id: -1 }).lean();
    if (last && last.status !== 'accepted') throw new AppError(409, 'channel_busy', 'a call on this channel is still out (or its answer was lost); pay once more, or try again in a minute');
    const state = await readChannelState(wallets.requireChain().publicClient, channel._id as Hex);
    // What the calls were charged (a usage-priced call less than the maximum its voucher signed), as the cooperative refund counts it.
    const charged = last ? chargedTotalOf(last) : 0n;
    const amount = availableOf(state.balance, charged, state.totalClaimed);
    if (state.withdrawRequestedAt === 0 && amount === 0n) {
      throw new AppError(422, 'nothing_to_withdraw', `the channel holds ${formatUsdc(state.balance)} USDC, all of it committed to the seller by accepted vouchers or claimed`);
    }

    // Every process starting one now inserts this id: one of them sends.
    const over = await this.records.countDocuments({ channelId: channel._id, status: { $in: ['finalized', 'ended'] } });
    const record: ChannelWithdrawalDoc = {
      _id: `${channel._id}:${over}`, channelId: channel._id, orgId: channel.orgId, identityId: channel.identityId, status: 'starting', startedBy,
      amountRaw: amount.toString(), createdAt: new Date(),
    };
    try {
      await this.records.create(record);
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const winner = await this.records.findOne({ _id: record._id }).lean();
      throw winner && (winner.status === 'starting' || winner.status === 'pending') ? pendingError(winner) : new AppError(409, 'withdrawal_pending', 'another request is starting or just finished this channel\'s withdrawal; list the channel to see it');
    }
    // A call that took its amount between the look above and the insert: its voucher may commit part of
    // what would be withdrawn. Calls check for a withdrawal under way before taking one, so after the insert
    // either they see it or this sees them.
    const lastNow = await vouchers.findOne({ channelId: channel._id }).sort({ _id: -1 }).lean();
    if (lastNow?._id !== last?._id || (lastNow && lastNow.status !== 'accepted')) {
      await this.records.deleteOne({ _id: record._id, status: 'starting' });
      throw new AppError(409, 'channel_busy', 'a call on this channel started just now; try again in a minute');
    }
    if (state.withdrawRequestedAt !== 0) {
      // The chain has one we have no record of (its start's process died before recording it): adopt it.
      const adopted = await this.adopt(record, channel, state);
      throw pendingError(adopted);
    }

    let sent;
    try {
      sent = await wallets.sendAsOwner(wallet, {
        to: BATCH_SETTLEMENT_ADDRESS, data: encodeFunctionData({ abi: batchSettlementAbi, functionName: 'initiateWithdraw', args: [contractChannelConfig(channel.config), amount] }),
      }, { channelWithdrawal: channel._id }, async (hash) => { await this.records.updateOne({ _id: record._id, status: 'starting' }, { $set: { startTx: hash } }); });
    } catch (err) {
      const startTx = (await this.records.findOne({ _id: record._id }).lean())?.startTx;
      // Not broadcast (the estimate reverted, no relayer): nothing happened, the id is free again. Once
      // broadcast, the round's recovery learns from the chain what became of it.
      if (!startTx) await this.records.deleteOne({ _id: record._id, status: 'starting' });
      if (err instanceof AppError) throw err;
      throw new AppError(502, 'withdraw_failed', `starting the channel's withdrawal failed: ${revertName(err)}`);
    }
    if (sent.receipt.status !== 'success') {
      await this.records.deleteOne({ _id: record._id, status: 'starting' });
      throw new AppError(502, 'withdraw_failed', `starting the channel's withdrawal reverted (${sent.receipt.transactionHash})`);
    }
    const started = await this.markPending(record, channel, sent.receipt.blockNumber, { startTx: sent.receipt.transactionHash, startFundingTx: sent.fundingTxHash });
    await this.deps.logs.record({
      orgId: channel.orgId, identityId: channel.identityId, action: 'payments.channel_withdrawal_started', category: 'payments',
      description: `Channel ${channel._id}: withdrawal of ${formatUsdc(amount)} USDC started${startedBy === 'idle_round' ? ' (the seller did not refund the idle channel)' : ''}; it can be finalized at ${started.finalizableAt!.toISOString()}`,
      targetType: 'channel', targetId: channel._id,
      metadata: { txHash: sent.receipt.transactionHash, fundingTxHash: sent.fundingTxHash, amountUsdcRaw: amount.toString(), finalizableAt: started.finalizableAt!.toISOString(), startedBy },
    });
    return { ok: true, channelId: channel._id, ...presentWithdrawal(started) };
  }

  /**
   * One round's share (the caller holds the round: one process): finalizes every pending withdrawal whose
   * delay has passed on the chain's clock, and settles starts whose process died. Returns how many finished.
   */
  async finishDue(): Promise<number> {
    await this.recoverStale();
    // Each network's clock (a network whose node does not answer finalizes nothing this round).
    const clocks = new Map((await Promise.all(this.deps.wallets.everywhere.map(async (w) => {
      const chain = w.requireChain();
      const block = await chain.publicClient.getBlock().catch(() => undefined);
      return block ? [[chain.chainId, Number(block.timestamp) * 1000] as const] : [];
    }))).flat());
    if (clocks.size === 0) throw new Error('no network\'s node answered for its time: channel withdrawals wait for the next round');
    const latest = Math.max(...clocks.values());
    const due = await this.records.find({ status: 'pending', finalizableAt: { $lte: new Date(latest) } }).sort({ finalizableAt: 1 }).limit(FINALIZE_PER_ROUND).lean();
    let finished = 0;
    const failed: string[] = [];
    for (const withdrawal of due) {
      // One that fails (a node error, no relayer now) waits for the next round; the others go on.
      try {
        if (await this.finalize(withdrawal, clocks)) finished++;
      } catch (err) {
        failed.push(`${withdrawal.channelId}: ${(err as Error).message}`);
      }
    }
    if (failed.length > 0) throw new Error(`finalizing ${failed.length} channel withdrawal(s) failed; the next round tries again: ${failed.join('; ')}`.slice(0, 2000));
    return finished;
  }

  /** Finalizes a withdrawal due on its channel's chain (`clocks`: each chain's time, by chain id); false: not due there, or its channel is gone. */
  private async finalize(withdrawal: ChannelWithdrawalDoc, clocks: ReadonlyMap<number, number>): Promise<boolean> {
    const { channels, logs } = this.deps;
    const channel = await channels.findOne({ _id: withdrawal.channelId }).lean();
    if (!channel || withdrawal.finalizableAt!.getTime() > (clocks.get(channel.chainId) ?? 0)) return false;
    const wallets = walletsOn(this.deps.wallets, channel);
    const wallet = await wallets.find(channel.identityId);
    if (!wallet) return false;
    const client = wallets.requireChain().publicClient;
    const state = await readChannelState(client, channel._id as Hex);
    if (state.withdrawRequestedAt === 0) {
      await this.closeGone(withdrawal, client);
      return true;
    }
    const sent = await wallets.sendAsOwner(wallet, {
      to: BATCH_SETTLEMENT_ADDRESS, data: encodeFunctionData({ abi: batchSettlementAbi, functionName: 'finalizeWithdraw', args: [contractChannelConfig(channel.config)] }),
    }, { channelWithdrawalFinalize: channel._id });
    if (sent.receipt.status !== 'success') throw new Error(`finalizing the withdrawal of channel ${channel._id} reverted (${sent.receipt.transactionHash})`);
    // What the chain paid out (the seller's claims since the start are not the wallet's).
    const withdrawn = withdrawnIn(sent.receipt, channel._id) ?? 0n;
    await this.records.updateOne({ _id: withdrawal._id, status: 'pending' }, {
      $set: { status: 'finalized', finalizeTx: sent.receipt.transactionHash, finalizeFundingTx: sent.fundingTxHash, withdrawnRaw: withdrawn.toString(), finalizedAt: new Date() },
    });
    await logs.record({
      orgId: channel.orgId, identityId: channel.identityId, action: 'payments.channel_withdrawn', category: 'payments',
      description: `Channel ${channel._id}: ${formatUsdc(withdrawn)} USDC came back to the wallet (timed withdrawal of ${formatUsdc(BigInt(withdrawal.amountRaw))} USDC finalized)`,
      targetType: 'channel', targetId: channel._id,
      metadata: { txHash: sent.receipt.transactionHash, fundingTxHash: sent.fundingTxHash, withdrawnUsdcRaw: withdrawn.toString(), requestedUsdcRaw: withdrawal.amountRaw },
    });
    return true;
  }

  /** Starts left `starting` by a process that died: the chain says whether the start went through. */
  private async recoverStale(): Promise<void> {
    const stale = await this.records.find({ status: 'starting', createdAt: { $lt: new Date(Date.now() - STALE_START_MS) } }).limit(FINALIZE_PER_ROUND).lean();
    for (const record of stale) {
      const channel = await this.deps.channels.findOne({ _id: record.channelId }).lean();
      if (!channel) continue;
      const state = await readChannelState(chainOf(this.deps.wallets, channel).publicClient, channel._id as Hex);
      if (state.withdrawRequestedAt !== 0) await this.adopt(record, channel, state);
      else await this.records.deleteOne({ _id: record._id, status: 'starting' });
    }
  }

  /** A start the chain has (its transaction, if we know it, or one we did not record): pending from the chain's time. */
  private async adopt(record: ChannelWithdrawalDoc, channel: BuyerChannelDoc, state: ChannelState): Promise<ChannelWithdrawalDoc> {
    const client = chainOf(this.deps.wallets, channel).publicClient;
    const receipt = record.startTx ? await client.getTransactionReceipt({ hash: record.startTx as Hex }).catch(() => undefined) : undefined;
    const [amount] = await client.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'pendingWithdrawals', args: [channel._id as Hex] });
    await this.records.updateOne({ _id: record._id, status: 'starting' }, { $set: { amountRaw: amount.toString() } });
    return this.markPending({ ...record, amountRaw: amount.toString() }, channel, receipt?.blockNumber, receipt ? { startTx: receipt.transactionHash } : {}, state.withdrawRequestedAt);
  }

  private async markPending(record: ChannelWithdrawalDoc, channel: BuyerChannelDoc, block: bigint | undefined, sent: { startTx?: string; startFundingTx?: string | null }, startedAtSeconds?: number): Promise<ChannelWithdrawalDoc> {
    const seconds = startedAtSeconds ?? (await readChannelState(chainOf(this.deps.wallets, channel).publicClient, channel._id as Hex)).withdrawRequestedAt;
    const startedAt = new Date(seconds * 1000);
    const finalizableAt = new Date((seconds + channel.config.withdrawDelay) * 1000);
    const update = { status: 'pending' as const, startedAt, finalizableAt, ...(block !== undefined ? { startBlock: Number(block) } : {}), ...sent };
    await this.records.updateOne({ _id: record._id, status: 'starting' }, { $set: update });
    return { ...record, ...update };
  }

  /**
   * A pending withdrawal the chain no longer has: finalized by a process that died before recording it
   * (its WithdrawFinalized event says so), or ended by the seller's cooperative refund of the same escrow.
   */
  private async closeGone(withdrawal: ChannelWithdrawalDoc, client: PublicClient): Promise<void> {
    const events = await client.getContractEvents({
      address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, eventName: 'WithdrawFinalized', args: { channelId: withdrawal.channelId as Hex },
      fromBlock: BigInt(withdrawal.startBlock ?? 0),
    });
    const finalized = events.at(-1);
    const closed = await this.records.updateOne({ _id: withdrawal._id, status: 'pending' }, {
      $set: finalized
        ? { status: 'finalized', finalizeTx: finalized.transactionHash, withdrawnRaw: finalized.args.amount!.toString(), finalizedAt: new Date() }
        : { status: 'ended', finalizedAt: new Date() },
    });
    if (closed.modifiedCount !== 1) return; // another process closed it
    const owner = { orgId: withdrawal.orgId, identityId: withdrawal.identityId, category: 'payments' as const, targetType: 'channel', targetId: withdrawal.channelId };
    if (finalized) {
      await this.deps.logs.record({
        ...owner, action: 'payments.channel_withdrawn', description: `Channel ${withdrawal.channelId}: ${formatUsdc(finalized.args.amount!)} USDC came back to the wallet (timed withdrawal finalized)`,
        metadata: { txHash: finalized.transactionHash, fundingTxHash: null, withdrawnUsdcRaw: finalized.args.amount!.toString(), requestedUsdcRaw: withdrawal.amountRaw },
      });
    } else {
      await this.deps.logs.record({
        ...owner, action: 'payments.channel_withdrawal_ended', description: `Channel ${withdrawal.channelId}: the seller refunded the channel, which ended its pending withdrawal`,
        metadata: { requestedUsdcRaw: withdrawal.amountRaw },
      });
    }
  }
}

/** The wallets on the chain a channel lives on (503: this backend no longer pays on that network). */
export function walletsOn(wallets: WalletService, channel: Pick<BuyerChannelDoc, 'chainId'>): WalletService {
  const on = wallets.on(`eip155:${channel.chainId}`);
  if (!on) throw new AppError(503, 'wallet_unavailable', `this channel is on eip155:${channel.chainId}, where this backend's wallets no longer pay`);
  return on;
}

const chainOf = (wallets: WalletService, channel: Pick<BuyerChannelDoc, 'chainId'>) => walletsOn(wallets, channel).requireChain();

const pendingError = (w: ChannelWithdrawalDoc) => new AppError(409, 'withdrawal_pending',
  w.finalizableAt ? `a withdrawal of this channel is already pending; it can be finalized at ${w.finalizableAt.toISOString()}` : 'a withdrawal of this channel is being started',
  { withdrawal: presentWithdrawal(w) });

/** The WithdrawFinalized amount of this channel in a receipt. */
function withdrawnIn(receipt: TransactionReceipt, channelId: string): bigint | undefined {
  for (const log of receipt.logs) {
    if (log.address.toLowerCase() !== BATCH_SETTLEMENT_ADDRESS.toLowerCase()) continue;
    try {
      const event = decodeEventLog({ abi: batchSettlementAbi, data: log.data, topics: log.topics });
      if (event.eventName === 'WithdrawFinalized' && event.args.channelId.toLowerCase() === channelId) return event.args.amount;
    } catch { /* another event of the contract's */ }
  }
  return undefined;
}
