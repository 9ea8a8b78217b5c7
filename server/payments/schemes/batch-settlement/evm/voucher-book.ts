import { randomBytes } from 'node:crypto';
import type { Collection } from 'mongodb';
import { type Connection, type Model } from 'mongoose';
import { z } from 'zod';
import { getAddress, isAddressEqual, type Address, type Hex } from 'viem';
import { BATCH_SETTLEMENT_REASONS as R, CHANNEL_WITHDRAW_DELAY, decodeBase64Json, findNetwork, formatUsdc } from 'agentgate-x402-wire';
import type { ChainService } from '../../../../chain/chain-service.js';
import { readChannelState, type ChannelConfig, type ChannelState } from './chain.js';
import { AppError, isDuplicateKey } from '../../../../platform/errors.js';
import { chargedBeforeOf, chargedCumulativeOf } from './voucher-amounts.js';
import { GroupedInserts } from '../../../../platform/group-commit.js';
import type { Logger } from '../../../../platform/logger.js';
import type { SellerAccountDoc } from '../../../models.js';
import { signChannelCallReceipt, type ReceiptSigner } from '../../../receipts.js';
import type { SettleTerms } from '../../../payment-settlement.js';
import type { RedeemOutcome } from '../../../redemption.js';
import { requireChain } from '../../../chain-required.js';
import type { BatchSettlementFacilitator } from './facilitator.js';
import { channelConfigRefusal, voucherSigned } from './verify.js';
import { callIdOf } from './call-id.js';
import {decodeBatchSettlementPayload, type BatchSettlementRequirements, type DepositPayload, type VoucherPayload } from './wire.js';
import { seqOf, voucherId, VoucherSequence } from './voucher-sequence.js';
import { capturedCopy, VoucherCaptures, type CaptureCharges } from './captures.js';
import { channelModels, minuteOf, type ChannelDoc, type VoucherDoc } from './records.js';

// Channels sold through agentgate's own seller middleware: the channel state lives in the backend's
// database, shared by every seller process and every backend process, never in a process's memory. A paid
// call's voucher is checked against it and accepted by a unique insert keyed by (channel, number of the
// voucher in the channel): of two copies sent to two processes at the same instant one is accepted. A
// voucher is accepted only as the last accepted one plus the call's price, so every accepted voucher is one
// paid call and the newest is what the channel owes. The vouchers are read by `_id` alone
// (voucher-sequence.ts). What the vouchers allow is claimed by the sweep (sweep.ts).

/** A channel's state read from the chain is trusted this long for a voucher's balance check. */
const CHAIN_STATE_TTL_MS = 30_000;
/** Channels whose record a process keeps (its chain state trusted for CHAIN_STATE_TTL_MS, as the database's). */
const CHANNELS_KEPT = 100_000;
/**
 * A call coming in while the voucher before it is held waits this long for its capture (our middleware
 * answers its buyer before the capture is written, so the buyer's next call can overtake it; on a loaded
 * machine the capture can take a good part of a second to arrive); the hold of another process is read
 * again after CAPTURE_POLL_MS, then twice as long each time up to 100 ms. Still held after that: a call
 * still being answered (the channel is busy).
 */
const CAPTURE_WAIT_MS = 1_000;
const CAPTURE_POLL_MS = 5;
/**
 * How far apart two processes' clocks may be. A capture written this close to its hold's end (or after
 * it) checks that its voucher is still there: another process may have taken the hold as run out.
 */
const CLOCK_SKEW_MS = 5_000;
/** Held vouchers a process keeps while their calls are answered (their capture writes no read first). */
const HELD_KEPT = 10_000;

const paymentHeaderSchema = z.object({
  x402Version: z.literal(2),
  accepted: z.object({ scheme: z.literal('batch-settlement'), network: z.string(), asset: z.string(), payTo: z.string(), amount: z.string() }).passthrough(),
  payload: z.unknown(),
}).passthrough();

type Refused = Extract<RedeemOutcome, { ok: false }> & { channelState?: Record<string, unknown>; voucherState?: Record<string, unknown> };
export type ChannelPayOutcome = Extract<RedeemOutcome, { ok: true }> | Refused;

/** A network the book sells channels on: its chain, and its facilitator, which sends a channel's deposit (the first call's payload). */
export interface ChannelNetwork {
  chain: ChainService;
  facilitator: Pick<BatchSettlementFacilitator, 'deposit'>;
}

export interface VoucherBookDeps {
  conn: Connection;
  receiverAuthorizer: () => Promise<Address>;
  /** Signs each accepted call's receipt (the service DID key, as for exact payments). */
  signer: () => ReceiptSigner;
  log: Logger;
}

export class VoucherBook {
  readonly channels: Model<ChannelDoc>;
  readonly vouchers: Model<VoucherDoc>;
  /** Held vouchers' captures: read a voucher through `captures.view` to see whether it was captured. */
  readonly captures: VoucherCaptures;
  private readonly sequence: VoucherSequence<VoucherDoc>;
  /** Vouchers accepted at the same time leave in one insertMany (unordered: a duplicate fails only itself). */
  private readonly voucherInserts: GroupedInserts<VoucherDoc>;
  /**
   * Channel records this process read or wrote: a config never changes, and its chain state is trusted
   * for CHAIN_STATE_TTL_MS from when it was read from the chain, whoever holds the record; so a paid call
   * reads the database for it only when the state is that old (and the chain then).
   */
  private readonly channelsKept = new Map<string, ChannelDoc>();
  /** Per channel, the voucher this process accepted on hold, until its capture or release starts here. */
  private readonly heldHere = new Map<string, HeldHere>();
  /** The captures this process is writing (by voucher id, the voucher as captured): a call that builds on one need not wait for it. */
  private readonly capturing = new Map<string, VoucherDoc>();
  /** The networks channels are sold on, by chain id. */
  private readonly networks = new Map<number, ChannelNetwork>();

  constructor(private readonly deps: VoucherBookDeps) {
    const { conn } = deps;
    ({ channels: this.channels, vouchers: this.vouchers } = channelModels(conn));
    this.captures = new VoucherCaptures(conn);
    this.sequence = new VoucherSequence((id) => this.load(id));
    this.voucherInserts = new GroupedInserts(() => this.vouchers.collection as unknown as Collection<VoucherDoc>);
  }

  /**
   * Sells channels on this network too (each network's scheme adds its own). Channel ids are per chain
   * (the contract's EIP-712 domain names it), so one book keeps every network's channels and vouchers.
   */
  serve(network: ChannelNetwork): void {
    this.networks.set(network.chain.chainId, network);
  }

  /** The network a payment names (v1 name or CAIP-2 id), if the book sells channels there. */
  private networkOf(name: string): ChannelNetwork | undefined {
    const chainId = findNetwork(name)?.chainId;
    return chainId === undefined ? undefined : this.networks.get(chainId);
  }

  /** The requirements our middleware's 402 offers for this call on this chain (what the buyer's voucher must meet). */
  private async requirementsFor(terms: SettleTerms, chain: ChainService): Promise<BatchSettlementRequirements> {
    return {
      scheme: 'batch-settlement', network: chain.caip2, asset: chain.usdc.address, amount: terms.amountAtomic.toString(), payTo: getAddress(terms.payTo!),
      extra: { receiverAuthorizer: await this.deps.receiverAuthorizer(), withdrawDelay: CHANNEL_WITHDRAW_DELAY, name: chain.usdc.name, version: chain.usdc.version },
    };
  }

  /**
   * A paid call through our middleware (terms: the seller-side checks passed, redemption.ts): a deposit
   * with its first voucher (the deposit sent, then the voucher accepted), or a voucher alone (accepted in
   * milliseconds, nothing sent).
   */
  async pay(seller: SellerAccountDoc, terms: SettleTerms, paymentHeader: string, hold?: ChannelHold): Promise<ChannelPayOutcome> {
    const refuse = (error: string, message: string, more: Partial<Refused> = {}): Refused => ({ ok: false, error, message, ...more });
    const raw = decodeBase64Json(paymentHeader);
    if (!raw.ok) return refuse('invalid_payload', `the payment header is not base64 JSON (${raw.reason})`);
    const header = paymentHeaderSchema.safeParse(raw.value);
    if (!header.success) return refuse(R.payloadType, `the payment header is not an x402 v2 batch-settlement payment: ${header.error.issues[0]?.path.join('.')} ${header.error.issues[0]?.message}`);
    const accepted = header.data.accepted;
    // No network at all: payments are off (503); a network this backend does not sell channels on: refused.
    if (this.networks.size === 0) requireChain(undefined);
    const network = this.networkOf(accepted.network);
    if (!network) return refuse('invalid_payment_requirements', `this backend does not sell channels on ${accepted.network}; it does on ${[...this.networks.values()].map((n) => n.chain.caip2).join(', ')}`);
    const requirements = await this.requirementsFor(terms, network.chain);
    if (accepted.network !== requirements.network || BigInt(accepted.amount) !== terms.amountAtomic || !isAddressEqual(accepted.payTo as Address, requirements.payTo!) || !isAddressEqual(accepted.asset as Address, requirements.asset)) {
      return refuse('invalid_payment_requirements', 'the payment was accepted for other requirements (network, amount, payTo or asset)');
    }
    const decoded = decodeBatchSettlementPayload(header.data.payload);
    if (!decoded.ok) return refuse(R.payloadType, decoded.message);
    const payload = decoded.payload;
    if (payload.type === 'deposit') return this.deposit(network, seller, terms, requirements, payload, hold);
    if (payload.type === 'voucher') return this.voucher(network.chain, seller, terms, requirements, payload, hold);
    return refuse(R.payloadType, `a ${payload.type} payload is not a paid call`);
  }

  /** The number of the channel's newest voucher (0: none yet); numbers have no gaps (voucher-sequence.ts). */
  async newestNumber(channelId: string): Promise<number> {
    return (await this.sequence.newest(channelId))?.seq ?? 0;
  }

  /**
   * The channel's newest captured voucher (what a claim may take), and whether a call is being answered on
   * the channel right now (its newest voucher held and not run out); undefined before its first capture.
   */
  async lastCaptured(channelId: string, now: number): Promise<{ latest: VoucherDoc; answering: boolean } | undefined> {
    const newest = await this.sequence.newest(channelId);
    if (!newest) return undefined;
    const latest = newest.status === 'captured' ? newest : await this.previous(newest);
    if (!latest) return undefined;
    return { latest, answering: newest.status === 'held' && !!newest.holdExpiresAt && newest.holdExpiresAt.getTime() > now };
  }

  /** A voucher by its id, as captured if its capture exists. */
  private async load(id: string): Promise<VoucherDoc | null> {
    return this.captures.view(await this.vouchers.findById(id).lean());
  }

  /** The voucher before `doc` in its channel (captured: only the newest can be held), null for the first. */
  private previous(doc: VoucherDoc): Promise<VoucherDoc | null> {
    return doc.seq > 1 ? this.load(voucherId(doc.channelId, doc.seq - 1)) : Promise.resolve(null);
  }

  /**
   * The channel's last voucher as a new call sees it (`fresh`: found again, not the one this process saw
   * last). Our middleware answers its buyer before its capture is written, so a call may come in while the
   * voucher before it is still held: a hold of this process is waited for until its capture or release
   * starts here, and one whose capture another process is writing is read again for up to CAPTURE_WAIT_MS
   * when the call builds on it (`buildsOn`: its voucher is that one's plus this call's price, so the buyer
   * had its paid answer). A hold still running then makes the channel busy (one call at a time on a
   * channel, as the official server has it); one that expired (its process died) is released first.
   */
  private async current(channelId: string, fresh = false, buildsOn?: (doc: VoucherDoc) => boolean): Promise<VoucherDoc | null | 'busy'> {
    const here = this.heldHere.get(channelId.toLowerCase());
    if (here) await atMost(here.decided, CAPTURE_WAIT_MS);
    let newest = fresh ? await this.sequence.newest(channelId) : await this.sequence.lastSeen(channelId);
    if (newest?.status !== 'held') return newest;
    const capturing = this.capturing.get(newest._id);
    if (capturing) return capturing;
    if (newest.holdExpiresAt && newest.holdExpiresAt.getTime() > Date.now()) {
      // Read again: it may have been captured since it was read (by a capture written here meanwhile, too);
      // a call building on it waits for that up to CAPTURE_WAIT_MS, any other a moment.
      const id = newest._id;
      const until = Date.now() + (buildsOn?.(newest) ? CAPTURE_WAIT_MS : 4 * CAPTURE_POLL_MS);
      for (let wait = CAPTURE_POLL_MS; ; wait = Math.min(100, wait * 2)) {
        newest = this.capturing.get(id) ?? await this.load(id);
        if (newest?.status !== 'held' || Date.now() >= until) break;
        await new Promise((r) => setTimeout(r, wait));
      }
      if (newest?.status === 'captured') this.sequence.captured(channelId, newest);
      // Released meanwhile (or captured, then superseded): found again from the start.
      return newest === null ? this.current(channelId, true) : newest.status === 'held' ? 'busy' : newest;
    }
    // Its hold ran out (its process died before capturing or releasing it): released, unless captured meanwhile.
    if (!(await this.dropHold(newest._id, newest.orgId, newest.holdToken!))) return this.current(channelId, true);
    this.sequence.remember(channelId, newest.seq - 1);
    return this.previous(newest);
  }

  /**
   * Deletes a held voucher (released, or its hold ran out) unless it was captured; whether it went. A
   * capture written while it was being deleted puts it back: the capture and the delete each look for the
   * other after writing, so at least one of them sees it.
   */
  private async dropHold(id: string, orgId: string, holdToken: string): Promise<boolean> {
    const holdId = `${id}:${holdToken}`;
    if (await this.captures.find(holdId)) return false;
    const gone = await this.vouchers.findOneAndDelete({ _id: id, orgId, holdToken, status: 'held' }).lean();
    if (!gone) return false;
    if (!(await this.captures.find(holdId))) return true;
    await this.restore(gone);
    return false;
  }

  /** A captured call's voucher deleted as its hold ran out, inserted again; false if another voucher took its number meanwhile. */
  private async restore(held: VoucherDoc): Promise<boolean> {
    try {
      await this.vouchers.collection.insertOne(held as never);
      return true;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const there = await this.vouchers.findById(held._id).lean();
      if (there?.holdToken === held.holdToken) return true; // put back by the other side
      this.deps.log.error({ voucherId: held._id, event: 'payments.channel_capture_lost' }, 'a call was captured as its hold ran out, and another call took its voucher\'s place: its charge is not claimable');
      return false;
    }
  }

  /**
   * Captures a held voucher once the handler succeeded: its call is charged. Our middleware answers its
   * buyer without waiting for this (middleware/schemes/batch-settlement/evm/seller.ts): while the write is under way, a call of this
   * process building on the voucher takes it as captured.
   */
  async capture(orgId: string, holdId: string, usage?: bigint): Promise<ChannelPayOutcome> {
    const [voucherId, holdToken] = splitHoldId(holdId);
    const kept = this.takeHeld(voucherId, orgId, holdToken);
    // The held voucher (this process's hold, else the database's) says whether the call is priced by usage.
    const found = kept?.doc ?? await this.load(voucherId);
    const held = found?.orgId === orgId && found.holdToken === holdToken ? found : null;
    // A capture asked again (its answer lost) finds the call captured already.
    if (held?.status === 'captured') {
      kept?.decide();
      return paid(held);
    }
    // Its usage charge is checked first: a refused charge leaves the hold as it is, for a release.
    const bad = held ? usageRefusal(held, usage) : undefined;
    if (bad) {
      if (kept) this.heldHere.set(kept.doc.channelId, kept);
      throw bad;
    }
    if (!held || !held.holdExpiresAt || held.holdExpiresAt.getTime() <= Date.now()) {
      kept?.decide();
      return holdExpired();
    }
    const charges = held.byUsage ? await this.usageCharge(held, usage ?? 0n) : undefined;
    const captured = capturedCopy(held, charges);
    // Taken as captured here while the write is under way: the channel's next call on this process reads nothing.
    if (kept) {
      this.capturing.set(voucherId, captured);
      this.sequence.captured(captured.channelId, captured);
    }
    kept?.decide();
    let doc: VoucherDoc | null = null;
    try {
      const capturedAt = new Date();
      if ((await this.captures.record({ _id: holdId, orgId, ...charges, createdAt: capturedAt, minute: minuteOf(capturedAt) })) === 'duplicate') {
        const first = await this.captures.find(holdId);
        doc = first && capturedCopy(held, first);
      } else {
        doc = (await this.stillHeld(held)) ? captured : null;
      }
    } finally {
      this.capturing.delete(voucherId);
      if (kept && !doc) this.sequence.forget(captured.channelId, captured.seq);
    }
    if (!doc) return holdExpired();
    this.sequence.captured(doc.channelId, doc);
    return paid(doc);
  }

  /**
   * Whether a voucher whose capture was just written is still there. A capture written well before its
   * hold's end is safe (no process takes the hold as run out before then); one written near or after it
   * looks, and puts the voucher back if a process deleted it meanwhile (dropHold looks the other way).
   */
  private async stillHeld(held: VoucherDoc): Promise<boolean> {
    if (Date.now() < held.holdExpiresAt!.getTime() - CLOCK_SKEW_MS) return true;
    const there = await this.vouchers.findById(held._id).lean();
    return there ? there.holdToken === held.holdToken : this.restore(held);
  }

  /**
   * A call priced by usage as its capture leaves it: charged what it used, the channel's charged total
   * after it, the answer saying both (the buyer's client bases its next voucher on that total), and its
   * receipt, signed now that the charge is known.
   */
  private async usageCharge(held: VoucherDoc, used: bigint): Promise<CaptureCharges> {
    const charged = chargedBeforeOf(held) + used;
    // The accepted call's answer names its network (the channel's chain).
    const response = held.response as { payer?: string; network?: string; extra?: { channelState?: Record<string, unknown> } };
    const channel = await this.stored(held.channelId);
    const signedReceipt = await signChannelCallReceipt(this.deps.signer(), {
      callId: held.callId ?? callIdOf(held._id), endpointId: held.endpointId ?? null, payerAddress: channel?.payer ?? response.payer ?? '', recipientAddress: channel?.receiver ?? '',
      amountUsdcRaw: used.toString(), cumulativeAmountUsdcRaw: charged.toString(), maxClaimableAmountUsdcRaw: held.cumulative,
      channelId: held.channelId, voucherSignature: held.signature, network: String(response.network ?? `eip155:${channel?.chainId}`), resourceUrl: held.resource, acceptedAt: held.createdAt,
    });
    return {
      charged: charged.toString(), amount: used.toString(), signedReceipt,
      response: { ...held.response, extra: { ...response.extra, chargedAmount: used.toString(), channelState: { ...response.extra?.channelState, chargedCumulativeAmount: charged.toString() } } },
    };
  }

  /** Releases a held voucher (the handler failed): nothing is charged, and the buyer's next voucher may be for the same amount. */
  async release(orgId: string, holdId: string): Promise<{ released: boolean }> {
    const [voucherId, holdToken] = splitHoldId(holdId);
    this.takeHeld(voucherId, orgId, holdToken)?.decide();
    // A captured call stays charged: its release changes nothing.
    const released = await this.dropHold(voucherId, orgId, holdToken);
    if (released) this.sequence.remember(voucherId.slice(0, voucherId.indexOf(':')), seqOf(voucherId) - 1);
    return { released };
  }

  /** The channel's record: the one this process keeps while its chain state is fresh, else the database's. */
  private async stored(channelId: string): Promise<ChannelDoc | null> {
    const id = channelId.toLowerCase();
    const kept = this.channelsKept.get(id);
    if (kept && isFresh(kept)) return kept;
    const doc = await this.channels.findById(id).lean();
    if (doc) this.keep(doc);
    return doc;
  }

  private keep(doc: ChannelDoc): void {
    this.channelsKept.delete(doc._id);
    this.channelsKept.set(doc._id, doc);
    // Oldest first: a Map keeps insertion order.
    if (this.channelsKept.size > CHANNELS_KEPT) this.channelsKept.delete(this.channelsKept.keys().next().value!);
  }

  /** The chain's state of a channel, written on its record (by the paid call that read it). */
  private async sync(chain: ChainService, channel: ChannelDoc | null, seller: SellerAccountDoc, config: ChannelConfig, channelId: Hex): Promise<ChannelDoc> {
    const state = await readChannelState(chain.publicClient, channelId);
    const fields = stateFields(state);
    if (channel) {
      await this.channels.updateOne({ _id: channel._id }, { $set: fields });
      const synced = { ...channel, ...fields };
      this.keep(synced);
      return synced;
    }
    const doc: ChannelDoc = {
      _id: channelId.toLowerCase(), orgId: seller._id, chainId: chain.chainId, config, payer: getAddress(config.payer), receiver: getAddress(config.receiver), ...fields, createdAt: new Date(),
    };
    await this.channels.create(doc).catch((err) => { if (!isDuplicateKey(err)) throw err; });
    this.keep(doc);
    return doc;
  }

  /**
   * What every paid call checks first, a deposit's as a voucher's: the channel config against the 402, the
   * channel not busy, the voucher this call's amount and signed by the payer. A deposit presented again
   * (its deposit went through already, answered from the action's record) brings a voucher like any call.
   */
  private async admit(chain: ChainService, terms: SettleTerms, requirements: BatchSettlementRequirements, payload: DepositPayload | VoucherPayload): Promise<Refused | { stored: ChannelDoc | null; latest: VoucherDoc | null }> {
    const { channelConfig: config, voucher } = payload;
    const bad = channelConfigRefusal(config, voucher.channelId, requirements, chain.chainId);
    if (bad) return { ok: false, error: bad.reason, message: bad.message };
    // The buyer's voucher builds on the newest when it is that one's charged total plus this call's price: it
    // had that call's paid answer. A held call priced by usage is charged between nothing and its price.
    const buildsOn = (doc: VoucherDoc) => {
      const base = voucher.maxClaimableAmount - terms.amountAtomic;
      return doc.status === 'held' && doc.byUsage ? base >= chargedBeforeOf(doc) && base <= BigInt(doc.cumulative) : base === chargedCumulativeOf(doc);
    };
    const [stored, seen] = await Promise.all([this.stored(voucher.channelId), this.current(voucher.channelId, false, buildsOn)]);
    let latest = seen;
    if (latest === 'busy') return busy();
    // The voucher must be this call's before anything is deposited; a refusal is checked against the
    // channel's newest voucher found again (this process's may be behind another process's).
    if (this.cumulativeMismatch(stored, latest, voucher.maxClaimableAmount, terms.amountAtomic)) {
      latest = await this.current(voucher.channelId, true, buildsOn);
      if (latest === 'busy') return busy();
      const mismatch = this.cumulativeMismatch(stored, latest, voucher.maxClaimableAmount, terms.amountAtomic);
      if (mismatch) return mismatch;
    }
    if (!(await voucherSigned(chain, config, voucher.channelId, voucher.maxClaimableAmount, voucher.signature))) {
      return { ok: false, error: R.voucherSignature, message: 'the voucher is not signed by the channel\'s payer (or its payerAuthorizer)' };
    }
    return { stored, latest };
  }

  private async deposit({ chain, facilitator }: ChannelNetwork, seller: SellerAccountDoc, terms: SettleTerms, requirements: BatchSettlementRequirements, payload: DepositPayload, hold?: ChannelHold): Promise<ChannelPayOutcome> {
    const admitted = await this.admit(chain, terms, requirements, payload);
    if ('ok' in admitted) return admitted;
    // Sent once: the same deposit presented again after it went through (its answer lost: a timeout, a
    // process that died after sending it) is not sent again, and the voucher is accepted as this call's.
    const answer = (await facilitator.deposit(seller, payload, requirements, chain.caip2)).body as Record<string, unknown> & { success: boolean; transaction?: string; errorReason?: string; errorMessage?: string };
    if (!answer.success) return { ok: false, error: String(answer.errorReason), message: String(answer.errorMessage ?? answer.errorReason) };
    const synced = await this.sync(chain, admitted.stored, seller, payload.channelConfig as ChannelConfig, payload.voucher.channelId);
    return this.accept(chain, seller, terms, synced, admitted.latest, payload.voucher, String(answer.transaction ?? ''), hold);
  }

  private async voucher(chain: ChainService, seller: SellerAccountDoc, terms: SettleTerms, requirements: BatchSettlementRequirements, payload: VoucherPayload, hold?: ChannelHold): Promise<ChannelPayOutcome> {
    const admitted = await this.admit(chain, terms, requirements, payload);
    if ('ok' in admitted) return admitted;
    const { channelConfig: config, voucher } = payload;
    let channel = admitted.stored;
    // The chain's word on the balance is fresh enough, or asked again (a deposit made elsewhere, a refund, a withdrawal).
    if (!channel || !isFresh(channel) || voucher.maxClaimableAmount > BigInt(channel.balance)) channel = await this.sync(chain, channel, seller, config as ChannelConfig, voucher.channelId);
    if (BigInt(channel.balance) === 0n) return { ok: false, error: R.channelNotFound, message: 'the channel has no deposit' };
    return this.accept(chain, seller, terms, channel, admitted.latest, voucher, '', hold);
  }

  /** The voucher must be the last accepted one plus this call's price (a corrective 402 says where the channel stands). */
  private cumulativeMismatch(channel: ChannelDoc | null, latest: VoucherDoc | null, max: bigint, price: bigint): Refused | undefined {
    const base = latest ? chargedCumulativeOf(latest) : BigInt(channel?.totalClaimed ?? '0');
    if (max === base + price) return undefined;
    return {
      ok: false, error: 'invalid_batch_settlement_evm_cumulative_amount_mismatch', message: `the voucher is for ${max}; the channel has ${base} charged and this call costs ${price}`,
      ...(channel ? { channelState: { ...snapshot(channel), chargedCumulativeAmount: base.toString() } } : {}),
      ...(latest ? { voucherState: { signedMaxClaimable: latest.cumulative, signature: latest.signature } } : {}),
    };
  }

  /** The voucher accepted once: a unique insert of (channel, the number after the newest's): one voucher follows each. */
  private async accept(chain: ChainService, seller: SellerAccountDoc, terms: SettleTerms, channel: ChannelDoc, latest: VoucherDoc | null, voucher: { channelId: Hex; maxClaimableAmount: bigint; signature: Hex }, transaction: string, hold?: ChannelHold): Promise<ChannelPayOutcome> {
    const max = voucher.maxClaimableAmount;
    if (max > BigInt(channel.balance)) return { ok: false, error: R.exceedsBalance, message: `the voucher's ${max} is above the channel's balance ${channel.balance}` };
    if (max <= BigInt(channel.totalClaimed)) return { ok: false, error: R.belowClaimed, message: `the voucher's ${max} is not above the ${channel.totalClaimed} claimed already` };
    if (channel.withdrawRequestedAt !== 0) return { ok: false, error: 'channel_withdrawal_pending', message: 'the payer started withdrawing this channel: deposit into a new channel' };
    const seq = (latest?.seq ?? 0) + 1;
    const id = voucherId(voucher.channelId, seq);
    const paymentResponse = {
      success: true as const, transaction, network: chain.caip2, payer: channel.payer,
      extra: { chargedAmount: terms.amountAtomic.toString(), channelState: { ...snapshot(channel), chargedCumulativeAmount: max.toString() } },
    };
    const holdToken = hold ? randomBytes(8).toString('hex') : undefined;
    const acceptedAt = new Date();
    const callId = callIdOf(id);
    const endpointId = terms.endpoint?._id ?? null;
    // Signed before the insert (a local Ed25519 signature, well under a millisecond), so the record is whole
    // from its one write: no later update of the voucher, which its capture and the sweep also read.
    // A call priced by usage is signed for when its capture says what it was charged.
    const signedReceipt = hold?.byUsage ? undefined : await signChannelCallReceipt(this.deps.signer(), {
      callId, endpointId, payerAddress: channel.payer, recipientAddress: channel.receiver, amountUsdcRaw: terms.amountAtomic.toString(), cumulativeAmountUsdcRaw: max.toString(),
      channelId: voucher.channelId.toLowerCase(), voucherSignature: voucher.signature, network: chain.caip2, resourceUrl: terms.resource, acceptedAt,
    });
    const doc: VoucherDoc = {
      _id: id, seq, channelId: voucher.channelId.toLowerCase(), orgId: seller._id, cumulative: max.toString(), price: terms.amountAtomic.toString(), signature: voucher.signature, resource: terms.resource,
      status: hold ? 'held' : 'captured', ...(hold ? { holdExpiresAt: new Date(acceptedAt.getTime() + hold.seconds * 1000), holdToken } : {}), ...(hold?.byUsage ? { byUsage: true } : {}), response: paymentResponse,
      callId, endpointId, ...(signedReceipt ? { signedReceipt } : {}), createdAt: acceptedAt, minute: minuteOf(acceptedAt),
    };
    if ((await this.voucherInserts.insert(doc)) === 'duplicate') {
      // Another voucher follows the same one: this one at another process at the same instant, or another
      // call's (this process had not seen it). Refused with where the channel stands now.
      const now = await this.current(voucher.channelId, true);
      if (now === 'busy') return busy();
      // This process's view was behind, and the voucher builds on the newest found again: after a call priced
      // by usage that charged nothing, the next voucher is for the same amount as that call's, so the amount
      // alone did not tell which call it follows. Accepted after the newest (the number only grows: this ends).
      if (now && now.seq > (latest?.seq ?? 0) && !this.cumulativeMismatch(channel, now, max, terms.amountAtomic)) return this.accept(chain, seller, terms, channel, now, voucher, transaction, hold);
      const already = !!now && BigInt(now.cumulative) >= max;
      return {
        ok: false, error: 'invalid_batch_settlement_evm_cumulative_amount_mismatch',
        ...this.cumulativeMismatch(channel, now, max, terms.amountAtomic),
        message: already ? 'this voucher was accepted already' : 'another call on this channel was accepted first',
      };
    }
    this.sequence.remember(voucher.channelId, seq, doc);
    if (hold) this.holdHere(doc);
    // A held call is captured or released by its hold id (the voucher and the hold's token).
    return { ok: true, paymentId: holdToken ? `${id}:${holdToken}` : id, paymentResponse };
  }

  /** Notes a voucher this process holds: the channel's next call here waits for its capture to start. */
  private holdHere(doc: VoucherDoc): void {
    let decide!: () => void;
    const decided = new Promise<void>((resolve) => { decide = resolve; });
    this.heldHere.get(doc.channelId)?.decide();
    this.heldHere.delete(doc.channelId);
    this.heldHere.set(doc.channelId, { doc, decided, decide });
    // Oldest first: a Map keeps insertion order.
    if (this.heldHere.size > HELD_KEPT) this.heldHere.delete(this.heldHere.keys().next().value!);
  }

  /** The hold this process noted for this voucher, no longer noted (its capture or release is starting). */
  private takeHeld(voucherId: string, orgId: string, holdToken: string): HeldHere | undefined {
    const channelId = voucherId.slice(0, voucherId.indexOf(':'));
    const here = this.heldHere.get(channelId);
    if (here?.doc._id !== voucherId || here.doc.orgId !== orgId || here.doc.holdToken !== holdToken) return undefined;
    this.heldHere.delete(channelId);
    return here;
  }
}

/** A hold id: `<voucher id>:<hold token>` (the route checks its shape). */
function splitHoldId(holdId: string): [string, string] {
  const at = holdId.lastIndexOf(':');
  return [holdId.slice(0, at), holdId.slice(at + 1)];
}

interface HeldHere {
  doc: VoucherDoc;
  /** Settles when its capture or release starts here. */
  decided: Promise<void>;
  decide(): void;
}

/** Waits for `promise`, or `ms` at most. */
async function atMost(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise<void>((resolve) => { timer = setTimeout(resolve, ms); })]);
  clearTimeout(timer);
}

/** A captured call's answer (given again to a capture asked twice). */
const paid = (doc: VoucherDoc): ChannelPayOutcome => ({ ok: true, paymentId: doc._id, paymentResponse: doc.response as Extract<ChannelPayOutcome, { ok: true }>['paymentResponse'] });

const holdExpired = (): ChannelPayOutcome => ({ ok: false, error: 'hold_expired', message: 'this call\'s voucher is no longer held (it expired or was released): nothing was charged' });

/** A usage charge the held voucher does not allow: above the call's maximum, or named for a fixed-price call. */
function usageRefusal(held: VoucherDoc, usage: bigint | undefined): AppError | undefined {
  if (usage === undefined) return undefined;
  if (!held.byUsage) return new AppError(400, 'validation_error', 'body.amount: this call has a fixed price; an amount is captured only for a call priced by usage');
  if (usage > BigInt(held.price)) return new AppError(400, 'settlement_exceeds_amount', `the charge ${formatUsdc(usage)} USDC is above the ${formatUsdc(BigInt(held.price))} USDC the buyer allowed for this call; nothing was charged`);
  return undefined;
}

/** How a call's voucher is held while the seller's handler runs; `byUsage`: its route is priced by usage. */
export interface ChannelHold {
  seconds: number;
  byUsage?: boolean;
}

const isFresh = (channel: ChannelDoc) => Date.now() - new Date(channel.syncedAt).getTime() < CHAIN_STATE_TTL_MS;

const busy = (): Refused => ({ ok: false, error: 'invalid_batch_settlement_evm_channel_busy', message: 'a call on this channel is still being answered: one call at a time per channel (open another channel for parallel calls)' });

const stateFields = (state: ChannelState) => ({
  balance: state.balance.toString(), totalClaimed: state.totalClaimed.toString(), withdrawRequestedAt: state.withdrawRequestedAt, refundNonce: state.refundNonce.toString(), syncedAt: new Date(),
});

const snapshot = (channel: ChannelDoc) => ({
  channelId: channel._id, balance: channel.balance, totalClaimed: channel.totalClaimed, withdrawRequestedAt: channel.withdrawRequestedAt, refundNonce: channel.refundNonce,
});

