import { getAddress, type Address, type Hex } from 'viem';
import { Schema, type Connection, type Model } from 'mongoose';
import type { ActivityLog } from '../../../../platform/activity-log.js';
import { isDuplicateKey } from '../../../../platform/errors.js';
import { newId } from '../../../../platform/ids.js';
import { channelIdOf, readChannelState, readChannelStates, type ChannelConfig, type ChannelState } from '../../../../payments/schemes/batch-settlement/evm/chain.js';
import type { ChainService } from '../../../../chain/chain-service.js';
import { formatUsdc } from 'agentgate-x402-wire';
import type { WalletService } from '../../../../wallet/wallet-service.js';
import type { WalletDoc } from '../../../../wallet/wallet-model.js';
import type { MandateOwner, MandateService } from '../../../mandate-service.js';
import type { PayRefusal } from '../../../pay-result.js';
import { paymentHeaderFor, readChallenge, readChannelRefusal, readSettlement, type Offer } from '../../../challenge.js';
import type { OutgoingPaymentDoc } from '../../../outgoing-payment-model.js';
import { availableOf, buyerChannelSchema, buyerVoucherId, buyerVoucherSchema, chargedTotalOf, commitsOf, signedHighOf, type BuyerChannelDoc, type BuyerVoucherDoc } from './records.js';
import type { Paid, PayCall, PayerDeps, SchemePayer } from '../../payer.js';
import { contentOf, refuse, settlementFailure, type PayFetch } from '../../../seller-answer.js';
import { startRounds } from '../../../../platform/rounds.js';
import { Turns } from '../../../../platform/turns.js';
import { signChannelDeposit, type SignedDeposit } from './deposit.js';
import { AppError } from '../../../../platform/errors.js';
import { ChannelWithdrawals, presentWithdrawal, walletsOn } from './withdrawal.js';

/** A new channel's deposit covers this many calls at this call's price (less when the mandate or the wallet allows less). */
export const DEPOSIT_CALLS = 10n;
/** Channels of one wallet and seller have one config: the official client's default salt. */
const CHANNEL_SALT: Hex = `0x${'0'.repeat(64)}`;
/** A call's voucher still `pending` after this long lost its process (a paid fetch gives up after 20 s). */
const STALE_PENDING_MS = 60_000;
/** How long a call waits for the channel's previous call (in another process) before refusing. */
const TURN_WAIT_MS = 45_000;
/** A seller that refused an idle channel's refund request is asked again after this long. */
const REFUND_REFUSED_RETRY_MS = 24 * 3_600_000;
/** Idle channels asked per round (the rest wait for the next round). */
const IDLE_REFUNDS_PER_ROUND = 100;

/** Resyncs from the seller's 402 (or waits for its hold on the channel) a call makes before giving up. */
const MAX_ATTEMPTS = 3;

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const MISMATCH = new Set(['invalid_batch_settlement_evm_cumulative_amount_mismatch', 'invalid_batch_settlement_evm_cumulative_below_claimed']);
const BUSY = 'invalid_batch_settlement_evm_channel_busy';

/** A cooperative refund's outcome: what came back to the wallet, in which transaction. */
export interface ChannelRefund { ok: true; channelId: string; refundedUsdc: string; txHash: string | null; balanceUsdc: string }

/** A call on a channel (payer.ts). */
type ChannelCall = PayCall<'batch-settlement'>;

/**
 * Pays x402 `batch-settlement` offers from an identity's wallet: the first call deposits into a channel
 * (ERC-3009 from the smart account, as its exact payments are signed, or Permit2 when the seller asks for
 * it: deposit.ts) with its voucher, later calls send a
 * cumulative voucher only (signed by the owner key, the channel's payerAuthorizer: nothing is sent on
 * chain), a call the balance does not cover tops the channel up. The channel's state is in the database,
 * not a process's memory: each call takes the channel's next turn by a unique insert, one call at a time
 * per channel (the seller takes them in order), and the balance is the chain's. A voucher signs the
 * channel's charged total plus the call's price (a usage-priced route's maximum: the seller says what it
 * charged, and the next voucher builds on that). The mandate reserves each call's price before its
 * voucher is signed and keeps what the voucher commits (records.ts); a deposit is not spending, but
 * is sized within what the mandate still allows today.
 */
export class BatchSettlementPayer implements SchemePayer<'batch-settlement'> {
  readonly channels: Model<BuyerChannelDoc>;
  readonly vouchers: Model<BuyerVoucherDoc>;
  /** Timed withdrawals of channels whose seller does not refund (withdrawal.ts). */
  readonly withdrawals: ChannelWithdrawals;
  private readonly rounds: Model<{ _id: string; at: Date }>;
  /** This process's calls on a channel, one after the other (the database orders them across processes). */
  private readonly turns = new Turns();

  readonly wallets: WalletService;
  private readonly mandates: MandateService;
  private readonly logs: ActivityLog;
  private readonly outgoing: Model<OutgoingPaymentDoc>;
  private readonly fetch: PayFetch;

  constructor(conn: Connection, deps: PayerDeps) {
    const { wallets, mandates, logs, outgoing, fetch } = deps;
    this.wallets = wallets;
    this.mandates = mandates;
    this.logs = logs;
    this.outgoing = outgoing;
    this.fetch = fetch;
    this.channels = conn.models.BuyerChannel ?? conn.model<BuyerChannelDoc>('BuyerChannel', buyerChannelSchema, 'buyer_channels');
    this.vouchers = conn.models.BuyerVoucher ?? conn.model<BuyerVoucherDoc>('BuyerVoucher', buyerVoucherSchema, 'buyer_channel_vouchers');
    this.withdrawals = new ChannelWithdrawals(conn, { wallets, logs, channels: this.channels, vouchers: this.vouchers });
    this.rounds = (conn.models.BuyerChannelSweep as Model<{ _id: string; at: Date }>) ?? conn.model('BuyerChannelSweep', new Schema<{ _id: string; at: Date }>({ _id: String, at: Date }, { versionKey: false }), 'buyer_channel_sweeps');
  }

  /** The wallet's channel for this offer on this chain (the same config, so the same channel, every call). */
  channelFor(wallet: WalletDoc, offer: ChannelCall['offer'], chain: ChainService): { config: ChannelConfig; channelId: string } {
    const config: ChannelConfig = {
      payer: getAddress(wallet.address), payerAuthorizer: getAddress(wallet.ownerAddress), receiver: getAddress(offer.requirement.payTo),
      receiverAuthorizer: getAddress(offer.requirement.extra.receiverAuthorizer), token: chain.usdc.address,
      withdrawDelay: offer.requirement.extra.withdrawDelay ?? 900, salt: CHANNEL_SALT,
    };
    return { config, channelId: channelIdOf(config, chain.chainId).toLowerCase() };
  }

  /**
   * Whether the wallet's channel for this offer already holds `amount` beyond what its calls committed (a
   * call then needs no deposit, so no balance in the wallet); false when there is none, or its chain does not answer.
   */
  async covers(wallet: WalletDoc, offer: ChannelCall['offer'], wallets: WalletService, amount: bigint): Promise<boolean> {
    const chain = wallets.requireChain();
    const { channelId } = this.channelFor(wallet, offer, chain);
    if (!(await this.channels.exists({ _id: channelId }))) return false;
    const [last, state] = await Promise.all([this.vouchers.findOne({ channelId }).sort({ _id: -1 }).lean(), readChannelState(chain.publicClient, channelId as Hex).catch(() => undefined)]);
    return !!state && state.withdrawRequestedAt === 0 && availableOf(state.balance, last ? chargedTotalOf(last) : 0n, state.totalClaimed) >= amount;
  }

  async pay(call: ChannelCall): Promise<Paid | PayRefusal> {
    // The wallets on the offer's network (pay-service.ts chose it): the channel lives on its chain.
    const chain = call.wallets.requireChain();
    const { config, channelId } = this.channelFor(call.wallet, call.offer, chain);
    await this.channels.create({
      _id: channelId, orgId: call.owner.orgId, identityId: call.owner.identityId, walletAddress: call.wallet.address, network: chain.network,
      chainId: chain.chainId, config, resourceUrl: call.resourceUrl, requestUrl: call.url, createdAt: new Date(),
    }).catch((err) => { if (!isDuplicateKey(err)) throw err; });
    return this.turns.run(channelId, () => this.payInTurn(call, config, channelId));
  }

  private async payInTurn(call: ChannelCall, config: ChannelConfig, channelId: string) {
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.attempt(call, config, channelId);
      if (outcome.kind === 'done') return outcome.result;
      if (attempt >= MAX_ATTEMPTS) {
        // Every attempt was refused and its amount dropped: nothing was accepted, the price goes back.
        call.state.hold = 'done';
        await this.mandates.release(call.reservation);
        return refuse('settle_failed', outcome.reason);
      }
      // The seller's hold on the channel (another client's call) ends with its call: wait a little.
      if (outcome.kind === 'busy') await pause(100 * attempt);
    }
  }

  /**
   * Takes the channel's next turn, by a unique insert of its sequence number: the voucher signs the
   * channel's charged total after the last call plus this call's price. A call still out on the channel
   * (pending, in any process) is waited for: its answer decides the base.
   */
  private async takeAmount(channelId: string, call: ChannelCall, paymentId: string): Promise<{ base: bigint; cumulative: bigint; commits: bigint; voucherId: string } | undefined> {
    const deadline = Date.now() + TURN_WAIT_MS;
    for (let wait = 5; Date.now() < deadline; wait = Math.min(200, wait * 2)) {
      const last = await this.vouchers.findOne({ channelId }).sort({ _id: -1 }).lean();
      if (last?.status === 'pending') {
        if (Date.now() - last.createdAt.getTime() > STALE_PENDING_MS) {
          // Its process died with the call out: it may have been accepted; the seller's 402 says if not.
          await this.vouchers.updateOne({ _id: last._id, status: 'pending' }, { $set: { status: 'unknown' } });
        } else {
          await pause(wait);
        }
        continue;
      }
      const base = last ? chargedTotalOf(last) : 0n;
      const cumulative = base + call.amount;
      const highBefore = last ? signedHighOf(last) : 0n;
      const signedHigh = cumulative > highBefore ? cumulative : highBefore;
      const seq = (last?.seq ?? 0) + 1;
      const voucherId = buyerVoucherId(channelId, seq);
      try {
        await this.vouchers.create({
          _id: voucherId, channelId, identityId: call.owner.identityId, seq, cumulative: cumulative.toString(), price: call.amount.toString(),
          signedHigh: signedHigh.toString(), commits: (signedHigh - highBefore).toString(), status: 'pending', paymentId, reservation: call.reservation, createdAt: new Date(),
        });
        return { base, cumulative, commits: signedHigh - highBefore, voucherId };
      } catch (err) {
        if (!isDuplicateKey(err)) throw err; // another call took this turn: read again
      }
    }
    return undefined;
  }

  private async attempt(call: ChannelCall, config: ChannelConfig, channelId: string): Promise<{ kind: 'done'; result: PayRefusal | Paid } | { kind: 'retry' | 'busy'; reason: string }> {
    const { owner, wallet, wallets, offer, amount, reservation, state } = call;
    const chain = wallets.requireChain();
    const paymentId = newId('pay');
    const taken = await this.takeAmount(channelId, call, paymentId);
    if (!taken) return { kind: 'done', result: refuse('settle_failed', `another call on the channel ${channelId} has been out for ${TURN_WAIT_MS / 1000} s; try again`) };
    const { base, cumulative, commits, voucherId } = taken;
    const dropAmount = () => this.vouchers.deleteOne({ _id: voucherId, status: { $in: ['pending', 'unknown'] } });
    // No voucher or deposit on a channel being withdrawn (the seller refuses them; a deposit would only be
    // withdrawn with it). Asked once the turn is taken: a start checks the calls after its own insert, so
    // a call and a start in two processes never both go ahead.
    const withdrawing = await this.withdrawals.underway({ _id: channelId, chainId: chain.chainId });
    if (withdrawing) {
      await dropAmount();
      const when = withdrawing.finalizableAt ? `; it finishes after ${withdrawing.finalizableAt.toISOString()}, then the channel takes deposits again` : '';
      return { kind: 'done', result: refuse('channel_withdrawal_pending', `the wallet is withdrawing its channel ${channelId} with this seller${when}`) };
    }

    // The balance is the chain's (a deposit made by an earlier call, a refund the seller made since).
    const onChain = await readChannelState(chain.publicClient, channelId as Hex);
    const needed = cumulative > onChain.balance ? cumulative - onChain.balance : 0n;
    let deposit = 0n;
    if (needed > 0n) {
      const [walletBalance, usage] = await Promise.all([wallets.balance(wallet.address as Address), this.mandates.usage(call.mandate)]);
      // What today's cap still allows, this call's price included (it was reserved already).
      const allowedToday = BigInt(Math.max(0, call.mandate.dailyCapAtomic - usage.spentToday)) + amount;
      const target = DEPOSIT_CALLS * amount;
      const ceiling = [target, allowedToday, walletBalance].reduce((a, b) => (a < b ? a : b));
      deposit = ceiling > needed ? ceiling : needed;
      if (needed > allowedToday) {
        // Only when the channel lost balance to something else (a withdrawal): the deposit must fit the mandate too.
        await dropAmount();
        return { kind: 'done', result: refuse('mandate_daily_cap_exceeded', `the channel needs a deposit of ${formatUsdc(needed)} USDC; the mandate allows ${formatUsdc(allowedToday)} USDC more today`) };
      }
      if (walletBalance < needed) {
        await dropAmount();
        return { kind: 'done', result: refuse('balance_insufficient', `the wallet ${wallet.address} holds ${formatUsdc(walletBalance)} USDC; the channel needs a deposit of ${formatUsdc(needed)} USDC`) };
      }
    }

    const record: OutgoingPaymentDoc = {
      _id: paymentId, orgId: owner.orgId, identityId: owner.identityId, direction: 'out', mandateId: reservation.mandateId,
      network: chain.network, payerAddress: getAddress(wallet.address), recipientAddress: getAddress(call.payTo), amountUsdcRaw: amount.toString(), scheme: 'batch-settlement',
      channel: { channelId, cumulativeUsdcRaw: cumulative.toString(), ...(deposit > 0n ? { depositUsdcRaw: deposit.toString() } : {}) },
      resourceUrl: call.resourceUrl, requestUrl: call.url, method: call.method, x402Version: 2, authorizationNonce: voucherId,
      status: 'pending', createdAt: new Date(),
    };
    await this.outgoing.create(record);
    const voucher = { channelId, maxClaimableAmount: cumulative.toString(), signature: await wallets.signVoucher(wallet, channelId as Hex, cumulative) };
    let signedDeposit: SignedDeposit | undefined;
    let payload: Record<string, unknown> = { type: 'voucher', channelConfig: config, voucher };
    if (deposit > 0n) {
      const terms = { method: offer.requirement.extra.assetTransferMethod ?? 'eip3009', channelId: channelId as Hex, amount: deposit, maxTimeoutSeconds: offer.requirement.maxTimeoutSeconds } as const;
      signedDeposit = await signChannelDeposit(wallets, wallet, terms).catch(async (err: unknown) => {
        // Nothing was sent (a Permit2 approval the relayer could not send): the amount is the next call's.
        await dropAmount();
        await this.outgoing.updateOne({ _id: record._id }, { $set: { status: 'failed', failureReason: `the deposit could not be signed: ${(err as Error).message}`.slice(0, 500) } });
        throw err;
      });
      payload = { ...payload, type: 'deposit', deposit: { amount: deposit.toString(), authorization: signedDeposit.authorization } };
    }
    state.hold = 'in_flight';
    const payment = paymentHeaderFor(offer, payload);
    const paid = await this.fetch(call.url, { ...call.request, headers: { ...call.request.headers, [payment.name]: payment.value } });
    const settlement = paid.ok ? readSettlement(paid.response) : undefined;
    // The seller answered with success: it holds this voucher and may claim up to it, whatever else it says.
    const accepted = settlement?.success === true;
    const txHash = deposit > 0n && settlement?.transaction ? settlement.transaction : undefined;

    if (!paid.ok || (!settlement && paid.response.status < 300)) {
      // No answer, or an answer that says neither (served without a settlement header): the voucher may have
      // been accepted. Its amount stays counted and its record pending; the next call assumes it was, and
      // learns which from the seller (settleUnknown, resync).
      const unanswered = !paid.ok ? paid.message : `the seller answered ${paid.response.status} without saying whether it took the voucher`;
      await this.vouchers.updateOne({ _id: voucherId, status: 'pending' }, { $set: { status: 'unknown' } });
      await this.outgoing.updateOne({ _id: record._id }, { $set: { failureReason: unanswered, ...(paid.ok ? { responseStatus: paid.response.status } : {}) } });
      state.hold = 'done';
      return { kind: 'done', result: paid.ok ? refuse('settle_failed', unanswered) : paid };
    }
    if (!accepted) {
      // Refused (or the handler failed and the seller released the call): nothing is charged, and this
      // amount is the next call's. A deposit that did not go through can never go through later.
      await signedDeposit?.revokeIfUnused();
      await dropAmount();
      const refusal = paid.response.status === 402 ? readChannelRefusal(paid.response) : undefined;
      const reason = refusal?.error ? `the seller refused the voucher: ${refusal.error}` : settlementFailure(paid.response, settlement);
      await this.outgoing.updateOne({ _id: record._id }, { $set: { status: 'failed', failureReason: reason, responseStatus: paid.response.status } });
      if (refusal?.error === BUSY) return { kind: 'busy', reason };
      if (refusal?.error && MISMATCH.has(refusal.error) && refusal.channelId === channelId && refusal.charged !== undefined && await this.resync(owner, channelId, refusal.charged)) {
        return { kind: 'retry', reason };
      }
      state.hold = 'done';
      await this.mandates.release(reservation);
      await this.logs.record({ ...owner, action: 'payments.pay_failed', category: 'payments', severity: 'warning', status: 'failure', description: `Channel payment of ${formatUsdc(amount)} USDC to ${call.resourceUrl} was not accepted: ${reason}`.slice(0, 500), targetType: 'payment', targetId: record._id });
      return { kind: 'done', result: refuse('settle_failed', reason) };
    }

    // A route priced by usage charges at most the voucher's price and says what (the charged total, on
    // which the next voucher builds); a seller that says nothing, or something outside that, charged it all.
    const said = settlement.channel?.chargedCumulativeAmount !== undefined ? BigInt(settlement.channel.chargedCumulativeAmount) : undefined;
    const chargedTotal = said !== undefined && said >= base && said <= cumulative ? said : cumulative;
    const charged = chargedTotal - base;
    await this.vouchers.updateOne({ _id: voucherId }, { $set: { status: 'accepted', chargedTotal: chargedTotal.toString() } });
    await this.settleUnknown(channelId, voucherId);
    state.hold = 'done';
    // The mandate counts what the voucher commits, not the seller's word on what it charged: the seller
    // may claim any voucher it holds, so the wallet is bound to the highest amount it signed.
    const mandate = await this.mandates.commit(reservation, commits);
    await this.outgoing.updateOne({ _id: record._id }, {
      $set: {
        status: 'settled', settledAt: new Date(), amountUsdcRaw: charged.toString(), channel: { ...record.channel!, cumulativeUsdcRaw: chargedTotal.toString() },
        ...(txHash ? { txHash } : {}), responseStatus: paid.response.status, paymentResponse: settlement,
      },
    });
    const ofUpTo = charged < amount ? ` (of up to ${formatUsdc(amount)})` : '';
    await this.logs.record({
      ...owner, action: 'payments.paid', category: 'payments',
      description: `Paid ${formatUsdc(charged)} USDC${ofUpTo} to ${call.payTo} for ${call.resourceUrl} by a channel voucher${deposit > 0n ? ` (deposited ${formatUsdc(deposit)} USDC)` : ''}`,
      targetType: 'payment', targetId: record._id, metadata: { txHash: txHash ?? null, mandateId: reservation.mandateId, scheme: 'batch-settlement', channelId },
    });
    return {
      kind: 'done',
      result: {
        ok: true as const, paid: true as const, paymentId: record._id, ...contentOf(paid.response),
        cost: {
          ...call.cost, amountUsdc: formatUsdc(charged), amountUsdcRaw: charged.toString(), ...(charged < amount ? { maxAmountUsdc: formatUsdc(amount), maxAmountUsdcRaw: amount.toString() } : {}),
          scheme: 'batch-settlement' as const,
          channel: { channelId, cumulativeUsdc: formatUsdc(chargedTotal), signedUsdc: formatUsdc(cumulative), committedUsdc: formatUsdc(commits), depositUsdc: formatUsdc(deposit) },
        },
        txHash: txHash ?? null, payer: getAddress(wallet.address), recipient: getAddress(call.payTo), resource: call.resourceUrl,
        mandate: mandate ? await this.mandates.present(mandate) : null, paymentResponse: settlement ?? null,
      } satisfies Paid,
    };
  }

  /**
   * The seller says it has charged `charged` on the channel and our records say otherwise: the calls whose
   * answer was lost (after the last voucher we know it took) are settled from its word, in order. A lost
   * voucher built on the charged total of the moment was taken if the total went past that base (charged
   * what it went up by, at most its price); any other was refused, and goes with its call's price. Known
   * vouchers above the seller's total would mean it lost calls it charged: nothing to retry then.
   */
  private async resync(owner: MandateOwner, channelId: string, charged: bigint): Promise<boolean> {
    const vouchers = await this.vouchers.find({ channelId }).sort({ _id: 1 }).lean();
    const known = vouchers.findLastIndex((v) => v.status !== 'unknown');
    const lost = vouchers.slice(known + 1);
    let total = known >= 0 ? chargedTotalOf(vouchers[known]!) : 0n;
    if (known >= 0 && vouchers[known]!.status !== 'accepted' || total > charged) return false;
    for (const voucher of lost) {
      const base = BigInt(voucher.cumulative) - BigInt(voucher.price);
      const signed = BigInt(voucher.cumulative);
      if (base === total && charged > total) {
        total = charged < signed ? charged : signed;
        await this.settleLost(voucher, total);
        continue;
      }
      // Whoever deletes the record gives its call's price back, once.
      if ((await this.vouchers.deleteOne({ _id: voucher._id, status: 'unknown' })).deletedCount !== 1) continue;
      await this.mandates.release(voucher.reservation);
      await this.outgoing.updateOne({ _id: voucher.paymentId, status: 'pending' }, { $set: { status: 'failed', failureReason: `the seller never took this voucher (it has charged ${charged} on the channel)` } });
    }
    return total === charged || this.rebase(owner, channelId, total, charged);
  }

  /**
   * The seller says it charged more than our calls were (`total`): a voucher of ours was paid with by
   * someone else (after a call charged nothing, the next voucher is the same as the one before it, and
   * whoever saw that payment can send it). The seller may claim up to the highest amount we signed
   * whatever it says, so building on its word up to that moves no more, and the channel goes on instead
   * of refusing every later call. The activity log says so; a total above that is refused.
   */
  private async rebase(owner: MandateOwner, channelId: string, total: bigint, charged: bigint): Promise<boolean> {
    const last = await this.vouchers.findOne({ channelId }).sort({ _id: -1 }).lean();
    if (!last || last.status !== 'accepted' || charged > signedHighOf(last)) return false;
    await this.vouchers.updateOne({ _id: last._id, status: 'accepted' }, { $set: { chargedTotal: charged.toString() } });
    await this.logs.record({
      ...owner, action: 'payments.channel_overcharged', category: 'payments', severity: 'warning',
      description: `Channel ${channelId}: the seller says it has charged ${formatUsdc(charged)} USDC, ${formatUsdc(charged - total)} USDC more than this wallet's calls were charged (a voucher used twice?); later vouchers build on its total, which stays within what the wallet signed`,
      targetType: 'channel', targetId: channelId, metadata: { chargedByCalls: total.toString(), chargedBySeller: charged.toString() },
    });
    return true;
  }

  /**
   * The seller accepted the voucher `voucherId`: it takes them only in order, each on the charged total of
   * its moment, so every voucher before it whose answer was lost was taken too, charged its whole price
   * (the accepted one was built on that). Their calls are counted for good and their records settled.
   */
  private async settleUnknown(channelId: string, voucherId: string): Promise<void> {
    const before = await this.vouchers.find({ channelId, status: 'unknown', _id: { $lt: voucherId } }).lean();
    for (const found of before) await this.settleLost(found, BigInt(found.cumulative));
  }

  /** A voucher whose answer was lost was taken: the channel's total after it is `chargedTotal`. */
  private async settleLost(voucher: BuyerVoucherDoc, chargedTotal: bigint): Promise<void> {
    const { modifiedCount } = await this.vouchers.updateOne({ _id: voucher._id, status: 'unknown' }, { $set: { status: 'accepted', chargedTotal: chargedTotal.toString() } });
    if (modifiedCount !== 1) return; // another call settled it
    await this.mandates.commit(voucher.reservation, commitsOf(voucher));
    const charged = chargedTotal - (BigInt(voucher.cumulative) - BigInt(voucher.price));
    const record = await this.outgoing.findOne({ _id: voucher.paymentId }).lean();
    await this.outgoing.updateOne({ _id: voucher.paymentId, status: 'pending' }, {
      $set: { status: 'settled', settledAt: new Date(), amountUsdcRaw: charged.toString(), ...(record?.channel ? { channel: { ...record.channel, cumulativeUsdcRaw: chargedTotal.toString() } } : {}) },
    });
  }

  /**
   * Asks the seller to give the channel's remainder back (the scheme's cooperative refund, as the official
   * client asks it): the route's 402 is fetched for its channel offer, and a `refund` payload with a
   * voucher for what the calls charged is sent to it; the seller's facilitator claims that and refunds the
   * rest in one transaction. Not while a call is out on the channel. What moved is read from the chain.
   */
  async refund(owner: MandateOwner, channelId: string): Promise<ChannelRefund | PayRefusal | undefined> {
    const channel = await this.channels.findOne({ _id: channelId.toLowerCase(), identityId: owner.identityId }).lean();
    if (!channel) return undefined;
    // The channel's own chain: its state is read, and its voucher signed, there.
    const wallets = walletsOn(this.wallets, channel);
    const chain = wallets.requireChain();
    const wallet = await wallets.find(owner.identityId);
    if (!wallet) return undefined;
    const last = await this.vouchers.findOne({ channelId: channel._id }).sort({ _id: -1 }).lean();
    if (last && last.status !== 'accepted') return refuse('settle_failed', 'a call on this channel is still out (or its answer was lost); pay once more, or try again in a minute');
    const before = await readChannelState(chain.publicClient, channel._id as Hex);
    const charged = last ? chargedTotalOf(last) : before.totalClaimed;
    if (availableOf(before.balance, charged, before.totalClaimed) === 0n) return { ok: true, channelId: channel._id, refundedUsdc: '0', txHash: null, balanceUsdc: formatUsdc(before.balance) };
    const url = channel.requestUrl ?? channel.resourceUrl;
    const probe = await this.fetch(url, { method: 'GET', headers: {} });
    if (!probe.ok) return probe;
    const challenge = probe.response.status === 402 ? readChallenge(probe.response) : undefined;
    const offer = challenge?.offers.find((o): o is Extract<Offer, { scheme: 'batch-settlement' }> => o.scheme === 'batch-settlement' && this.channelFor(wallet, o, chain).channelId === channel._id);
    if (!offer) return refuse('settle_failed', `${url} no longer offers this channel (answered ${probe.response.status})`);
    const voucher = { channelId: channel._id, maxClaimableAmount: charged.toString(), signature: await wallets.signVoucher(wallet, channel._id as Hex, charged) };
    const payment = paymentHeaderFor(offer, { type: 'refund', channelConfig: channel.config, voucher });
    const answered = await this.fetch(url, { method: 'GET', headers: { [payment.name]: payment.value } });
    if (!answered.ok) return answered;
    const settlement = readSettlement(answered.response);
    const after = await readChannelState(chain.publicClient, channel._id as Hex);
    if (settlement?.success !== true || after.balance >= before.balance) {
      const refusal = answered.response.status === 402 ? readChannelRefusal(answered.response) : undefined;
      return refuse('settle_failed', refusal?.error ? `the seller refused the refund: ${refusal.error}` : settlementFailure(answered.response, settlement));
    }
    // A claim in the same transaction raises totalClaimed; only a refund lowers the balance.
    const refunded = before.balance - after.balance;
    await this.logs.record({
      ...owner, action: 'payments.channel_refunded', category: 'payments', description: `Channel ${channel._id}: ${formatUsdc(refunded)} USDC came back to the wallet from ${url}`,
      targetType: 'channel', targetId: channel._id, metadata: { txHash: settlement.transaction ?? null },
    });
    return { ok: true, channelId: channel._id, refundedUsdc: formatUsdc(refunded), txHash: settlement.transaction || null, balanceUsdc: formatUsdc(after.balance) };
  }

  /**
   * One round of taking idle channels' remainders back (run by one process: a unique insert of the round):
   * every channel whose last call is older than `idleMs` and that holds more than its vouchers committed
   * asks its seller for the rest (refund above). A seller that refuses is asked again a day later.
   */
  async refundIdle(options: { idleMs: number; round: string }): Promise<{ refunded: number; refused: number; withdrawalsStarted: number; withdrawalsFinished: number } | undefined> {
    try {
      await this.rounds.create({ _id: `idle:${options.round}`, at: new Date() });
    } catch (err) {
      if (isDuplicateKey(err)) return undefined; // another process has this round
      throw err;
    }
    const now = Date.now();
    const due: Array<{ channel: BuyerChannelDoc; charged: bigint }> = [];
    const unread: string[] = [];
    // Every network's idle channels, each network's states read from its chain together (a network whose
    // node does not answer waits for the next round, and the round says so once the others are done).
    for (const wallets of this.wallets.everywhere) {
      const chain = wallets.requireChain();
      const channels = await this.channels.find({ chainId: chain.chainId, $or: [{ refundRefusedAt: null }, { refundRefusedAt: { $lt: new Date(now - REFUND_REFUSED_RETRY_MS) } }] } as never).lean() as BuyerChannelDoc[];
      const idle: Array<{ channel: BuyerChannelDoc; charged: bigint }> = [];
      for (const channel of channels) {
        const last = await this.vouchers.findOne({ channelId: channel._id }).sort({ _id: -1 }).lean();
        if (last?.status === 'accepted' && now - last.createdAt.getTime() >= options.idleMs) idle.push({ channel, charged: chargedTotalOf(last) });
      }
      if (idle.length === 0) continue;
      const states = await readChannelStates(chain.publicClient, idle.map((c) => c.channel._id as Hex)).catch((err: Error) => { unread.push(`${chain.caip2}: ${err.message}`); return undefined; });
      if (states) due.push(...idle.filter((c, i) => states[i]!.withdrawRequestedAt === 0 && availableOf(states[i]!.balance, c.charged, states[i]!.totalClaimed) > 0n));
    }
    const totals = { refunded: 0, refused: 0, withdrawalsStarted: 0, withdrawalsFinished: 0 };
    for (const { channel } of due.slice(0, IDLE_REFUNDS_PER_ROUND)) {
      const answer = await this.refund({ orgId: channel.orgId, identityId: channel.identityId }, channel._id).catch((err: Error) => refuse('settle_failed', err.message));
      if (answer?.ok) {
        totals.refunded++;
      } else {
        totals.refused++;
        await this.channels.updateOne({ _id: channel._id }, { $set: { refundRefusedAt: new Date() } });
        // The seller refused, is gone or no longer offers the channel: the wallet takes the rest back itself.
        if (await this.startWithdrawal(channel)) totals.withdrawalsStarted++;
      }
    }
    totals.withdrawalsFinished = await this.withdrawals.finishDue();
    if (unread.length) throw new Error(`idle channels on ${unread.length} network(s) wait for the next round (their node did not answer): ${unread.join('; ')}`.slice(0, 2000));
    return totals;
  }

  /** The idle round's withdrawal of a channel the seller did not refund; one that cannot start now is tried again when the seller is asked again. */
  private async startWithdrawal(channel: BuyerChannelDoc): Promise<boolean> {
    try {
      return Boolean(await this.withdrawals.start({ orgId: channel.orgId, identityId: channel.identityId }, channel._id, 'idle_round'));
    } catch (err) {
      if (err instanceof AppError && err.status < 500) return false; // under way already, a call out, nothing left
      throw err;
    }
  }

  /** The chain's state of each channel (in order), read together per network. */
  private async statesOf(channels: readonly BuyerChannelDoc[]): Promise<ChannelState[]> {
    const states: ChannelState[] = new Array(channels.length);
    for (const chainId of new Set(channels.map((c) => c.chainId))) {
      const indexes = channels.flatMap((c, i) => (c.chainId === chainId ? [i] : []));
      const read = await readChannelStates(walletsOn(this.wallets, { chainId }).requireChain().publicClient, indexes.map((i) => channels[i]!._id as Hex));
      indexes.forEach((index, k) => { states[index] = read[k]!; });
    }
    return states;
  }

  /** Starts the idle rounds (every process; one of them runs each round). */
  start(options: { everyMs: number; idleMs: number }, onError: (err: Error) => void): () => Promise<void> {
    return startRounds({ everyMs: options.everyMs, round: () => this.refundIdle({ idleMs: options.idleMs, round: String(Math.floor(Date.now() / options.everyMs)) }), onError });
  }

  /**
   * This identity's channels with what the chain says of them: deposited (every deposit its calls
   * brought), what the accepted vouchers charged, what was claimed, the balance left, and what came back
   * to the wallet (the seller's cooperative refund of an idle channel, or a withdrawal).
   */
  async list(owner: MandateOwner) {
    const found = await this.channels.find({ identityId: owner.identityId }).sort({ createdAt: -1, _id: -1 }).limit(100).lean();
    // A channel on a network this backend no longer pays on cannot be read from its chain: not listed.
    const channels = found.filter((c) => this.wallets.on(`eip155:${c.chainId}`));
    if (channels.length === 0) return [];
    const [states, withdrawals] = await Promise.all([this.statesOf(channels), this.withdrawals.latest(channels.map((c) => c._id))]);
    return Promise.all(channels.map(async (c, i) => {
      const state = states[i]!;
      const [calls, last] = await Promise.all([
        this.outgoing.find({ identityId: owner.identityId, 'channel.channelId': c._id, status: 'settled' } as never).lean() as unknown as Promise<OutgoingPaymentDoc[]>,
        this.vouchers.findOne({ channelId: c._id, status: 'accepted' }).sort({ _id: -1 }).lean(),
      ]);
      const deposited = calls.reduce((sum, p) => sum + BigInt(p.channel?.depositUsdcRaw ?? '0'), 0n);
      const refunded = deposited > state.balance ? deposited - state.balance : 0n;
      return {
        channelId: c._id, network: c.network, receiver: c.config.receiver, resourceUrl: c.resourceUrl, calls: calls.length,
        depositedUsdc: formatUsdc(deposited), chargedUsdc: formatUsdc(last ? chargedTotalOf(last) : 0n), claimedUsdc: formatUsdc(state.totalClaimed),
        balanceUsdc: formatUsdc(state.balance), availableUsdc: formatUsdc(availableOf(state.balance, last ? chargedTotalOf(last) : 0n, state.totalClaimed)),
        refundedUsdc: formatUsdc(refunded), withdrawalPending: state.withdrawRequestedAt !== 0, createdAt: c.createdAt.toISOString(),
        // The latest timed withdrawal the wallet started (null: none).
        withdrawal: withdrawals.has(c._id) ? presentWithdrawal(withdrawals.get(c._id)!) : null,
      };
    }));
  }
}
