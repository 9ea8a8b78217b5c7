import { getAddress, type Address, type Hex } from 'viem';
import type { Connection, Model } from 'mongoose';
import { decodePaymentHeader, type DecodedPaymentHeader } from '../../middleware/protocol/payment-header.js';
import { buildRequirementV1 } from '../../middleware/challenge.js';
import { parsePrice, formatUsdc } from '../../middleware/price.js';
import { AppError, notFound } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { afterCursor, pageOf, type Cursor } from '../platform/pagination.js';
import type { ChainService } from '../chain/chain-service.js';
import type { ActivityLog } from '../logs/activity-log.js';
import type { Config } from '../platform/config.js';
import { endpointSchema, paymentSchema, sellerAccountSchema, type EndpointDoc, type PaymentDoc, type SellerAccountDoc } from './models.js';
import { verifyPayment } from './verify-payment.js';
import { PayerReads } from '../chain/payer-reads.js';
import type { SettleOutcome } from '../settlement/settler.js';
import type { SettlementEngine } from '../settlement/engine.js';
import type { SendTools, SettlementWork, WorkOutcome } from '../settlement/work.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { ChangeFeed } from '../platform/change-feed.js';
import { TtlCache } from '../platform/ttl-cache.js';
import { GroupedInserts, GroupedUpdates, type GroupCommitOptions } from '../platform/group-commit.js';
import { isDatabaseUnavailable, retryWhileDatabaseAway } from '../platform/database-outage.js';
import type { Collection } from 'mongodb';
import { signOfferReceipt, signReceipt, type ReceiptSigner } from './receipts.js';
import { SettledPayments, settledRecord, settlementFields, type SettledPaymentDoc } from './settled-payments.js';
import { authorizationOf, type SettlementResult } from './settlement.js';
import { PaymentIdentifiers } from './payment-identifier.js';
import { endpointUrlsFor, normalizeResource } from './resource-url.js';
import { offerReceiptExtension } from '../../middleware/offer-receipt.js';
import type { UptoPaymentPayloadV2 } from '../../middleware/protocol/upto-evm.js';
import { verifyUptoPayment } from './verify-upto.js';
import { eip2612PermitOfRecord, sendUptoSettlement, uptoPermitOfRecord } from './upto-settlement.js';
import type { IdentifiedPayment } from './payment-identifier.js';

export type RedeemOutcome =
  | { ok: true; paymentId: string; paymentResponse: { success: true; transaction: string; network: string; payer: string; amount?: string; extensions?: Record<string, unknown> } }
  | { ok: false; error: string; message: string; requirement?: unknown };

/** Narrows a payment list (the console's filters); every field optional, all given ones must hold. */
export interface PaymentFilter {
  status?: PaymentDoc['status'];
  endpointId?: string;
  payerAddress?: string;
  /** createdAt >= from */
  from?: Date;
  /** createdAt < until */
  until?: Date;
  /** The console's search box: one payment by id, by transaction hash, or a payer (on top of payerAddress). */
  paymentId?: string;
  txHash?: string;
  searchPayer?: string;
}

/** Payers are stored checksummed; an address typed in lower case must find them too. */
const payerIn = (address: string) => ({ $in: [getAddress(address.toLowerCase()), address.toLowerCase()] });

export function filterQuery(filter: PaymentFilter): Record<string, unknown> {
  const query: Record<string, unknown> = {};
  if (filter.status) query.status = filter.status;
  if (filter.endpointId) query.endpointId = filter.endpointId;
  if (filter.payerAddress) query.payerAddress = payerIn(filter.payerAddress);
  if (filter.from || filter.until) query.createdAt = { ...(filter.from ? { $gte: filter.from } : {}), ...(filter.until ? { $lt: filter.until } : {}) };
  if (filter.paymentId) query._id = filter.paymentId;
  // Transaction hashes are stored as viem returns them, in lower case.
  if (filter.txHash) query.txHash = filter.txHash.toLowerCase();
  if (filter.searchPayer) {
    if (filter.payerAddress) query.$and = [{ payerAddress: payerIn(filter.payerAddress) }, { payerAddress: payerIn(filter.searchPayer) }];
    else query.payerAddress = payerIn(filter.searchPayer);
  }
  return query;
}

/** What a payment must meet, and which door it came through (for the metrics). */
export interface SettleTerms { resource: string; amountAtomic: bigint; endpoint: EndpointDoc | null; door: 'redeem' | 'facilitator'; /** The payee; default the seller's payTo. */ payTo?: string }

/**
 * What an `upto` payment must meet: the seller's payee and the maximum the requirements named (which the
 * permit must allow exactly). `charge` is what settlement takes, at most the maximum; unknown while held.
 */
export interface UptoSettleTerms { resource: string; maxAmount: bigint; endpoint: EndpointDoc | null; door: 'redeem' | 'facilitator'; payTo?: string }

/** Our middleware's redeem (and hold) call: the buyer's header, the resource and the price it answered for. */
export interface RedeemInput { paymentHeader: string; resource: string; amount: string; payTo?: string }

export interface PreparedRedeem {
  seller: SellerAccountDoc;
  decoded: Extract<ReturnType<typeof decodePaymentHeader>, { ok: true }>;
  terms: SettleTerms;
  refuse: (error: string, message: string) => Extract<RedeemOutcome, { ok: false }>;
}

/**
 * A record being settled: `verified` (redeem, the facilitator API) or `held` with a capture decision
 * (holds.ts). Only these are written with the outcome.
 */
export const OPEN: PaymentDoc['status'][] = ['verified', 'held'];

const isPending = (result: SettlementResult) => !result.ok && result.reason === 'settle_unconfirmed';

/** The promise's value, or `fallback` if it takes longer than `ms` (the promise goes on). */
function withDeadline<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout;
  const deadline = new Promise<T>((resolve) => { timer = setTimeout(() => resolve(fallback), ms); });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** Called in the same step that records a settled payment (webhooks plug in here). */
export type SettledHook = (payment: PaymentDoc, endpoint: EndpointDoc) => Promise<void>;


/**
 * The facilitator: seller settings and endpoints, and redeem = verify, claim the nonce, settle on chain,
 * record, sign a receipt. Money moves at most once per authorization because the claim is a unique index
 * written before the transaction is sent. A paid request's answer waits for two database writes, both
 * unique inserts grouped with those of concurrent requests (platform/group-commit.ts): the claim, and the
 * settlement with its receipt (settled-payments.ts; a duplicate fails only its own request). The payment
 * record is then updated from the settlement in the background, grouped into bulkWrites; reads through
 * this service show a record whose update is still on its way as settled. Seller settings and endpoints
 * are served from memory (SELLER_CACHE_TTL_MS).
 */
export class PaymentService {
  readonly payments: Model<PaymentDoc>;
  readonly endpoints: Model<EndpointDoc>;
  readonly sellers: Model<SellerAccountDoc>;
  readonly onSettled: SettledHook[] = [];
  private readonly identifiers: PaymentIdentifiers;
  /** orgId -> acceptance, and `${orgId} ${url}` -> endpoint; null caches "none". */
  private readonly acceptanceCache: TtlCache<SellerAccountDoc | null>;
  private readonly endpointCache: TtlCache<EndpointDoc | null>;
  /** Payment claims (unique authorization key), grouped into insertMany commands. */
  private readonly claims: GroupedInserts<PaymentDoc>;
  /** Updates of payment records to settled, grouped into bulkWrite commands. */
  readonly recordUpdates: GroupedUpdates<PaymentDoc>;
  /** Settlements as their buyers were told them: the unique insert a settled answer waits for. */
  readonly settlements: SettledPayments;
  /** Record updates of this process still on their way (background, after the settlement entry). */
  private readonly recordWrites = new Set<Promise<void>>();
  /** The chain reads of payments verified at the same time, in one Multicall3 call. */
  private readonly payerReads: PayerReads | undefined;

  constructor(
    conn: Connection,
    private readonly config: Config,
    readonly chain: ChainService | undefined,
    /**
     * The settlement engine: the desk this process hands claimed payments to, and, in a process holding
     * relayer lanes, the executors below run there for payments accepted anywhere; undefined without a chain.
     */
    readonly settlement: SettlementEngine | undefined,
    private readonly signer: () => ReceiptSigner,
    private readonly logs: ActivityLog,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    /** Seller settings and endpoints changed in any process reach this one's caches within a poll. */
    private readonly changes: ChangeFeed,
    /** How record updates are grouped on this database (platform/group-commit.ts updateGroupingFor). */
    updateGrouping: Pick<GroupCommitOptions, 'maxBatch' | 'maxInFlight'> = {},
  ) {
    this.payments = conn.models.Payment ?? conn.model<PaymentDoc>('Payment', paymentSchema, 'payments');
    this.endpoints = conn.models.Endpoint ?? conn.model<EndpointDoc>('Endpoint', endpointSchema, 'endpoints');
    this.sellers = conn.models.SellerAccount ?? conn.model<SellerAccountDoc>('SellerAccount', sellerAccountSchema, 'seller_accounts');
    // The kinds of settlement work payments owns: run by whichever process holds the lane given the work.
    settlement?.register('exact', (work, tools) => this.execute(work as SettlementWork<PaymentDoc>, tools));
    settlement?.register('upto', (work, tools) => this.execute(work as SettlementWork<PaymentDoc>, tools));
    this.identifiers = new PaymentIdentifiers(conn, config.SETTLEMENT_TIMEOUT_MS);
    const paymentsCollection = () => this.payments.collection as unknown as Collection<PaymentDoc>;
    this.claims = new GroupedInserts(paymentsCollection, { onCommand: (size) => metrics.groupCommitSize.observe({ write: 'payment_claims' }, size) });
    this.recordUpdates = new GroupedUpdates(paymentsCollection, { ...updateGrouping, onCommand: (size) => metrics.groupCommitSize.observe({ write: 'payment_records' }, size) });
    this.settlements = new SettledPayments(conn, (size) => metrics.groupCommitSize.observe({ write: 'payment_settlements' }, size));
    metrics.onCollect(() => metrics.paymentRecordWritesPending.set(this.recordWrites.size));
    this.payerReads = chain && new PayerReads(chain, config.MULTICALL3_ADDRESS as Address, {
      onCommand: (size) => metrics.payerReadBatchSize.observe(size),
      onFallback: (reason) => log.warn({ multicall: config.MULTICALL3_ADDRESS, reason }, 'verification reads fall back to two eth_calls per payment: Multicall3 did not answer at MULTICALL3_ADDRESS'),
    });
    changes.on('seller', (orgId) => {
      this.acceptanceCache.delete(orgId);
      this.endpointCache.deletePrefix(`${orgId} `);
    });
    changes.onReset(() => {
      this.acceptanceCache.deleteWhere(() => true);
      this.endpointCache.deleteWhere(() => true);
    });
    this.acceptanceCache = new TtlCache(config.SELLER_CACHE_TTL_MS);
    this.endpointCache = new TtlCache(config.SELLER_CACHE_TTL_MS);
  }

  requireChain(): ChainService {
    if (!this.chain) throw new AppError(503, 'payments_unavailable', 'Payments are not configured on this server (CHAIN_RPC_URL)');
    return this.chain;
  }

  // --- seller settings -------------------------------------------------------------------------

  async setAcceptance(orgId: string, input: { enabled: boolean; payTo: string; payees?: string[] }): Promise<SellerAccountDoc> {
    const payTo = getAddress(input.payTo);
    const payees = [...new Set((input.payees ?? []).map((a) => getAddress(a)))].filter((a) => a !== payTo);
    const doc = await this.sellers.findOneAndUpdate({ _id: orgId }, { $set: { enabled: input.enabled, payTo, payees, updatedAt: new Date() } }, { upsert: true, returnDocument: 'after' }).lean();
    await this.changes.publish('seller', orgId);
    await this.logs.record({ orgId, action: 'payments.acceptance_updated', category: 'payments', description: `Payment acceptance ${input.enabled ? 'enabled' : 'disabled'}`, targetType: 'org', targetId: orgId, metadata: { payTo, payees } });
    return doc!;
  }

  async acceptance(orgId: string): Promise<SellerAccountDoc | null> {
    return this.sellers.findById(orgId).lean();
  }

  /** What a seller's middleware caches at start-up to build challenges locally. */
  async settingsFor(orgId: string) {
    const seller = await this.acceptance(orgId);
    if (!seller?.enabled) throw new AppError(409, 'payments_not_enabled', 'Payment acceptance is not turned on for this org (PUT /v0/payments/acceptance)');
    return { ...this.settingsOf(seller), uptoFacilitator: await this.uptoFacilitatorAddress() };
  }

  /** What a 402 for this seller names (the upto facilitator aside: settingsFor adds it). */
  private settingsOf(seller: SellerAccountDoc) {
    const chain = this.requireChain();
    return {
      network: chain.network, chainId: chain.chainId, asset: chain.usdc.address, payTo: seller.payTo,
      assetName: chain.usdc.name, assetVersion: chain.usdc.version, maxTimeoutSeconds: 60,
    };
  }

  // --- endpoints -------------------------------------------------------------------------------

  async createEndpoint(orgId: string, input: { id: string; url: string; priceUsdc?: string; maxPriceUsdc?: string; description?: string; webhookUrl?: string; webhookSecret?: EndpointDoc['webhookSecret']; discoverable?: boolean; inputSchemaJson?: string | null; outputSchemaJson?: string | null }): Promise<EndpointDoc> {
    const url = normalizeResource(input.url);
    const pricing = input.maxPriceUsdc !== undefined ? 'dynamic' : 'fixed';
    const priceAtomic = this.priceOf(input.maxPriceUsdc ?? input.priceUsdc!, pricing === 'dynamic' ? 'maxPriceUsdc' : 'priceUsdc');
    // In dev, another loopback spelling of the same URL is the same endpoint (resource-url.ts).
    const existing = await this.endpoints.findOne({ orgId, url: { $in: endpointUrlsFor(url, this.config.mode) }, deletedAt: null }).lean();
    if (existing) throw new AppError(409, 'endpoint_exists', `An endpoint for ${url} is already registered (${existing._id})`);
    const now = new Date();
    const doc = await this.endpoints.create({
      _id: input.id, orgId, url, priceUsdc: formatUsdc(priceAtomic), priceAtomic: priceAtomic.toString(), pricing,
      description: input.description ?? '', webhookUrl: input.webhookUrl, webhookSecret: input.webhookSecret, createdAt: now, updatedAt: now,
      discoverable: input.discoverable ?? false, inputSchemaJson: input.inputSchemaJson ?? undefined, outputSchemaJson: input.outputSchemaJson ?? undefined,
    });
    await this.changes.publish('seller', orgId);
    await this.logs.record({ orgId, action: 'payments.endpoint_registered', category: 'payments', description: `Endpoint ${url} registered at ${pricing === 'dynamic' ? 'up to ' : ''}${formatUsdc(priceAtomic)} USDC`, targetType: 'endpoint', targetId: doc._id });
    return doc.toObject();
  }

  async listEndpoints(orgId: string): Promise<EndpointDoc[]> {
    return this.endpoints.find({ orgId, deletedAt: null }).sort({ createdAt: -1 }).lean();
  }

  async getEndpoint(orgId: string, id: string): Promise<EndpointDoc> {
    const doc = await this.endpoints.findOne({ _id: id, orgId, deletedAt: null }).lean();
    if (!doc) throw notFound('Endpoint not found');
    return doc;
  }

  async updateEndpoint(orgId: string, id: string, change: { priceUsdc?: string; maxPriceUsdc?: string; description?: string; webhookUrl?: string | null; webhookSecret?: EndpointDoc['webhookSecret'] | null; discoverable?: boolean; inputSchemaJson?: string | null; outputSchemaJson?: string | null }): Promise<EndpointDoc> {
    const set: Record<string, unknown> = { updatedAt: new Date() };
    const unset: Record<string, 1> = {};
    // A fixed price, or the cap of a dynamic one: either one also sets how the endpoint is priced.
    const newPrice = change.maxPriceUsdc ?? change.priceUsdc;
    if (newPrice !== undefined) {
      const atomic = this.priceOf(newPrice, change.maxPriceUsdc !== undefined ? 'maxPriceUsdc' : 'priceUsdc');
      set.priceAtomic = atomic.toString();
      set.priceUsdc = formatUsdc(atomic);
      set.pricing = change.maxPriceUsdc !== undefined ? 'dynamic' : 'fixed';
    }
    if (change.description !== undefined) set.description = change.description;
    if (change.webhookUrl === null) { unset.webhookUrl = 1; unset.webhookSecret = 1; }
    else if (change.webhookUrl !== undefined) set.webhookUrl = change.webhookUrl;
    if (change.webhookSecret) set.webhookSecret = change.webhookSecret;
    if (change.discoverable !== undefined) set.discoverable = change.discoverable;
    for (const field of ['inputSchemaJson', 'outputSchemaJson'] as const) {
      if (change[field] === null) unset[field] = 1;
      else if (change[field] !== undefined) set[field] = change[field];
    }
    const doc = await this.endpoints.findOneAndUpdate({ _id: id, orgId, deletedAt: null }, { $set: set, ...(Object.keys(unset).length ? { $unset: unset } : {}) }, { returnDocument: 'after' }).lean();
    if (!doc) throw notFound('Endpoint not found');
    await this.changes.publish('seller', orgId);
    await this.logs.record({ orgId, action: 'payments.endpoint_updated', category: 'payments', description: `Endpoint ${doc.url} updated`, targetType: 'endpoint', targetId: id, metadata: { priceUsdc: doc.priceUsdc, webhookUrl: doc.webhookUrl ?? null } });
    return doc;
  }

  async deleteEndpoint(orgId: string, id: string): Promise<void> {
    const doc = await this.endpoints.findOneAndUpdate({ _id: id, orgId, deletedAt: null }, { $set: { deletedAt: new Date() } }).lean();
    if (!doc) throw notFound('Endpoint not found');
    await this.changes.publish('seller', orgId);
    await this.logs.record({ orgId, action: 'payments.endpoint_deleted', category: 'payments', description: `Endpoint ${doc.url} deleted`, targetType: 'endpoint', targetId: id });
  }

  private priceOf(priceUsdc: string, field: 'priceUsdc' | 'maxPriceUsdc' = 'priceUsdc'): bigint {
    try {
      const atomic = parsePrice(priceUsdc);
      if (atomic <= 0n) throw new Error('must be greater than zero');
      return atomic;
    } catch (err) {
      throw new AppError(400, 'validation_error', `body.${field}: ${(err as Error).message}`);
    }
  }

  // --- redeem ----------------------------------------------------------------------------------

  async redeem(orgId: string, input: RedeemInput): Promise<RedeemOutcome> {
    const prepared = await this.prepareRedeem(orgId, input);
    if ('refused' in prepared) return prepared.refused;
    const { seller, decoded, terms, refuse } = prepared;
    const outcome = await this.settle(seller, decoded, terms);
    if (!outcome.ok) return refuse(outcome.reason, outcome.message);
    return this.redeemed(outcome, decoded.version);
  }

  /** The answer of a settled redeem, in the settlement header's form for the payload's version. */
  redeemed(outcome: Extract<SettlementResult, { ok: true }>, version: 1 | 2): Extract<RedeemOutcome, { ok: true }> {
    const chain = this.requireChain();
    return {
      ok: true,
      paymentId: outcome.paymentId,
      paymentResponse: {
        success: true, transaction: outcome.txHash, network: version === 1 ? chain.network : chain.caip2, payer: outcome.payer,
        ...(outcome.amount !== undefined ? { amount: outcome.amount } : {}),
        ...(outcome.offerReceipt ? { extensions: offerReceiptExtension(outcome.offerReceipt) } : {}),
      },
    };
  }

  /**
   * What our middleware's redeem and hold share: the accepting seller, the registered endpoint, the amount
   * checked against its price, the decoded header; or the refusal, with the requirement to pay.
   */
  async prepareRedeem(orgId: string, input: RedeemInput): Promise<PreparedRedeem | { refused: Extract<RedeemOutcome, { ok: false }> }> {
    const prepared = await this.prepareTerms(orgId, input, 'exact');
    if ('refused' in prepared) return prepared;
    const decoded = decodePaymentHeader(input.paymentHeader);
    if (!decoded.ok) return { refused: prepared.refuse(decoded.reason, decoded.message) };
    return { ...prepared, decoded };
  }

  /**
   * The seller-side checks of a redeem or hold, for either scheme: the accepting seller, the registered
   * endpoint, the amount against its price (an `upto` maximum against a usage-priced endpoint's cap), the
   * payee. The buyer's header is decoded by the caller, for its scheme.
   */
  async prepareTerms(orgId: string, input: RedeemInput, scheme: 'exact' | 'upto'): Promise<Omit<PreparedRedeem, 'decoded'> | { refused: Extract<RedeemOutcome, { ok: false }> }> {
    this.requireChain();
    const seller = await this.acceptingSeller(orgId);
    if (!seller) return { refused: { ok: false, error: 'payments_not_enabled', message: 'Payment acceptance is not turned on for this org' } };
    const resource = normalizeResource(input.resource);
    const endpoint = await this.endpointFor(orgId, resource);
    if (!endpoint) return { refused: { ok: false, error: 'resource_not_registered', message: `${resource} is not a registered endpoint of this seller` } };
    // The buyer's spelling of the resource: in dev it may be another loopback alias of endpoint.url. An
    // upto refusal names no v1 requirement (v1 has no upto).
    const requirement = scheme === 'exact' ? buildRequirementV1(this.settingsOf(seller), { amountAtomic: BigInt(endpoint.priceAtomic), resource, description: endpoint.description }) : undefined;
    const refuse = (error: string, message: string): Extract<RedeemOutcome, { ok: false }> => ({ ok: false, error, message, ...(requirement ? { requirement } : {}) });

    let amount: bigint;
    try { amount = parsePrice(input.amount); } catch { return { refused: refuse('amount_mismatch', `amount ${input.amount} is not a USDC amount`) }; }
    if (scheme === 'upto' && endpoint.pricing !== 'dynamic') {
      return { refused: refuse('amount_mismatch', `an upto route needs an endpoint priced by usage: register it with maxPriceUsdc (it has a fixed price of ${endpoint.priceUsdc})`) };
    }
    // A dynamic price (or an upto maximum) is whatever the seller's middleware asked, up to the registered cap.
    if (endpoint.pricing === 'dynamic') {
      if (amount <= 0n || amount > BigInt(endpoint.priceAtomic)) return { refused: refuse('amount_mismatch', `amount ${input.amount} is not within this endpoint's dynamic price (more than 0, at most ${endpoint.priceUsdc})`) };
    } else if (amount !== BigInt(endpoint.priceAtomic)) {
      return { refused: refuse('amount_mismatch', `amount ${input.amount} does not equal the registered price ${endpoint.priceUsdc}`) };
    }
    const payTo = getAddress(input.payTo ?? seller.payTo);
    if (!this.acceptsPayee(seller, payTo)) return { refused: refuse('recipient_not_allowed', `${payTo} is not this seller's payTo or one of its payees (PUT /v0/payments/acceptance)`) };
    return { seller, refuse, terms: { resource, amountAtomic: amount, payTo, endpoint, door: 'redeem' } };
  }

  /** Whether a payment may go to `address`: the seller's payTo or one of its payees. */
  acceptsPayee(seller: SellerAccountDoc, address: string): boolean {
    const a = address.toLowerCase();
    return seller.payTo.toLowerCase() === a || (seller.payees ?? []).some((p) => p.toLowerCase() === a);
  }

  /** Checks a payment against a seller's terms and the chain, moving nothing (the facilitator's /verify). */
  async verify(seller: SellerAccountDoc, decoded: DecodedPaymentHeader, terms: { amountAtomic: bigint; payTo?: string }) {
    return verifyPayment(decoded, { payTo: (terms.payTo ?? seller.payTo) as Address, amountAtomic: terms.amountAtomic }, this.requireChain(), {
      nowSeconds: Math.floor(Date.now() / 1000), marginSeconds: this.config.PAYMENT_VALIDITY_MARGIN_SECONDS, reads: this.payerReads,
    });
  }

  /**
   * The one path that moves money, for both doors (our middleware's redeem and the standard facilitator
   * API): verify, claim the authorization, settle on chain, record with a signed receipt. `endpoint` is
   * null for a resource the seller did not register (official SDK sellers): it is recorded by its URL.
   * The answer waits for the chain at most SETTLEMENT_TIMEOUT_MS; then it is a pending answer, and the
   * settlement goes on and is recorded (a retry with the same payment-identifier gets its final result).
   */
  async settle(seller: SellerAccountDoc, decoded: DecodedPaymentHeader, terms: SettleTerms): Promise<SettlementResult> {
    const chain = this.requireChain();
    const { from, nonce } = decoded.payload.payload.authorization;
    const key = `${chain.chainId}:${chain.usdc.address}:${from}:${nonce}`.toLowerCase();
    return this.settleIdempotently(seller, decoded, key, () => this.settleOnce(seller, decoded, terms));
  }

  /**
   * The same for an x402 `upto` payment (the facilitator API's settle): verify against the maximum, claim
   * the Permit2 nonce, and charge `charge` (at most the permit's maximum; zero moves nothing and sends no
   * transaction, but the claim stays: the permit is used up, as the scheme says).
   */
  async settleUpto(seller: SellerAccountDoc, payload: UptoPaymentPayloadV2, terms: UptoSettleTerms & { charge: bigint }): Promise<SettlementResult> {
    const identified: IdentifiedPayment = { version: 2, payload };
    const { from, nonce } = payload.payload.permit2Authorization;
    const key = `${this.requireChain().chainId}:permit2:${from}:${nonce}`.toLowerCase();
    return this.settleIdempotently(seller, identified, key, async () => {
      const claimed = await this.claimUpto(seller, payload, terms, { status: 'verified', charge: terms.charge });
      if (!claimed.ok) return { answer: claimed.refused };
      return this.settleClaimed(claimed.payment, terms);
    });
  }

  /** A payment-identifier makes a retry answer the first result instead of settling again. */
  private async settleIdempotently(seller: SellerAccountDoc, decoded: IdentifiedPayment, authorizationKey: string, once: () => Promise<{ answer: SettlementResult; final?: Promise<SettlementResult> }>): Promise<SettlementResult> {
    const identifier = await this.identifiers.claim(seller._id, decoded, () => this.outcomeByAuthorization(seller._id, authorizationKey));
    if (identifier.kind === 'invalid') return { ok: false, reason: 'invalid_payment_identifier', message: identifier.message };
    if (identifier.kind === 'conflict') return { ok: false, reason: 'payment_identifier_conflict', message: identifier.message };
    if (identifier.kind === 'repeat') return identifier.result;
    let attempt: { answer: SettlementResult; final?: Promise<SettlementResult> };
    try {
      attempt = await once();
    } catch (err) {
      if (identifier.kind === 'first') await identifier.release().catch(() => {});
      throw err;
    }
    const { answer, final } = attempt;
    if (identifier.kind === 'first') {
      // Only a final result is kept for repeats; an unconfirmed one leaves repeats waiting, and one that
      // sent nothing (no relayer) lets the retry run again.
      const keepOnce = async (result: SettlementResult) => {
        if (!result.ok && result.unavailable) await identifier.release();
        else if (!isPending(result)) await identifier.record(result);
      };
      // The answer is decided: a database away now must not turn it into an error. Kept once the database
      // answers again; a repeat meanwhile answers from the payment's own record.
      const keep = (result: SettlementResult) => keepOnce(result).catch(() => retryWhileDatabaseAway(() => keepOnce(result), this.log, 'recording a payment-identifier result'))
        .catch((err) => this.log.error({ err: (err as Error).message }, 'payment-identifier result not recorded'));
      if (isPending(answer) && final) void final.then(keep);
      else await Promise.race([keep(answer), new Promise((resolve) => setTimeout(resolve, 1_000))]);
    }
    if (!answer.ok && answer.unavailable) throw new AppError(503, 'relayer_unavailable', `${answer.message}; nothing was charged, the same payment may be presented again`, undefined, { 'Retry-After': '2' });
    return answer;
  }

  /**
   * What became of the seller's payment with this authorization: its result once settled or failed,
   * 'open' while being settled, 'absent' if it was never claimed (or its claim was let go). A read by a
   * field other than `_id`: only for a repeat whose first request left no result.
   */
  private async outcomeByAuthorization(orgId: string, authorizationKey: string): Promise<SettlementResult | 'open' | 'absent'> {
    const found = await this.payments.findOne({ authorizationKey, orgId }).lean();
    if (!found) return 'absent';
    const record = (await this.withSettlements([found]))[0]!;
    if (record.status === 'settled') {
      return {
        ok: true, paymentId: record._id, txHash: record.txHash ?? '', payer: record.payerAddress, ...(record.offerReceipt ? { offerReceipt: record.offerReceipt } : {}),
        ...(record.scheme === 'upto' ? { amount: record.amountUsdcRaw, maxAmount: record.maxAmountUsdcRaw } : {}),
      };
    }
    if (record.status === 'failed') {
      const reason = record.failureReason ?? 'settle_failed';
      return { ok: false, reason, message: `the payment's settlement failed: ${reason}`, payer: record.payerAddress, ...(record.txHash ? { txHash: record.txHash } : {}) };
    }
    return 'open';
  }

  private async settleOnce(seller: SellerAccountDoc, decoded: DecodedPaymentHeader, terms: SettleTerms): Promise<{ answer: SettlementResult; final?: Promise<SettlementResult> }> {
    const claimed = await this.claim(seller, decoded, terms, { status: 'verified' });
    if (!claimed.ok) return { answer: claimed.refused };
    return this.settleClaimed(claimed.payment, terms);
  }

  /**
   * Verifies a payment and claims its authorization: of any number of concurrent or replayed copies,
   * exactly one insert succeeds. `held` claims wait for the seller's capture or release (holds.ts);
   * `verified` ones are settled at once.
   */
  async claim(seller: SellerAccountDoc, decoded: DecodedPaymentHeader, terms: SettleTerms, how: { status: 'verified' } | { status: 'held'; until: Date }): Promise<{ ok: true; payment: PaymentDoc } | { ok: false; refused: Extract<SettlementResult, { ok: false }> }> {
    const chain = this.requireChain();
    const verified = await this.verify(seller, decoded, terms);
    if (!verified.ok) {
      this.metrics.paidRequests.inc({ outcome: verified.reason, door: terms.door });
      return { ok: false, refused: { ok: false, reason: verified.reason, message: verified.message } };
    }
    // A process that cannot send says so before claiming: nothing is recorded, the buyer may try again.
    await this.ensureSettlerOrRefuse(terms.door);

    const orgId = seller._id;
    const auth = verified.authorization;
    const payment: PaymentDoc = {
      _id: newId('pay'), orgId, direction: 'in', endpointId: terms.endpoint?._id ?? null, network: chain.network, chainId: chain.chainId,
      asset: chain.usdc.address, payerAddress: verified.payer, recipientAddress: getAddress(auth.to), amountUsdcRaw: terms.amountAtomic.toString(),
      resourceUrl: terms.resource, x402Version: decoded.version,
      authorizationKey: `${chain.chainId}:${chain.usdc.address}:${verified.payer}:${auth.nonce}`.toLowerCase(),
      authorizationNonce: auth.nonce, authorization: { ...auth }, signature: verified.signature, status: how.status, createdAt: new Date(),
      ...(how.status === 'held' ? { holdExpiresAt: how.until } : {}),
    };
    return this.insertClaim(payment, terms.door, 'this authorization was already presented');
  }

  /**
   * The claim itself. The unique index on authorizationKey decides, inside a grouped insert as alone: of
   * any number of copies, in one command or in several, one is inserted and the others are duplicates.
   */
  private async insertClaim(payment: PaymentDoc, door: SettleTerms['door'], duplicateMessage: string): Promise<{ ok: true; payment: PaymentDoc } | { ok: false; refused: Extract<SettlementResult, { ok: false }> }> {
    // A database away for a moment is waited for (within the settlement timeout). An insert that failed
    // that way may have landed all the same: a duplicate then may be our own claim.
    let uncertain = false;
    const insert = async () => {
      try {
        return await this.claims.insert(payment);
      } catch (err) {
        if (isDatabaseUnavailable(err)) uncertain = true;
        throw err;
      }
    };
    let result;
    try {
      result = await retryWhileDatabaseAway(insert, this.log, 'claiming a payment', Date.now() + this.config.SETTLEMENT_TIMEOUT_MS);
    } catch (err) {
      // The buyer is told to retry (503) and nothing may be charged: a claim that landed unseen goes as
      // soon as the database answers (before reconciliation would ever look at it).
      if (uncertain) this.releaseWhenBack(payment);
      throw err;
    }
    if (result === 'duplicate' && uncertain) {
      const existing = await retryWhileDatabaseAway(() => this.payments.findOne({ authorizationKey: payment.authorizationKey }, { _id: 1 }).lean(), this.log, 'reading a claim back');
      if (existing?._id === payment._id) result = 'inserted' as const;
    }
    if (result === 'duplicate') {
      this.metrics.paidRequests.inc({ outcome: 'nonce_already_used', door });
      return { ok: false, refused: { ok: false, reason: 'nonce_already_used', message: duplicateMessage, payer: payment.payerAddress } };
    }
    return { ok: true, payment };
  }

  /** Deletes an unsettled claim once the database answers again, however long that takes (this process lives). */
  private releaseWhenBack(payment: PaymentDoc): void {
    void retryWhileDatabaseAway(() => this.payments.deleteOne({ _id: payment._id, status: { $in: OPEN } }), this.log, 'releasing a claim the buyer was told to retry')
      .catch((err) => this.log.error({ paymentId: payment._id, err: (err as Error).message }, 'could not release a claim the buyer was told to retry'));
  }

  /**
   * 503 before a held payment is captured when this process cannot send its settlement now (the hold
   * stays, for a capture through another process or a release): exact payments need any relayer of this
   * process, an upto charge the one its permit names. A zero upto charge sends nothing.
   */
  async ensureCanSettle(payment: PaymentDoc, charge?: bigint): Promise<void> {
    if (payment.scheme !== 'upto') return this.ensureSettlerOrRefuse('redeem');
    if ((charge ?? 0n) > 0n) await this.ensureSenderOrRefuse(uptoPermitOfRecord(payment).facilitator, 'redeem');
  }

  /**
   * The accounts that settle `upto` payments: the relayer pool, one of which a buyer names in its permit
   * (read from the registry in a process given no keys; empty while no process with keys runs).
   */
  async uptoFacilitators(): Promise<Address[]> {
    this.requireChain();
    return (await this.settlement!.poolAddresses()).map((a) => getAddress(a));
  }

  /** The facilitator address /supported offers to `upto` sellers (the pool's first relayer), if known. */
  async uptoFacilitatorAddress(): Promise<Address | undefined> {
    return (await this.uptoFacilitators())[0];
  }

  /** Checks an upto payment against a seller's terms and the chain, moving nothing (the facilitator's /verify). */
  async verifyUpto(seller: SellerAccountDoc, payload: UptoPaymentPayloadV2, terms: { maxAmount: bigint; payTo?: string }) {
    return verifyUptoPayment(payload, { payTo: (terms.payTo ?? seller.payTo) as Address, maxAmount: terms.maxAmount }, this.requireChain(), await this.uptoFacilitators(), {
      nowSeconds: Math.floor(Date.now() / 1000), marginSeconds: this.config.PAYMENT_VALIDITY_MARGIN_SECONDS,
    });
  }

  /**
   * Verifies an upto payment and claims its Permit2 nonce (a unique insert: of concurrent or replayed
   * copies exactly one gets through). The record's amount is the charge when known (settled at once),
   * else the maximum until the hold is captured.
   */
  async claimUpto(seller: SellerAccountDoc, payload: UptoPaymentPayloadV2, terms: UptoSettleTerms, how: { status: 'verified'; charge: bigint } | { status: 'held'; until: Date }): Promise<{ ok: true; payment: PaymentDoc } | { ok: false; refused: Extract<SettlementResult, { ok: false }> }> {
    const chain = this.requireChain();
    const verified = await this.verifyUpto(seller, payload, terms);
    if (!verified.ok) {
      this.metrics.paidRequests.inc({ outcome: verified.reason, door: terms.door });
      return { ok: false, refused: { ok: false, reason: verified.reason, message: verified.message } };
    }
    const { permit } = verified;
    if (how.status === 'verified' && how.charge > permit.maxAmount) {
      this.metrics.paidRequests.inc({ outcome: 'settlement_exceeds_amount', door: terms.door });
      return { ok: false, refused: { ok: false, reason: 'settlement_exceeds_amount', message: `the charge ${how.charge} is above the permit's maximum ${permit.maxAmount}`, payer: permit.from } };
    }
    // Only the facilitator the buyer named can send the settlement: this process must hold that relayer.
    const charge = how.status === 'verified' ? how.charge : permit.maxAmount;
    if (charge > 0n || how.status === 'held') await this.ensureSenderOrRefuse(permit.facilitator, terms.door);
    const wire = payload.payload.permit2Authorization;
    const payment: PaymentDoc = {
      _id: newId('pay'), orgId: seller._id, direction: 'in', endpointId: terms.endpoint?._id ?? null, network: chain.network, chainId: chain.chainId,
      asset: chain.usdc.address, payerAddress: permit.from, recipientAddress: permit.to, amountUsdcRaw: charge.toString(),
      maxAmountUsdcRaw: permit.maxAmount.toString(), scheme: 'upto', resourceUrl: terms.resource, x402Version: 2,
      authorizationKey: `${chain.chainId}:permit2:${permit.from}:${permit.nonce}`.toLowerCase(),
      authorizationNonce: permit.nonce.toString(),
      authorization: { from: permit.from, to: permit.to, value: permit.maxAmount.toString(), validAfter: permit.validAfter.toString(), validBefore: permit.deadline.toString(), nonce: permit.nonce.toString() },
      permit2Authorization: { ...wire, nonce: permit.nonce.toString() },
      ...(verified.permit2612 ? { eip2612Permit: { ...verified.permit2612, value: verified.permit2612.value.toString(), deadline: verified.permit2612.deadline.toString() } } : {}),
      signature: verified.signature, status: how.status, createdAt: new Date(),
      ...(how.status === 'held' ? { holdExpiresAt: how.until } : {}),
    };
    return this.insertClaim(payment, terms.door, 'this permit was already presented');
  }

  /**
   * Settles a claimed payment: hands it to the settlement desk, which gives it to a relayer lane of this
   * process or of another one, whose holder sends it and records the outcome. The answer waits at most
   * SETTLEMENT_TIMEOUT_MS; `final` is the outcome whenever it comes (it is recorded either way). Nothing
   * sent (no lane could take it): the claim goes, and the buyer may present the same payment again.
   */
  settleClaimed(payment: PaymentDoc, terms: Pick<SettleTerms, 'door'>): Promise<{ answer: SettlementResult; final: Promise<SettlementResult> }> {
    const claimedAt = Date.now();
    const final = this.handOver(payment)
      .then((result) => {
        const outcome = result.ok ? 'settled' : result.reason;
        this.metrics.paidRequests.inc({ outcome, door: terms.door });
        const kind = result.ok ? 'settled' : result.unavailable ? 'unavailable' : isPending(result) ? 'pending' : 'failed';
        this.metrics.settleSeconds.observe({ outcome: kind }, (Date.now() - claimedAt) / 1000);
        return result;
      });
    const pending: SettlementResult = {
      ok: false, reason: 'settle_unconfirmed', payer: payment.payerAddress,
      message: `the settlement is not confirmed on chain after ${this.config.SETTLEMENT_TIMEOUT_MS / 1000} s; it goes on: retry with the same payment-identifier for the final result`,
    };
    return withDeadline(final, this.config.SETTLEMENT_TIMEOUT_MS, pending).then((answer) => {
      if (answer === pending) this.log.warn({ paymentId: payment._id, timeoutMs: this.config.SETTLEMENT_TIMEOUT_MS }, 'settlement answer timed out; the settlement goes on');
      return { answer, final };
    });
  }

  /** The payment as settlement work: an upto permit names the one relayer that may send it. */
  private workOf(payment: PaymentDoc): SettlementWork<PaymentDoc> {
    const upto = payment.scheme === 'upto';
    return { id: payment._id, kind: upto ? 'upto' : 'exact', ...(upto ? { lane: uptoPermitOfRecord(payment).facilitator.toLowerCase() } : {}), data: payment };
  }

  private async handOver(payment: PaymentDoc): Promise<SettlementResult> {
    // A zero upto charge moves nothing: no transaction (the permit expires unused), and the claim keeps it used here.
    if (payment.scheme === 'upto' && BigInt(payment.amountUsdcRaw) === 0n) {
      return this.recordOutcome(payment, { ok: true, txHash: '' as Hex, batchSize: 0 }, await this.endpointOf(payment));
    }
    const outcome = await this.settlement!.desk.submit(this.workOf(payment));
    if ('done' in outcome) return outcome.done as SettlementResult;
    // Nothing was sent: the claim goes, so the buyer may present the same payment again.
    await retryWhileDatabaseAway(() => this.payments.deleteOne({ _id: payment._id, status: { $in: OPEN } }), this.log, 'releasing an unsent claim');
    return { ok: false, reason: 'relayer_unavailable', message: outcome.unavailable, payer: payment.payerAddress, unavailable: true };
  }

  /**
   * Runs on the process that holds the lane the payment was given to (sender.ts), whichever process
   * accepted it: sends the settlement and records what the chain did. Run again for the same payment
   * (a lane taken over from a holder that died), the token or Permit2 refuses the second transfer, the
   * chain names the first one, and the settlement entry that stands is the first.
   */
  private async execute(work: SettlementWork<PaymentDoc>, tools: SendTools): Promise<WorkOutcome> {
    const payment = work.data;
    const settled = await this.send(payment, tools);
    if (!settled.ok && settled.unavailable) return { unavailable: settled.message };
    const endpoint = await retryWhileDatabaseAway(() => this.endpointOf(payment), this.log, 'reading a settled payment\'s endpoint');
    return { done: await this.recordOutcome(payment, settled, endpoint) };
  }

  private endpointOf(payment: PaymentDoc): Promise<EndpointDoc | null> {
    return payment.endpointId ? this.endpointById(payment.orgId, payment.endpointId) : Promise.resolve(null);
  }

  /** The settlement transaction of a claimed payment: a transfer with authorization (batched), or an upto settle. */
  private send(payment: PaymentDoc, tools: SendTools): Promise<SettleOutcome> {
    if (payment.scheme !== 'upto') return tools.transfer({ authorization: authorizationOf(payment), signature: payment.signature as Hex, paymentId: payment._id });
    return sendUptoSettlement(this.requireChain(), tools, { permit: uptoPermitOfRecord(payment), signature: payment.signature as Hex, amount: BigInt(payment.amountUsdcRaw), paymentId: payment._id, permit2612: eip2612PermitOfRecord(payment), payment });
  }

  /** Gives an open payment to a lane again (reconciliation): its outcome is recorded by the lane's holder; undefined if nothing was sent. */
  async resubmit(payment: PaymentDoc): Promise<SettlementResult | undefined> {
    const outcome = await this.settlement!.desk.submit(this.workOf(payment));
    return 'done' in outcome ? outcome.done as SettlementResult : undefined;
  }

  /** Whether some lane of the deployment can send now (`lane`: that relayer), for reconciliation. */
  canSettle(lane?: string): Promise<boolean> {
    return this.settlement ? this.settlement.desk.canTake(lane?.toLowerCase()) : Promise.resolve(false);
  }

  /** 503 before anything is claimed when no process of the deployment can send from `address` now (an upto permit names its sender). */
  private async ensureSenderOrRefuse(address: Address, door: SettleTerms['door']): Promise<void> {
    const desk = this.settlement!.desk;
    if (await desk.canTake(address.toLowerCase())) return;
    this.metrics.paidRequests.inc({ outcome: 'relayer_unavailable', door });
    throw new AppError(503, 'relayer_unavailable', `This deployment cannot settle from ${address} now (the facilitator account the permit names): ${await desk.why(address.toLowerCase())}`, undefined, { 'Retry-After': '2' });
  }

  /** 503 before anything is claimed when no process of the deployment can send settlements now. */
  private async ensureSettlerOrRefuse(door: SettleTerms['door']): Promise<void> {
    const desk = this.settlement!.desk;
    if (await desk.canTake()) return;
    this.metrics.paidRequests.inc({ outcome: 'relayer_unavailable', door });
    throw new AppError(503, 'relayer_unavailable', `This deployment cannot settle payments now: ${await desk.why()}`, undefined, { 'Retry-After': '2' });
  }

  /**
   * Writes what the chain did into the payment record, and turns it into the answer. Runs where the
   * settlement was sent; a database away meanwhile is waited for (what the chain did is not lost).
   */
  async recordOutcome(payment: PaymentDoc, settled: SettleOutcome, endpoint: EndpointDoc | null): Promise<SettlementResult> {
    const payer = payment.payerAddress;
    if (settled.ok) {
      const done = await retryWhileDatabaseAway(() => this.markSettled(payment, settled.txHash, endpoint), this.log, 'recording a settlement');
      return {
        ok: true, paymentId: done._id, txHash: settled.txHash, payer, ...(done.offerReceipt ? { offerReceipt: done.offerReceipt } : {}),
        ...(payment.scheme === 'upto' ? { amount: done.amountUsdcRaw, maxAmount: done.maxAmountUsdcRaw } : {}),
      };
    }
    // An unconfirmed settlement may still be mined: the record stays open for reconciliation to close
    // from the chain, so money that moves is never recorded as failed.
    const change = settled.unconfirmed ? { ...(settled.txHash ? { txHash: settled.txHash } : {}) } : { status: 'failed', failureReason: settled.reason, ...(settled.txHash ? { txHash: settled.txHash } : {}) };
    if (Object.keys(change).length) await retryWhileDatabaseAway(() => this.payments.updateOne({ _id: payment._id, status: { $in: OPEN } }, { $set: change }), this.log, 'recording a failed settlement');
    this.logs.recordSoon({ orgId: payment.orgId, action: 'payments.settlement_failed', category: 'payments', severity: 'error', status: 'failure', description: settled.message, targetType: 'payment', targetId: payment._id });
    this.log.warn({ paymentId: payment._id, reason: settled.reason, message: settled.message, txHash: settled.txHash }, settled.unconfirmed ? 'settlement unconfirmed; reconciliation will finish it' : 'settlement failed');
    return { ok: false, reason: settled.reason, message: settled.message, payer, ...(settled.txHash ? { txHash: settled.txHash } : {}) };
  }

  /** The seller account of a seller key's org, if it accepts payments (served from memory, see SELLER_CACHE_TTL_MS). */
  async acceptingSeller(orgId: string): Promise<SellerAccountDoc | null> {
    const seller = await this.acceptanceCache.through(orgId, () => this.acceptance(orgId));
    return seller?.enabled ? seller : null;
  }

  /** The org's live endpoint for a resource URL, if registered (served from memory). */
  async endpointFor(orgId: string, resource: string): Promise<EndpointDoc | null> {
    return this.endpointCache.through(`${orgId} ${resource}`, async () => {
      const urls = endpointUrlsFor(resource, this.config.mode);
      if (urls.length === 1) return this.endpoints.findOne({ orgId, url: resource, deletedAt: null }).lean();
      // Dev loopback aliases: registration allows one per URL, but a database from before that rule may
      // hold two spellings; the one the buyer paid for wins then.
      const found = await this.endpoints.find({ orgId, url: { $in: urls }, deletedAt: null }).lean();
      return found.find((e) => e.url === resource) ?? found[0] ?? null;
    });
  }

  /** The org's endpoint by id, deleted ones included (a payment records which endpoint it was for); served from memory. */
  async endpointById(orgId: string, id: string): Promise<EndpointDoc | null> {
    return this.endpointCache.through(`${orgId} #${id}`, () => this.endpoints.findOne({ _id: id, orgId }).lean());
  }

  /**
   * Records the settlement with its signed receipts (a unique insert: the first one recorded for the
   * payment stands) and returns the payment as it is now settled. The record itself is written in the
   * background (writeRecord), then the settled hooks (webhook outbox) run.
   */
  async markSettled(payment: PaymentDoc, txHash: string, endpoint: EndpointDoc | null): Promise<PaymentDoc> {
    const settledAt = new Date();
    const signedReceipt = await signReceipt(this.signer(), { ...payment, txHash, settledAt });
    const offerReceipt = await signOfferReceipt(this.signer(), { ...payment, txHash, settledAt });
    // The event id follows from the payment, so two processes recording one settlement name the same
    // event, and the delivery's unique event id keeps it to one.
    const webhook = endpoint?.webhookUrl ? { status: 'pending' as const, eventId: `evt_${payment._id}` } : undefined;
    const entry = await this.settlements.record({ _id: payment._id, orgId: payment.orgId, txHash, settledAt, signedReceipt, offerReceipt, ...(webhook ? { webhook } : {}) });
    const done = settledRecord(payment, entry);
    const write = this.writeRecord(payment, entry, endpoint)
      .catch((err) => this.log.error({ paymentId: payment._id, err: (err as Error).message }, 'payment record not updated from its settlement; reconciliation will write it'))
      .finally(() => this.recordWrites.delete(write));
    this.recordWrites.add(write);
    return done;
  }

  /**
   * Writes a settlement into the payment record, if the record is still open, then runs the settled hooks.
   * Grouped with the other records of its settlement transaction (they resolve together) into bulkWrite
   * commands. The webhook outbox entry is written in the same update, so a crash before the delivery job
   * is enqueued leaves a pending entry that server/webhooks' dispatcher picks up. The settler and
   * reconciliation write the same values (the settlement entry that stands); on an engine whose
   * conditional updates are not atomic both may match, and the hooks are idempotent (one delivery per event id).
   */
  async writeRecord(payment: PaymentDoc, entry: SettledPaymentDoc, endpoint: EndpointDoc | null): Promise<void> {
    const set = settlementFields(entry);
    const { matched } = await this.recordUpdates.update({
      filter: { _id: payment._id, status: { $in: OPEN } },
      update: { $set: set, $unset: { failureReason: 1, holdExpiresAt: 1 } },
      tookEffect: (doc) => doc?.status === 'settled' && doc.settledAt?.getTime() === entry.settledAt.getTime() && doc.txHash === entry.txHash,
    });
    if (!matched) return;
    const done = settledRecord(payment, entry);
    // The outbox entry is already in the record: the hooks (webhook dispatch) need not hold up anything;
    // the outbox sweep finishes whatever a crash interrupts.
    if (endpoint) for (const hook of this.onSettled) void hook(done, endpoint).catch((err) => this.log.error({ paymentId: done._id, err: (err as Error).message }, 'settled hook failed'));
    this.logs.recordSoon({ orgId: payment.orgId, action: 'payments.settled', category: 'payments', description: `Received ${formatUsdc(BigInt(payment.amountUsdcRaw))} USDC from ${payment.payerAddress}`, targetType: 'payment', targetId: payment._id, metadata: { txHash: entry.txHash, endpointId: payment.endpointId } });
  }

  /** Resolves once the record updates this process has started are written (reads, shutdown, tests). */
  async recordsWritten(): Promise<void> {
    await Promise.all([...this.recordWrites]);
  }

  /** Records still open whose settlement is recorded read as settled: their update is on its way. */
  private async withSettlements(rows: PaymentDoc[]): Promise<PaymentDoc[]> {
    const open = rows.filter((row) => OPEN.includes(row.status));
    if (open.length === 0) return rows;
    const entries = await this.settlements.of(open.map((row) => row._id));
    if (entries.size === 0) return rows;
    return rows.map((row) => {
      const entry = entries.get(row._id);
      return entry ? settledRecord(row, entry) : row;
    });
  }

  // --- reads -----------------------------------------------------------------------------------

  /** Endpoints that opted into discovery, of sellers that accept payments now, oldest first. */
  async discoverable(): Promise<Array<{ endpoint: EndpointDoc; seller: SellerAccountDoc }>> {
    const endpoints = await this.endpoints.find({ discoverable: true, deletedAt: null }).lean();
    const listed: Array<{ endpoint: EndpointDoc; seller: SellerAccountDoc }> = [];
    for (const endpoint of endpoints.sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a._id < b._id ? -1 : 1))) {
      const seller = await this.acceptingSeller(endpoint.orgId);
      if (seller) listed.push({ endpoint, seller });
    }
    return listed;
  }

  async list(orgId: string, limit: number, cursor?: Cursor, filter: PaymentFilter = {}) {
    await this.recordsWritten();
    const rows = await this.payments.find({ orgId, ...filterQuery(filter), ...afterCursor('createdAt', cursor) }).sort({ createdAt: -1, _id: -1 }).limit(limit + 1).lean();
    return pageOf(await this.withSettlements(rows), limit, (row) => ({ at: row.createdAt, id: row._id }));
  }

  /** One numbered page (the console's "26–50 of N"), newest first. */
  async listPage(orgId: string, filter: PaymentFilter, offset: number, limit: number): Promise<PaymentDoc[]> {
    await this.recordsWritten();
    return this.withSettlements(await this.payments.find({ orgId, ...filterQuery(filter) }).sort({ createdAt: -1, _id: -1 }).skip(offset).limit(limit).lean());
  }

  /**
   * Every payment of the org the filter matches, newest first, from a database cursor (the CSV export),
   * once this process's record updates are written. One whose update another process still has on its
   * way is exported as it was a few milliseconds before: open.
   */
  async *cursor(orgId: string, filter: PaymentFilter): AsyncIterable<PaymentDoc> {
    await this.recordsWritten();
    yield* this.payments.find({ orgId, ...filterQuery(filter) }).sort({ createdAt: -1, _id: -1 }).lean().cursor({ batchSize: 500 }) as AsyncIterable<PaymentDoc>;
  }

  async get(orgId: string, id: string): Promise<PaymentDoc> {
    const doc = await this.find(orgId, id);
    if (!doc) throw notFound('Payment not found');
    return doc;
  }

  /** The org's payment, settled if its settlement is recorded; null if there is none (or it is another org's). */
  async find(orgId: string, id: string): Promise<PaymentDoc | null> {
    const doc = await this.payments.findOne({ _id: id, orgId }).lean();
    return doc && (await this.withSettlements([doc]))[0]!;
  }

  /** A payment by id, whoever's, settled if its settlement is recorded. */
  async record(id: string): Promise<PaymentDoc | null> {
    const doc = await this.payments.findById(id).lean();
    return doc && (await this.withSettlements([doc]))[0]!;
  }
}
