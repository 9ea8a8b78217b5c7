import { BATCH_SETTLEMENT_REASONS as R } from 'agentgate-x402-wire';
import { getAddress, isAddressEqual, keccak256, toHex, type Hex } from 'viem';
import type { Model } from 'mongoose';
import type { ChainService } from '../../../../chain/chain-service.js';
import { BATCH_SETTLEMENT_ADDRESS, batchSettlementAbi, channelIdOf, channelSnapshot, readChannelState, type VoucherClaim } from './chain.js';
import { AppError } from '../../../../platform/errors.js';
import type { Logger } from '../../../../platform/logger.js';
import { nodeFault } from '../../../../chain/rpc-fault.js';
import type { SettlementWork, WorkOutcome } from '../../../../settlement/work.js';
import type { SellerAccountDoc } from '../../../models.js';
import { payeeRefusal, requirementsIssue, type FacilitatorAnswer, type FacilitatorRequest } from '../../../facilitator-api.js';
import { chainUnavailable } from '../../chain-checks.js';
import { acceptsPayee } from '../../../acceptance.js';
import type { ReceiverAuthorizer } from './receiver-authorizer.js';
import { runAction, wireClaim, type ActionAnswer, type ChannelActionDoc } from './settle.js';
import { depositAuthorization, depositKey, verifyDeposit, verifyVoucher } from './verify.js';
import {channelRequirementsSchema, decodeBatchSettlementPayload, toClaim, type BatchSettlementPayload, type BatchSettlementRequirements, type ClaimPayload, type DepositPayload, type RefundPayload, type SettlePayload } from './wire.js';

// The facilitator API (`/verify`, `/settle`) for the x402 `batch-settlement` scheme (v2): /verify takes
// what a buyer signs (deposit, voucher, refund voucher) and answers the channel's snapshot; /settle takes
// a deposit, a claim of many channels, a settle of a receiver's claimed funds, and a cooperative refund,
// each sent once (settle.ts) through the settlement engine. agentgate signs claims and refunds with its
// receiver authorizer for the seller whose key called, and only for channels paying that seller.

/** What the facilitator needs around it: the chain, its receiver authorizer, the action records, and the engine's desk. */
export interface BatchSettlementFacilitatorDeps {
  chain: () => ChainService;
  authorizer: ReceiverAuthorizer;
  actions: () => Model<ChannelActionDoc>;
  submit: (work: SettlementWork) => Promise<WorkOutcome>;
  /** 503 before anything is recorded when no process of the deployment can send now. */
  ensureCanSend: () => Promise<void>;
  settlementTimeoutMs: number;
  log: Logger;
  /**
   * Sanctions screening of a channel's payer and receiver before a deposit or a claim is sent, and at
   * /verify (`counted` false: it moves nothing). Undefined: they may.
   */
  screen: (payer: string, receiver: string, orgId: string, counted?: boolean) => Promise<Refusal | undefined>;
}

type Refusal = { reason: string; message: string; payer?: string };
type Request = { payload: BatchSettlementPayload; requirements: BatchSettlementRequirements };

const verifyRefusal = (r: Refusal) => ({ isValid: false, invalidReason: r.reason, invalidMessage: r.message, ...(r.payer ? { payer: r.payer } : {}) });
const settleRefusal = (network: string, r: Refusal) => ({ success: false, errorReason: r.reason, errorMessage: r.message, transaction: '', network, ...(r.payer ? { payer: r.payer } : {}) });

/** The seller as its channels' checks need it. */
type Seller = Pick<SellerAccountDoc, '_id' | 'payTo' | 'payees' | 'payToByNetwork'>;

const notSellers = (what: string): Refusal => ({ reason: R.payee, message: `${what} pays someone other than this seller's accepting address (or its payees): agentgate signs and sends only for the seller a channel pays` });

export class BatchSettlementFacilitator {
  constructor(private readonly deps: BatchSettlementFacilitatorDeps) {}

  /** The request read: scheme, network and asset ours, the payload one of the scheme's. */
  private read(request: FacilitatorRequest, seller: SellerAccountDoc): Request | Refusal {
    const chain = this.deps.chain();
    if (request.x402Version !== 2) return { reason: 'invalid_x402_version', message: 'the batch-settlement scheme is x402 v2 only' };
    const accepted = (request.paymentPayload.accepted ?? {}) as { scheme?: unknown; network?: unknown };
    if (accepted.scheme !== 'batch-settlement' || request.paymentRequirements.scheme !== 'batch-settlement') {
      return { reason: R.scheme, message: 'the payload\'s accepted requirement and the requirements must both name the batch-settlement scheme' };
    }
    if (accepted.network !== request.paymentRequirements.network) return { reason: R.networkMismatch, message: 'the payload was accepted for another network' };
    const parsed = channelRequirementsSchema.safeParse(request.paymentRequirements);
    if (!parsed.success) return requirementsIssue(parsed.error);
    const requirements = parsed.data;
    if (requirements.network !== chain.caip2) return { reason: R.networkMismatch, message: `this facilitator settles on ${chain.caip2}, not ${requirements.network}` };
    if (!isAddressEqual(requirements.asset, chain.usdc.address)) return { reason: R.tokenMismatch, message: `this facilitator settles USDC at ${chain.usdc.address}, not ${requirements.asset}` };
    if (requirements.payTo) {
      const payee = payeeRefusal(seller, requirements.payTo);
      if (payee) return payee;
    }
    const decoded = decodeBatchSettlementPayload(request.paymentPayload.payload);
    if (!decoded.ok) return { reason: R.payloadType, message: decoded.message };
    return { payload: decoded.payload, requirements };
  }

  async verify(request: FacilitatorRequest, seller: SellerAccountDoc): Promise<FacilitatorAnswer> {
    const read = this.read(request, seller);
    if ('reason' in read) return { body: verifyRefusal(read) };
    const { payload, requirements } = read;
    const chain = this.deps.chain();
    const verdict = payload.type === 'deposit' ? await verifyDeposit(chain, payload, requirements, Math.floor(Date.now() / 1000))
      : payload.type === 'voucher' || payload.type === 'refund' ? await verifyVoucher(chain, payload, requirements)
        : { ok: false as const, reason: R.payloadType, message: `a ${payload.type} payload is settled, not verified` };
    if (!verdict.ok) return { body: verifyRefusal(verdict) };
    const screened = await this.deps.screen(verdict.payer, requirements.payTo ?? '', seller._id, false);
    if (screened) return { body: verifyRefusal(screened) };
    return { body: { isValid: true, payer: verdict.payer, extra: channelSnapshot(verdict.channelId, verdict.state) } };
  }

  async settle(request: FacilitatorRequest, seller: SellerAccountDoc, network: string): Promise<FacilitatorAnswer> {
    const read = this.read(request, seller);
    if ('reason' in read) return { body: settleRefusal(network, read) };
    const { payload, requirements } = read;
    try {
      switch (payload.type) {
        case 'deposit': return await this.deposit(seller, payload, requirements, network);
        case 'claim': return await this.claim(seller, payload, network);
        case 'settle': return await this.sweep(seller, payload, network);
        case 'refund': return await this.refund(seller, payload, network);
        default: return { body: settleRefusal(network, { reason: R.payloadType, message: 'a voucher is not settled on its own: the seller keeps it and claims it with others (type "claim")' }) };
      }
    } catch (err) {
      if (nodeFault(err)) throw chainUnavailable(err);
      throw err;
    }
  }

  /** Runs an action once (settle.ts) and answers its outcome; 503 when no lane could take it (nothing was sent). */
  private async act(action: Parameters<typeof runAction>[1], work: Parameters<typeof runAction>[2]): Promise<FacilitatorAnswer> {
    const outcome = await runAction(this.deps.actions(), action, work, this.deps.submit, { waitMs: this.deps.settlementTimeoutMs, staleMs: this.deps.settlementTimeoutMs * 3, log: this.deps.log });
    if ('unavailable' in outcome) throw new AppError(503, 'relayer_unavailable', `${outcome.unavailable}; nothing was sent, the same request may be made again`, undefined, { 'Retry-After': '2' });
    return { body: outcome.answer };
  }

  /**
   * This network's actions still `sending` long after they were recorded (their process died between recording and
   * sending, or between sending and recording): each handed to a lane again, whose executor asks the chain
   * first what became of it and records that (or sends it, if it never left).
   */
  async finishStale(olderThanMs: number): Promise<number> {
    const stale = await this.deps.actions().find({ status: 'sending', chainId: this.deps.chain().chainId, createdAt: { $lt: new Date(Date.now() - olderThanMs) } }).limit(100).lean();
    let finished = 0;
    for (const action of stale) {
      const outcome = await this.deps.submit({ id: action._id, kind: `batch-settlement.${action.kind}`, data: action.work });
      if ('done' in outcome) finished++;
      else this.deps.log.warn({ actionId: action._id, why: outcome.unavailable }, 'a stale channel action could not be handed to a lane; the next round tries again');
    }
    return finished;
  }

  /**
   * The answer an action already gave, if it succeeded (a retry of a deposit whose authorization is now
   * used). `waitMs`: how long to wait for one still being sent.
   */
  private async answered(key: string, waitMs = 0): Promise<ActionAnswer | undefined> {
    const deadline = Date.now() + waitMs;
    let action = await this.deps.actions().findById(key).lean();
    while (action?.status === 'sending' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      action = await this.deps.actions().findById(key).lean();
    }
    return action?.status === 'succeeded' ? action.answer : undefined;
  }

  /**
   * A refusal that the chain's state made: unless the same action, presented twice at once, was sent by the
   * other request since this one looked for an earlier answer. The chain then shows what that one did (a
   * used authorization, an emptied channel), and its answer is this one's too: a CI run answered the second of
   * two concurrent deposits success: false.
   */
  private async refusedUnlessAnswered(key: string | undefined, network: string, refusal: Refusal): Promise<FacilitatorAnswer> {
    return { body: (key && await this.answered(key, this.deps.settlementTimeoutMs)) || settleRefusal(network, refusal) };
  }

  /** Sends a deposit once (a deposit presented again answers the first one's outcome): /settle's, and the first paid call's of a channel (voucher-book.ts). */
  async deposit(seller: SellerAccountDoc, payload: DepositPayload, requirements: BatchSettlementRequirements, network: string): Promise<FacilitatorAnswer> {
    const chain = this.deps.chain();
    const payer = getAddress(payload.channelConfig.payer);
    const authorization = depositAuthorization(payload, requirements);
    const key = authorization && `deposit:${depositKey(chain.chainId, payer, authorization)}`;
    const earlier = key && await this.answered(key);
    if (earlier) return { body: earlier };
    const verdict = await verifyDeposit(chain, payload, requirements, Math.floor(Date.now() / 1000));
    if (!verdict.ok) return this.refusedUnlessAnswered(key, network, verdict);
    // Nothing is recorded or sent for a listed payer or receiver.
    const screened = await this.deps.screen(payer, payload.channelConfig.receiver, seller._id);
    if (screened) return { body: settleRefusal(network, screened) };
    await this.deps.ensureCanSend();
    return this.act(
      { _id: `deposit:${depositKey(chain.chainId, payer, verdict.authorization)}`, kind: 'deposit', orgId: seller._id, chainId: chain.chainId, channelIds: [verdict.channelId], receiver: getAddress(payload.channelConfig.receiver), payer, amount: verdict.amount.toString() },
      { network, config: payload.channelConfig, channelId: verdict.channelId, payer, amount: verdict.amount.toString(), collector: verdict.collector, collectorData: verdict.collectorData, authorization: verdict.authorization },
    );
  }

  /** The receiver authorizer's signature over claims: the seller's own, or ours when the channels name us. */
  private async claimSignature(claims: readonly VoucherClaim[], given: Hex | undefined): Promise<Hex | Refusal> {
    if (given) return given;
    const ours = await this.deps.authorizer.address();
    if (claims.some((c) => !isAddressEqual(c.voucher.channel.receiverAuthorizer, ours))) {
      return { reason: R.authorizerAddressMismatch, message: `no claimAuthorizerSignature, and not every channel names agentgate's receiver authorizer ${ours}` };
    }
    return this.deps.authorizer.signClaims(claims, this.deps.chain().chainId);
  }

  /** Claims these rows for the seller's channels in one transaction (what a claim payload asks, and the channel book's sweep). */
  async claimRows(seller: Seller, claims: VoucherClaim[], given: Hex | undefined, network: string): Promise<FacilitatorAnswer> {
    const chain = this.deps.chain();
    const foreign = claims.find((c) => !acceptsPayee(seller, c.voucher.channel.receiver));
    if (foreign) return { body: settleRefusal(network, notSellers(`the channel ${channelIdOf(foreign.voucher.channel, chain.chainId)}`)) };
    // A channel whose payer or receiver is listed now is not claimed (its payer gets the deposit back by the channel's refund).
    for (const { voucher: { channel } } of claims) {
      const screened = await this.deps.screen(channel.payer, channel.receiver, seller._id);
      if (screened) return { body: settleRefusal(network, screened) };
    }
    const signature = await this.claimSignature(claims, given);
    if (typeof signature !== 'string') return { body: settleRefusal(network, signature) };
    await this.deps.ensureCanSend();
    const ids = claims.map((c) => channelIdOf(c.voucher.channel, chain.chainId));
    // The same rows claimed twice are one claim.
    const rows = claims.map((c, i) => `${ids[i]}:${c.voucher.maxClaimableAmount}:${c.totalClaimed}`).sort().join(',');
    return this.act(
      { _id: `claim:${chain.chainId}:${keccak256(toHex(rows))}`, kind: 'claim', orgId: seller._id, chainId: chain.chainId, channelIds: [...new Set(ids)], receiver: getAddress(claims[0]!.voucher.channel.receiver) },
      { network, claims: claims.map(wireClaim), authorizerSignature: signature },
    );
  }

  private async claim(seller: SellerAccountDoc, payload: ClaimPayload, network: string): Promise<FacilitatorAnswer> {
    return this.claimRows(seller, payload.claims.map(toClaim), payload.claimAuthorizerSignature, network);
  }

  /** `settle(receiver, token)`: sweeps what was claimed for the receiver to it (permissionless on chain; here for the seller's own receivers). */
  async sweep(seller: Seller, payload: Pick<SettlePayload, 'receiver' | 'token'>, network: string): Promise<FacilitatorAnswer> {
    const chain = this.deps.chain();
    if (!acceptsPayee(seller, payload.receiver)) return { body: settleRefusal(network, notSellers(`the receiver ${payload.receiver}`)) };
    if (!isAddressEqual(payload.token, chain.usdc.address)) return { body: settleRefusal(network, { reason: R.tokenMismatch, message: `this facilitator settles USDC at ${chain.usdc.address}` }) };
    const [totalClaimed, totalSettled] = await chain.publicClient.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'receivers', args: [getAddress(payload.receiver), getAddress(payload.token)] });
    if (totalClaimed <= totalSettled) return { body: settleRefusal(network, { reason: R.nothingToSettle, message: 'nothing to settle for receiver and token' }) };
    await this.deps.ensureCanSend();
    return this.act(
      { _id: `settle:${chain.chainId}:${payload.receiver.toLowerCase()}:${payload.token.toLowerCase()}:${totalClaimed}`, kind: 'settle', orgId: seller._id, chainId: chain.chainId, channelIds: [], receiver: getAddress(payload.receiver), amount: (totalClaimed - totalSettled).toString() },
      { network, receiver: getAddress(payload.receiver), token: getAddress(payload.token), claimedTotal: totalClaimed.toString() },
    );
  }

  /**
   * A cooperative refund of what the channel holds beyond what is claimed (after the claims the seller
   * sends with it): `refundWithSignature`, with those claims first in one `multicall`.
   */
  async refund(seller: Seller, payload: RefundPayload, network: string): Promise<FacilitatorAnswer> {
    const chain = this.deps.chain();
    const config = payload.channelConfig;
    const payer = getAddress(config.payer);
    if (payload.amount === undefined || payload.refundNonce === undefined || payload.claims === undefined) {
      return { body: settleRefusal(network, { reason: R.payloadType, message: 'a refund is settled with its amount, refundNonce and claims (the seller adds them to the buyer\'s refund)', payer }) };
    }
    if (!acceptsPayee(seller, config.receiver)) return { body: settleRefusal(network, { ...notSellers('this channel'), payer }) };
    const channelId = channelIdOf(config, chain.chainId);
    const claims = payload.claims.map(toClaim);
    if (claims.some((c) => !acceptsPayee(seller, c.voucher.channel.receiver))) return { body: settleRefusal(network, { ...notSellers('a claim sent with the refund'), payer }) };
    const key = `refund:${chain.chainId}:${channelId}:${payload.refundNonce}`;
    const earlier = await this.answered(key);
    if (earlier) return { body: earlier };
    const state = await readChannelState(chain.publicClient, channelId);
    const claimedAfter = claims.reduce((max, c) => (channelIdOf(c.voucher.channel, chain.chainId).toLowerCase() === channelId.toLowerCase() && c.totalClaimed > max ? c.totalClaimed : max), state.totalClaimed);
    if (payload.amount === 0n) return { body: settleRefusal(network, { reason: R.refundPayload, message: 'a refund must be of more than 0', payer }) };
    if (claimedAfter >= state.balance) return this.refusedUnlessAnswered(key, network, { reason: R.refundNoBalance, message: 'Nothing to refund', payer });
    let refundSignature = payload.refundAuthorizerSignature;
    if (!refundSignature) {
      const ours = await this.deps.authorizer.address();
      if (!isAddressEqual(config.receiverAuthorizer, ours)) return { body: settleRefusal(network, { reason: R.authorizerAddressMismatch, message: `no refundAuthorizerSignature, and the channel does not name agentgate's receiver authorizer ${ours}`, payer }) };
      refundSignature = await this.deps.authorizer.signRefund(channelId, payload.refundNonce, payload.amount, chain.chainId);
    }
    let claimSignature: Hex | undefined;
    if (claims.length) {
      const signed = await this.claimSignature(claims, payload.claimAuthorizerSignature);
      if (typeof signed !== 'string') return { body: settleRefusal(network, { ...signed, payer }) };
      claimSignature = signed;
    }
    await this.deps.ensureCanSend();
    return this.act(
      { _id: key, kind: 'refund', orgId: seller._id, chainId: chain.chainId, channelIds: [channelId], receiver: getAddress(config.receiver), payer, amount: payload.amount.toString() },
      { network, config, channelId, amount: payload.amount.toString(), nonce: payload.refundNonce.toString(), refundSignature, claims: claims.map(wireClaim), ...(claimSignature ? { claimSignature } : {}) },
    );
  }
}
