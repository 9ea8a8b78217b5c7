import { getAddress } from 'viem';
import type { Collection } from 'mongodb';
import type { Connection, Model } from 'mongoose';
import { formatUsdc } from 'agentgate-x402-wire';
import { notFound } from '../platform/errors.js';
import { afterCursor, pageOf, type Cursor } from '../platform/pagination.js';
import { dayRangeOf, HistoryBuckets, pageFrom, scopeOf } from '../platform/history-buckets.js';
import { GroupedUpdates, type GroupCommitOptions } from '../platform/group-commit.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import { paymentSchema, type EndpointDoc, type PaymentDoc } from './models.js';
import { signOfferReceipt, signReceipt, type ReceiptSigner } from './receipts.js';
import { SettledPayments, settledRecord, settlementFields, type SettledPaymentDoc } from './settled-payments.js';
import type { SettlementResult } from './settlement.js';

// The payment records of every scheme: how a settlement is written into them (with its signed receipts),
// and how they are read (the seller's lists, the console, the CSV export). One room for both, because a
// read must see a settlement whose record update is still on its way (see markSettled) as settled.

/** Narrows a payment list (the console's filters); every field optional, all given ones must hold. */
export interface PaymentFilter {
  status?: PaymentDoc['status'];
  /** The network's v1 name, as records name it ("polygon-amoy"). */
  network?: string;
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

/** A seller's payments in the history buckets (platform/history-buckets.ts). */
export const PAYMENTS_KIND = 'payments';
export const paymentsScope = (orgId: string) => scopeOf(PAYMENTS_KIND, orgId);

/**
 * Filters a page must read the old way: a search (one id, one transaction, one payer) matches a handful
 * of payments spread over the whole history, which hour-by-hour reading would walk entirely.
 */
export const isSearch = (filter: PaymentFilter) => Boolean(filter.paymentId || filter.txHash || filter.searchPayer || filter.payerAddress);

/**
 * A list read in one query sorted by time rather than hour by hour: a search, and the states a payment
 * leaves or ends in rarely (all but settled), which a few of a year's payments are in (the database
 * hands over only those: an equality on status).
 */
const listsOldWay = (filter: PaymentFilter) => isSearch(filter) || Boolean(filter.status && filter.status !== 'settled');

export function filterQuery(filter: PaymentFilter): Record<string, unknown> {
  const query: Record<string, unknown> = {};
  if (filter.status) query.status = filter.status;
  if (filter.network) query.network = filter.network;
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

/**
 * A record being settled: `verified` (redeem, the facilitator API) or `held` with a capture decision
 * (holds.ts). Only these are written with the outcome.
 */
export const OPEN: PaymentDoc['status'][] = ['verified', 'held'];

/** Called in the same step that records a settled payment (webhooks plug in here). */
export type SettledHook = (payment: PaymentDoc, endpoint: EndpointDoc) => Promise<void>;

/**
 * What a settled record answers a buyer: its transaction and receipt, and for a payment charged after
 * verification (`upto`) what it charged and the most the buyer allowed.
 */
export function settledResultOf(record: PaymentDoc): Extract<SettlementResult, { ok: true }> {
  return {
    ok: true, paymentId: record._id, txHash: record.txHash ?? '', payer: record.payerAddress, ...(record.offerReceipt ? { offerReceipt: record.offerReceipt } : {}),
    ...(record.scheme === 'upto' ? { amount: record.amountUsdcRaw, maxAmount: record.maxAmountUsdcRaw } : {}),
  };
}

/**
 * The payments collection and its settlement entries. A settled payment's answer waits for the
 * settlement entry with its receipt (a unique insert, grouped with those of concurrent requests:
 * settled-payments.ts); the record is then updated from it in the background, grouped into bulkWrites,
 * and reads through here show a record whose update is still on its way as settled.
 */
export class PaymentRecords {
  readonly payments: Model<PaymentDoc>;
  /** Updates of payment records to settled, grouped into bulkWrite commands. */
  readonly recordUpdates: GroupedUpdates<PaymentDoc>;
  /** Settlements as their buyers were told them: the unique insert a settled answer waits for. */
  readonly settlements: SettledPayments;
  /** Record updates of this process still on their way (background, after the settlement entry). */
  private readonly recordWrites = new Set<Promise<void>>();
  /** The hours and days each seller's payments are filed under (pages read them hour by hour). */
  readonly history: HistoryBuckets;

  constructor(
    conn: Connection,
    private readonly signer: () => ReceiptSigner,
    private readonly logs: ActivityLog,
    private readonly log: Logger,
    metrics: Metrics,
    /** How record updates are grouped on this database (platform/group-commit.ts updateGroupingFor). */
    updateGrouping: Pick<GroupCommitOptions, 'maxBatch' | 'maxInFlight'>,
    /** Told once a settled payment's record is written, with its endpoint (the payment.received outbox). */
    private readonly onSettled: SettledHook,
  ) {
    this.payments = conn.models.Payment ?? conn.model<PaymentDoc>('Payment', paymentSchema, 'payments');
    const paymentsCollection = () => this.payments.collection as unknown as Collection<PaymentDoc>;
    this.recordUpdates = new GroupedUpdates(paymentsCollection, { ...updateGrouping, onCommand: (size) => metrics.groupCommitSize.observe({ write: 'payment_records' }, size) });
    this.settlements = new SettledPayments(conn, (size) => metrics.groupCommitSize.observe({ write: 'payment_settlements' }, size));
    this.history = HistoryBuckets.for(conn);
    metrics.onCollect(() => metrics.paymentRecordWritesPending.set(this.recordWrites.size));
  }

  // --- writing a settlement --------------------------------------------------------------------

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
    const entry = await this.settlements.record({ _id: payment._id, orgId: payment.orgId, scheme: payment.scheme ?? 'exact', network: payment.network, txHash, settledAt, signedReceipt, offerReceipt, ...(webhook ? { webhook } : {}) });
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
    if (endpoint) void this.onSettled(done, endpoint).catch((err) => this.log.error({ paymentId: done._id, err: (err as Error).message }, 'settled hook failed'));
    this.logs.recordSoon({ orgId: payment.orgId, action: 'payments.settled', category: 'payments', description: `Received ${formatUsdc(BigInt(payment.amountUsdcRaw))} USDC from ${payment.payerAddress}`, targetType: 'payment', targetId: payment._id, metadata: { txHash: entry.txHash, endpointId: payment.endpointId } });
  }

  /** Resolves once the record updates this process has started are written (reads, shutdown, tests). */
  async recordsWritten(): Promise<void> {
    await Promise.all([...this.recordWrites]);
  }

  // --- filing by the hour ------------------------------------------------------------------------

  /** Lists the payment's hour under its seller before its record is inserted (the claim). */
  noteHour(payment: Pick<PaymentDoc, 'orgId' | 'createdAt'>): Promise<void> {
    return this.history.note(paymentsScope(payment.orgId), payment.createdAt);
  }

  /** Lists `~undated` under each seller whose payments include some written without their hour (HistoryBuckets.scanUndated). */
  markUndated(now = new Date()): Promise<number> {
    return this.history.scanUndated('payments', this.payments, paymentsScope, now);
  }

  // --- reads -----------------------------------------------------------------------------------

  /**
   * The seller's payments the filter matches, newest first, strictly after `before`: hour by hour (each
   * hour one equality, platform/history-buckets.ts), then the undated ones; some filters (listsOldWay) in one
   * query sorted by time. Records only, without their settlement entries.
   */
  private newestFirst(orgId: string, filter: PaymentFilter, before?: Cursor, batchSize = 500): AsyncIterable<PaymentDoc> {
    const query = { orgId, ...filterQuery(filter) };
    const sorted = (extra: Record<string, unknown>) => this.payments.find({ ...query, ...extra, ...afterCursor('createdAt', before) })
      .sort({ createdAt: -1, _id: -1 }).lean().cursor({ batchSize }) as AsyncIterable<PaymentDoc>;
    if (listsOldWay(filter)) return sorted({});
    return this.history.newestFirst(paymentsScope(orgId), {
      hour: (hour) => this.payments.find({ ...query, hour }).lean() as Promise<PaymentDoc[]>,
      undated: () => sorted({ hour: null }),
    }, { ...dayRangeOf(filter), ...(before ? { before } : {}) });
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

  /**
   * The latest settled payment of `payer` for `resourceUrl` to this org (Sign-In-With-X: a buyer who paid
   * reaches the resource again), read from the records and their settlement entries, so a payment settled
   * by another process counts as soon as its entry is written.
   */
  async latestSettled(orgId: string, payer: string, resourceUrl: string): Promise<PaymentDoc | undefined> {
    const rows = await this.payments.find({ orgId, payerAddress: payer, resourceUrl, status: { $ne: 'failed' } }).sort({ createdAt: -1, _id: -1 }).limit(20).lean();
    return (await this.withSettlements(rows)).find((row) => row.status === 'settled');
  }

  async list(orgId: string, limit: number, cursor?: Cursor, filter: PaymentFilter = {}) {
    await this.recordsWritten();
    const rows = await pageFrom(this.newestFirst(orgId, filter, cursor, limit + 1), 0, limit + 1);
    return pageOf(await this.withSettlements(rows), limit, (row) => ({ at: row.createdAt, id: row._id }));
  }

  /** One numbered page (the console's "26–50 of N"), newest first. */
  async listPage(orgId: string, filter: PaymentFilter, offset: number, limit: number): Promise<PaymentDoc[]> {
    await this.recordsWritten();
    return this.withSettlements(await pageFrom(this.newestFirst(orgId, filter, undefined, offset + limit), offset, limit));
  }

  /**
   * Every payment of the org the filter matches, newest first, from a database cursor (the CSV export),
   * once this process's record updates are written. One whose update another process still has on its
   * way is exported as it was a few milliseconds before: open.
   */
  async *cursor(orgId: string, filter: PaymentFilter): AsyncIterable<PaymentDoc> {
    await this.recordsWritten();
    yield* this.newestFirst(orgId, filter);
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

  /**
   * The seller's payment claimed under this authorization key, settled if its settlement is recorded. A
   * read by a field other than `_id`: only for a repeat whose first request left no result.
   */
  async byAuthorization(orgId: string, authorizationKey: string): Promise<PaymentDoc | null> {
    const found = await this.payments.findOne({ authorizationKey, orgId }).lean();
    return found && (await this.withSettlements([found]))[0]!;
  }
}
