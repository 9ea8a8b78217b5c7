import type { Model } from 'mongoose';
import { isAddressEqual, type Address } from 'viem';
import { channelIdOf, type ChannelConfig } from './chain.js';
import { notFound } from '../../../../platform/errors.js';
import { afterCursor, pageOf, type Cursor } from '../../../../platform/pagination.js';
import type { ChannelActionDoc, WireClaim } from './settle.js';
import type { ChannelDoc, VoucherDoc } from './records.js';
import { callIdOf } from './call-id.js';
import { chargedCumulativeOf } from './voucher-amounts.js';
import { seqOf, voucherId } from './voucher-sequence.js';
import { findByIds } from '../../../../platform/find-by-ids.js';
import type { VoucherBook } from './voucher-book.js';

// What people see of channels sold through our middleware: each channel with what it holds, and each paid
// call (one accepted voucher) as a record with its signed receipt and, once claimed, the claim that carried
// it. Nothing here writes: a call's claim is derived when it is read, from the claim (and refund) actions
// the sweep recorded with their transactions (settle.ts). A voucher is never updated (a held call's
// capture is a document of its own, captures.ts), so the background sweep and a reader never race over it.
//
// A call with cumulative amount C was claimed by the first successful action that brought the channel's
// claimed total to C or above: claims only go up, so that is the transaction that moved its value.

/** One action's claimed total for one channel: what the call records say "claimed in". */
export interface ClaimCoverage {
  actionId: string;
  kind: 'claim' | 'refund';
  /** The channel's claimed total after this action (atomic USDC). */
  total: bigint;
  /** The claim transaction; null when the action found its rows claimed already and no transaction was named. */
  txHash: string | null;
  /** When the outcome was recorded. */
  claimedAt: Date;
}

export type ChannelCallStatus = 'held' | 'accepted' | 'claimed';

/** A paid call: its voucher, its channel, and the claim that carried its value, if any yet. */
export interface ChannelCall {
  callId: string;
  voucher: VoucherDoc;
  channel: ChannelDoc;
  status: ChannelCallStatus;
  claim?: ClaimCoverage;
}

export type ChannelState = 'open' | 'withdrawing' | 'refunded';

/** A channel with its sums, as the list, the console and the CLI show it. */
export interface ChannelSummary {
  channel: ChannelDoc;
  /** Deposits sent through agentgate (a deposit made on chain elsewhere shows in `balance` only). */
  depositedUsdcRaw: string;
  /** What the channel has charged after its last captured voucher: what the paid calls add up to. */
  acceptedUsdcRaw: string;
  claimedUsdcRaw: string;
  refundedUsdcRaw: string;
  /** Paid calls (captured vouchers). */
  callCount: number;
  lastCallAt: Date | null;
  state: ChannelState;
}

/** The number in a voucher id of this channel; NaN for another channel's id. */
const numberIn = (channelId: string, id: string) => (id.startsWith(`${channelId}:`) ? seqOf(id) : Number.NaN);

/** The channel's claimed total after each successful claim or refund of it, lowest first (ties: the earliest). */
export function coveragesOf(channel: Pick<ChannelDoc, '_id' | 'payer' | 'chainId'>, actions: ChannelActionDoc[]): ClaimCoverage[] {
  const coverages: ClaimCoverage[] = [];
  for (const action of actions) {
    if (action.status !== 'succeeded' || (action.kind !== 'claim' && action.kind !== 'refund')) continue;
    const rows = ((action.work as { claims?: WireClaim[] }).claims ?? [])
      // The payer first (cheap), then the channel id proper (a hash of the whole config).
      .filter((row) => isAddressEqual(row.voucher.channel.payer as Address, channel.payer as Address) && channelIdOf(row.voucher.channel as ChannelConfig, channel.chainId).toLowerCase() === channel._id);
    if (rows.length === 0) continue;
    const total = rows.reduce((max, row) => (BigInt(row.totalClaimed) > max ? BigInt(row.totalClaimed) : max), 0n);
    const tx = typeof action.answer?.transaction === 'string' && action.answer.transaction ? action.answer.transaction : action.txHash;
    coverages.push({ actionId: action._id, kind: action.kind, total, txHash: tx || null, claimedAt: action.updatedAt });
  }
  coverages.sort((a, b) => (a.total === b.total ? a.claimedAt.getTime() - b.claimedAt.getTime() : a.total < b.total ? -1 : 1));
  // Of two actions reaching the same total, the first moved the value (the second found it claimed).
  return coverages.filter((c, i) => i === 0 || coverages[i - 1]!.total !== c.total);
}

/** The claim that carried a call of cumulative amount `cumulative`, if one did. */
export const coverageFor = (coverages: ClaimCoverage[], cumulative: bigint) => coverages.find((c) => c.total >= cumulative);

export class ChannelCalls {
  constructor(
    /** The voucher book: its records, and the newest voucher of a channel as a paid call finds it. */
    private readonly book: Pick<VoucherBook, 'channels' | 'vouchers' | 'captures' | 'newestNumber' | 'lastCaptured'>,
    private readonly actions: () => Model<ChannelActionDoc>,
  ) {}

  /**
   * The org's vouchers of a channel numbered `from` down to `to`, newest first. Read by `_id` lookups,
   * never by a range or a sort on `_id`: FerretDB answers those by scanning every channel's vouchers, so a
   * claim of 64 channels read the whole collection 64 times and held a stopping process for minutes.
   */
  private async numbered(orgId: string, channelId: string, from: number, to: number): Promise<VoucherDoc[]> {
    const ids: string[] = [];
    for (let seq = from; seq >= Math.max(1, to); seq--) ids.push(voucherId(channelId, seq));
    const found = await findByIds(ids, (id) => this.book.vouchers.findById(id).lean());
    return found.filter((voucher) => voucher.orgId === orgId);
  }


  /** The channel's successful actions (deposits, claims, refunds), read by the channel id index. */
  private actionsOf(channelId: string): Promise<ChannelActionDoc[]> {
    return this.actions().find({ channelIds: channelId, status: 'succeeded' }).lean();
  }

  private call(voucher: VoucherDoc, channel: ChannelDoc, coverages: ClaimCoverage[]): ChannelCall {
    const claim = voucher.status === 'captured' ? coverageFor(coverages, chargedCumulativeOf(voucher)) : undefined;
    return { callId: voucher.callId ?? callIdOf(voucher._id), voucher, channel, status: voucher.status === 'held' ? 'held' : claim ? 'claimed' : 'accepted', ...(claim ? { claim } : {}) };
  }

  /** The org's channel, or a 404 (another org's channel is not found either). */
  async channel(orgId: string, channelId: string): Promise<ChannelDoc> {
    const channel = await this.book.channels.findOne({ _id: channelId.toLowerCase(), orgId }).lean();
    if (!channel) throw notFound('Channel not found');
    return channel;
  }

  /** The org's channels, newest first, with their sums. */
  async listChannels(orgId: string, limit: number, cursor?: Cursor): Promise<{ items: ChannelSummary[]; nextPageToken?: string }> {
    const rows = await this.book.channels.find({ orgId, ...afterCursor('createdAt', cursor) }).sort({ createdAt: -1, _id: -1 }).limit(limit + 1).lean();
    const page = pageOf(rows, limit, (row) => ({ at: row.createdAt, id: row._id }));
    return { items: await Promise.all(page.items.map((channel) => this.summarize(channel))), ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  }

  /** One channel of the org with its sums. */
  async summary(orgId: string, channelId: string): Promise<ChannelSummary> {
    return this.summarize(await this.channel(orgId, channelId));
  }


  private async summarize(channel: ChannelDoc): Promise<ChannelSummary> {
    const [actions, captured] = await Promise.all([this.actionsOf(channel._id), this.book.lastCaptured(channel._id, Date.now())]);
    const latest = captured?.latest ?? null;
    // Vouchers are numbered 1, 2, 3, ... with no gaps, and only the newest can be held: the newest captured one's number counts them.
    const callCount = latest?.seq ?? 0;
    const sum = (kind: ChannelActionDoc['kind']) => actions.filter((a) => a.kind === kind).reduce((total, a) => total + BigInt(a.amount ?? '0'), 0n);
    const coverages = coveragesOf(channel, actions);
    const claimedByUs = coverages.at(-1)?.total ?? 0n;
    const claimed = claimedByUs > BigInt(channel.totalClaimed) ? claimedByUs : BigInt(channel.totalClaimed);
    // Refunded, with no call paid since: the payer took the rest back (it may deposit again and call on).
    const lastRefund = actions.filter((a) => a.kind === 'refund').reduce<Date | null>((last, a) => (!last || a.updatedAt > last ? a.updatedAt : last), null);
    const state: ChannelState = channel.withdrawRequestedAt !== 0 ? 'withdrawing'
      : lastRefund && (!latest || latest.createdAt <= lastRefund) ? 'refunded' : 'open';
    return {
      channel, depositedUsdcRaw: sum('deposit').toString(), acceptedUsdcRaw: latest ? chargedCumulativeOf(latest).toString() : '0', claimedUsdcRaw: claimed.toString(), refundedUsdcRaw: sum('refund').toString(),
      callCount, lastCallAt: latest?.createdAt ?? null, state,
    };
  }

  /** A channel's calls, newest (highest cumulative amount) first. */
  async calls(orgId: string, channelId: string, limit: number, cursor?: Cursor): Promise<{ items: ChannelCall[]; nextPageToken?: string }> {
    const channel = await this.channel(orgId, channelId);
    // One more than a page, to know whether another follows; a cursor names the last voucher shown.
    const after = cursor ? numberIn(channel._id, cursor.id) : Number.NaN;
    const top = cursor ? (Number.isSafeInteger(after) ? after - 1 : 0) : await this.book.newestNumber(channel._id);
    const [rows, actions] = await Promise.all([this.numbered(orgId, channel._id, top, top - limit), this.actionsOf(channel._id)]);
    const coverages = coveragesOf(channel, actions);
    const page = pageOf(rows, limit, (row) => ({ at: row.createdAt, id: row._id }));
    const vouchers = await this.book.captures.views(page.items);
    return { items: vouchers.map((voucher) => this.call(voucher, channel, coverages)), ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  }

  /** One call of the org by its record id (`chc_…`); null when there is none (or it is another org's). */
  async find(orgId: string, callId: string): Promise<ChannelCall | null> {
    const voucher = await this.book.captures.view(await this.book.vouchers.findOne({ callId, orgId }).lean());
    if (!voucher) return null;
    const channel = await this.book.channels.findOne({ _id: voucher.channelId, orgId }).lean();
    if (!channel) return null;
    return this.call(voucher, channel, coveragesOf(channel, await this.actionsOf(channel._id)));
  }

  /**
   * The calls one action claimed, per channel: those whose covering claim it is, i.e. with a cumulative
   * amount above the channel's previous claimed total and at most this action's (the webhook of a claim).
   */
  async claimedBy(action: ChannelActionDoc): Promise<ChannelCall[]> {
    const calls: ChannelCall[] = [];
    for (const channelId of action.channelIds) {
      // The claiming seller's own channels only: a claim is signed for one seller (facilitator.ts claimRows).
      const channel = await this.book.channels.findOne({ _id: channelId.toLowerCase(), orgId: action.orgId }).lean();
      if (!channel) continue; // a channel of an official seller using agentgate as its facilitator: no calls here
      const coverages = coveragesOf(channel, await this.actionsOf(channel._id));
      const at = coverages.findIndex((c) => c.actionId === action._id);
      if (at < 0) continue;
      const from = at === 0 ? 0n : coverages[at - 1]!.total;
      const upTo = coverages[at]!.total;
      // Newest first, down to the previous claim's total: a channel's charged total only grows with its
      // sequence, so what lies below was claimed before, and a long-lived channel's older calls are not read.
      const claimed: ChannelCall[] = [];
      // A page at a time, its held vouchers' captures looked up together (a held one is claimed only if captured).
      pages: for (let top = await this.book.newestNumber(channel._id); top >= 1; top -= CLAIM_PAGE) {
        for (const voucher of await this.book.captures.views(await this.numbered(action.orgId, channel._id, top, top - CLAIM_PAGE + 1))) {
          if (voucher.status === 'held') continue;
          const cumulative = chargedCumulativeOf(voucher);
          if (cumulative <= from) break pages;
          if (cumulative <= upTo) claimed.push(this.call(voucher, channel, coverages));
        }
      }
      calls.push(...claimed.reverse());
    }
    return calls;
  }
}

/** Vouchers a claim webhook reads at a time. */
const CLAIM_PAGE = 256;

