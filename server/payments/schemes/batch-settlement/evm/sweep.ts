import type { Model, Connection } from 'mongoose';
import { isAddressEqual, type Address, type Hex } from 'viem';
import type { ChainService } from '../../../../chain/chain-service.js';
import { isDuplicateKey } from '../../../../platform/errors.js';
import { findByIds } from '../../../../platform/find-by-ids.js';
import type { Logger } from '../../../../platform/logger.js';
import { startRounds } from '../../../../platform/rounds.js';
import { Schema } from 'mongoose';
import type { SellerAccountDoc } from '../../../models.js';
import { readChannelStates, type ChannelState } from './chain.js';
import type { BatchSettlementFacilitator } from './facilitator.js';
import type { ChannelDoc, VoucherDoc } from './records.js';
import { ChannelSweepWork, type SweepWorkDoc } from './sweep-work.js';
import { chargedCumulativeOf } from './voucher-amounts.js';
import type { VoucherBook } from './voucher-book.js';

// The claim and refund sweep of channels sold through our middleware: each round (one process per round,
// a unique insert of its name) claims what the accepted vouchers allow, many channels in one transaction
// per seller, settles the claimed funds to the seller, and refunds channels left idle. What a claim
// carried is told to the seller's webhook by the claim outbox (claim-webhooks.ts), through `onClaimed`.

/** An action still `sending` after this long lost its process: the sweep finishes it from the chain. */
const STALE_ACTION_MS = 5 * 60_000;

const sweepSchema = new Schema<{ _id: string; at: Date }>({ _id: String, at: Date }, { versionKey: false });
/** When the sweep last claimed a seller's channels (its org id): the seller's schedule counts from there. Written by the sweep alone. */
const claimedAtSchema = new Schema<{ _id: string; at: Date }>({ _id: String, at: Date }, { versionKey: false });

export interface ChannelSweepDeps {
  conn: Connection;
  chain: () => ChainService;
  book: Pick<VoucherBook, 'channels' | 'vouchers' | 'captures' | 'lastCaptured'>;
  facilitator: Pick<BatchSettlementFacilitator, 'finishStale' | 'claimRows' | 'refund' | 'sweep'>;
  receiverAuthorizer: () => Promise<Address>;
  /** Run after a round that claimed or refunded; a failure is logged, never the round's (the outbox sweep dispatches what it missed). */
  onClaimed: () => Promise<unknown>;
  log: Logger;
  /**
   * The default network's sweep: its rounds and sellers' last claims keep their names from before many
   * networks (old and new processes of a rolling upgrade share them); another network's are named after its chain.
   */
  isDefault: boolean;
}

export class ChannelSweep {
  private readonly sweeps: Model<{ _id: string; at: Date }>;
  private readonly lastClaims: Model<{ _id: string; at: Date }>;
  private readonly work: ChannelSweepWork;

  constructor(private readonly deps: ChannelSweepDeps) {
    const { conn } = deps;
    this.sweeps = (conn.models.ChannelSweep as Model<{ _id: string; at: Date }>) ?? conn.model('ChannelSweep', sweepSchema, 'channel_sweeps');
    this.work = new ChannelSweepWork(conn, deps.book);
    this.lastClaims = (conn.models.ChannelLastClaim as Model<{ _id: string; at: Date }>) ?? conn.model('ChannelLastClaim', claimedAtSchema, 'channel_last_claims');
  }

  /**
   * One round, run by one process (a unique insert of the round): every channel whose last accepted
   * voucher is above what the chain has claimed is claimed (many channels, one transaction per seller),
   * a withdrawal started or not, long before it can complete (the delay is at least 15 minutes and a round
   * comes every `everyMs`); then each seller's claimed funds are settled to it; channels idle for
   * `idleRefundMs` give the payer the rest back (claiming the last voucher in the same transaction).
   */
  async run(options: { everyMs: number; idleRefundMs: number; /** The round's name (default: the current period of everyMs). */ round?: string; /** An action still sending after this long is finished from the chain. */ staleAfterMs?: number }, sellers: (orgId: string) => Promise<SellerAccountDoc | null>): Promise<{ claimed: number; refunded: number; settled: number; finished: number } | undefined> {
    const now = Date.now();
    const chain = this.deps.chain();
    const round = `sweep:${this.deps.isDefault ? '' : `${chain.chainId}:`}${options.round ?? Math.floor(now / options.everyMs)}`;
    try {
      await this.sweeps.create({ _id: round, at: new Date(now) });
    } catch (err) {
      if (isDuplicateKey(err)) return undefined; // another process has this round
      throw err;
    }
    const totals = { claimed: 0, refunded: 0, settled: 0, finished: 0 };
    // Actions whose process died mid-way are finished from the chain first (nothing is sent twice).
    totals.finished = await this.deps.facilitator.finishStale(options.staleAfterMs ?? STALE_ACTION_MS);
    // Only the channels with something written since they were last found done (sweep-work.ts)...
    const work = await this.work.due(chain.chainId, new Date(now));
    await this.work.advance(chain.chainId, new Date(now));
    const workOf = new Map(work.map((w) => [w._id, w]));
    const channels = (await findByIds(work.map((w) => w._id), (id) => this.deps.book.channels.findById(id).lean())).filter((c) => c.chainId === chain.chainId);
    // A channel gone from the records has nothing for this round, nor does one with nothing left below.
    const found = new Set(channels.map((c) => c._id));
    const done: SweepWorkDoc[] = work.filter((w) => !found.has(w._id));
    // ...with a captured voucher; a call being answered right now keeps a channel from counting as idle...
    const candidates: Array<{ channel: ChannelDoc; latest: VoucherDoc; answering: boolean }> = [];
    for (const channel of channels) {
      const last = await this.deps.book.lastCaptured(channel._id, now);
      // None captured (none at all, or only a call being answered, whose capture puts it back): done for now.
      if (last) candidates.push({ channel, ...last });
      else done.push(workOf.get(channel._id)!);
    }
    // ...read from the chain together (one Multicall3 call, not one call per channel).
    const states = await readChannelStates(chain.publicClient, candidates.map((c) => c.channel._id as Hex));
    const byOrg = new Map<string, Array<{ channel: ChannelDoc; latest: VoucherDoc; state: ChannelState; answering: boolean }>>();
    candidates.forEach((c, i) => {
      const state = states[i]!;
      if (chargedCumulativeOf(c.latest) <= state.totalClaimed && state.balance <= state.totalClaimed) {
        // Nothing to claim or refund until the next voucher or capture, which puts it back.
        done.push(workOf.get(c.channel._id)!);
        return;
      }
      const list = byOrg.get(c.channel.orgId) ?? [];
      list.push({ ...c, state });
      byOrg.set(c.channel.orgId, list);
    });
    await this.work.leave(done);
    const ours = await this.deps.receiverAuthorizer();
    for (const [orgId, list] of byOrg) {
      const seller = await sellers(orgId);
      if (!seller) continue;
      const due = list.filter((c) => chargedCumulativeOf(c.latest) > c.state.totalClaimed && isAddressEqual(c.channel.config.receiverAuthorizer, ours));
      const idle = list.filter((c) => !c.answering && now - new Date(c.latest.createdAt).getTime() >= options.idleRefundMs && c.state.balance > chargedCumulativeOf(c.latest) && c.state.balance > c.state.totalClaimed);
      const idleIds = new Set(idle.map((c) => c.channel._id));
      // On the seller's schedule, or now for a channel whose payer started withdrawing (whatever the schedule).
      const onSchedule = await this.claimDue(seller, now, options.everyMs);
      const claimNow = due.filter((c) => !idleIds.has(c.channel._id) && (onSchedule || c.state.withdrawRequestedAt !== 0));
      let claimed = false;
      for (let i = 0; i < claimNow.length; i += 100) {
        const batch = claimNow.slice(i, i + 100);
        const answer = (await this.deps.facilitator.claimRows(seller, batch.map(rowOf), undefined, chain.caip2)).body;
        if (answer.success) {
          totals.claimed += batch.length;
          claimed = true;
        } else {
          this.deps.log.warn({ orgId, answer }, 'channel claim failed; the next round tries again');
        }
      }
      if (claimed && onSchedule) await this.lastClaims.updateOne({ _id: this.lastClaimKey(orgId) }, { $set: { at: new Date(now) } }, { upsert: true });
      for (const c of idle) {
        const charged = chargedCumulativeOf(c.latest);
        const amount = c.state.balance - (charged > c.state.totalClaimed ? charged : c.state.totalClaimed);
        const claims = charged > c.state.totalClaimed ? [rowOf(c)] : [];
        const answer = (await this.deps.facilitator.refund(seller, {
          type: 'refund', channelConfig: c.channel.config as never, voucher: { channelId: c.channel._id as Hex, maxClaimableAmount: BigInt(c.latest.cumulative), signature: c.latest.signature as Hex },
          amount, refundNonce: c.state.refundNonce, claims,
        }, chain.caip2)).body;
        if (answer.success) totals.refunded++;
        else this.deps.log.warn({ orgId, channelId: c.channel._id, answer }, 'idle channel refund failed; the next round tries again');
      }
      for (const receiver of new Set(list.map((c) => c.channel.receiver))) {
        const answer = (await this.deps.facilitator.sweep(seller, { receiver: receiver as Address, token: chain.usdc.address }, chain.caip2)).body;
        if (answer.success) totals.settled++;
      }
    }
    if (totals.claimed + totals.refunded + totals.finished > 0) {
      await this.deps.onClaimed().catch((err) => this.deps.log.warn({ err: (err as Error).message }, 'channel claim webhooks deferred to the outbox sweep'));
    }
    return totals;
  }

  /**
   * Whether the seller's channels are due for a claim this round: every round, or every
   * `channelClaimEverySeconds` from its last claim (a round early by less than half a round counts: rounds
   * come every `everyMs`, not on the second).
   */
  private async claimDue(seller: SellerAccountDoc, now: number, everyMs: number): Promise<boolean> {
    if (!seller.channelClaimEverySeconds) return true;
    const last = await this.lastClaims.findById(this.lastClaimKey(seller._id)).lean();
    return !last || now - last.at.getTime() >= seller.channelClaimEverySeconds * 1000 - everyMs / 2;
  }

  /** Where the seller's last claim on this network is kept: its org id on the default network, `<org id>:<chain id>` on another. */
  private lastClaimKey(orgId: string): string {
    return this.deps.isDefault ? orgId : `${orgId}:${this.deps.chain().chainId}`;
  }

  /** Starts the rounds (every process; one of them runs each round). */
  start(options: { everyMs: number; idleRefundMs: number }, sellers: (orgId: string) => Promise<SellerAccountDoc | null>): { stop(): Promise<void> } {
    const stop = startRounds({
      everyMs: options.everyMs,
      round: async () => {
        const totals = await this.run(options, sellers);
        if (totals && totals.claimed + totals.refunded + totals.settled + totals.finished > 0) this.deps.log.info({ ...totals, network: this.deps.chain().caip2 }, 'channel sweep');
      },
      onError: (err) => this.deps.log.error({ err: err.message }, 'channel sweep failed'),
    });
    return { stop };
  }
}

/** A claim of the channel's charged total, under the voucher the payer signed (which may allow more). */
const rowOf = (c: { channel: ChannelDoc; latest: VoucherDoc }) => ({
  voucher: { channel: c.channel.config, maxClaimableAmount: BigInt(c.latest.cumulative) }, signature: c.latest.signature as Hex, totalClaimed: chargedCumulativeOf(c.latest),
});

