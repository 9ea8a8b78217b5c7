import type { Collection } from 'mongodb';
import type { PaymentDoc } from './models.js';
import type { ChainService } from '../chain/chain-service.js';
import { isDuplicateKey } from '../platform/errors.js';
import { findByIds } from '../platform/find-by-ids.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { PaymentRecords } from './records.js';
import type { Endpoints } from './endpoints.js';
import type { PaymentSettlement } from './payment-settlement.js';
import type { PaymentSchemes, ReconcileRound, Reconciled } from './schemes/scheme.js';
import { startRounds } from '../platform/rounds.js';

export interface ReconcileOptions {
  /** Only payments claimed longer ago than this are touched: younger ones are still being settled. */
  olderThanMs: number;
  log?: Logger;
  metrics?: Metrics;
  /** Set when the process stops: the round takes no more payments and does not wait for the ones it sent. */
  stopping?: { stopped: boolean; signal: Promise<void> };
}

/** What reconciliation works with: the payments area's records, endpoints, settlement path and schemes. */
export interface ReconcilablePayments {
  chain: ChainService | undefined;
  records: PaymentRecords;
  endpoints: Endpoints;
  settlement: PaymentSettlement;
  schemes: PaymentSchemes;
}

/** Several processes reconcile one database: each open payment is taken by one of them per window. */
const CLAIM_WINDOW_MS = 30_000;

/**
 * Finishes payments left open (`verified`, or `held` with a capture decision): by a crash between claiming the nonce and recording the
 * result, by an answer that timed out, by a process killed mid-settlement. One whose settlement was
 * recorded (settled-payments.ts: the buyer was answered, the record update did not happen) gets its
 * record written from that settlement. For the others the chain is the source of truth, read by the
 * payment's scheme (schemes/<name>/scheme.ts `reconcile`): what it used is recorded as the settlement,
 * what can no longer move is failed, and what is still valid is sent again by a process that holds a
 * relayer (a process without one leaves it to another).
 * A transaction hash on the record is only a hint: a batch can be mined while one of its transfers failed.
 */
export async function reconcilePayments(service: ReconcilablePayments, options: ReconcileOptions): Promise<{ settled: number; failed: number; resent: number }> {
  const { chain, records } = service;
  const totals = { settled: 0, failed: 0, resent: 0 };
  if (!chain) return totals;
  const cutoff = new Date(Date.now() - options.olderThanMs);
  const stale = [
    ...await records.payments.find({ status: 'verified', chainId: chain.chainId, createdAt: { $lt: cutoff } }).sort({ createdAt: 1 }).limit(200).lean(),
    ...await capturedHolds(records, cutoff, chain.chainId),
  ];
  if (stale.length === 0) return totals;
  const claims = records.payments.db.collection('reconcile_claims') as unknown as Collection<{ _id: string; expiresAt: Date }>;
  const window = Math.floor(Date.now() / CLAIM_WINDOW_MS);
  const count = (result: Reconciled) => {
    if (!result) return;
    totals[result]++;
    options.metrics?.reconciled.inc({ result });
  };
  const resends: Array<Promise<void>> = [];
  let canSettle: boolean | undefined;
  const settled = await records.settlements.of(stale.map((p) => p._id));

  // Each action on a payment is claimed for this round (one process acts), but only by a process that
  // can take it: a worker that cannot send must not claim a payment that needs sending again.
  const claim = async (payment: PaymentDoc) => {
    try {
      await claims.insertOne({ _id: `${payment._id}:${window}`, expiresAt: new Date(Date.now() + CLAIM_WINDOW_MS * 2) });
      return true;
    } catch (err) {
      if (isDuplicateKey(err)) return false; // another process has it this round
      throw err;
    }
  };
  const endpointOf = (payment: PaymentDoc) => (payment.endpointId ? service.endpoints.endpoints.findById(payment.endpointId).lean() : Promise.resolve(null));
  for (const payment of stale) {
    // A stopping process takes no more payments this round; another process's next round does.
    if (options.stopping?.stopped) break;
    const log = options.log?.child({ paymentId: payment._id });
    const entry = settled.get(payment._id);
    if (entry) {
      if (!(await claim(payment))) continue;
      await records.writeRecord(payment, entry, await endpointOf(payment));
      log?.warn({ txHash: entry.txHash }, 'reconciliation wrote a payment record from its recorded settlement (its process stopped before the record update)');
      count('settled');
      continue;
    }
    const round: ReconcileRound = {
      chain, log, claim, endpointOf,
      // Asked once per round for any lane; a lane the payment names is asked each time.
      canSettle: async (lane) => (lane ? service.settlement.canSettle(lane) : (canSettle ??= await service.settlement.canSettle())),
      markSettled: async (p, txHash, endpoint) => { await records.markSettled(p, txHash, endpoint); },
      fail: async (p, reason, from, message = 'reconciliation closed an open payment as failed') => {
        await records.payments.updateOne({ _id: p._id, status: { $in: from } }, { $set: { status: 'failed', failureReason: reason } });
        log?.warn({ reason }, message);
      },
      resubmit: (p) => service.settlement.resubmit(p),
      resend: (p) => resend(service.settlement, p, log),
    };
    const result = await service.schemes.of(payment).reconcile(payment, round);
    // Sent together, so they share transactions.
    if (typeof result === 'object') resends.push(result.sending.then(count));
    else count(result);
  }
  // The payments sent again settle whether or not this process waits (their lane's holder records them):
  // a stopping process does not hold its stop for their blocks.
  await Promise.race([Promise.all(resends), options.stopping?.signal ?? new Promise(() => {})]);
  await records.recordsWritten();
  // Housekeeping (FerretDB 1.x has no TTL indexes).
  await claims.deleteMany({ expiresAt: { $lt: new Date() } }).catch(() => {});
  return totals;
}

/**
 * Holds captured before `cutoff` and still open: a capture marks its payment by the decision alone
 * (holds.ts), so a process that died between the capture and the record leaves a `held` payment with a
 * capture decision. Held payments are few (holds not decided yet), and only their decisions are read.
 */
async function capturedHolds(records: PaymentRecords, cutoff: Date, chainId: number): Promise<PaymentDoc[]> {
  const held = await records.payments.find({ status: 'held', chainId, createdAt: { $lt: cutoff } }).sort({ createdAt: 1 }).limit(200).lean();
  if (held.length === 0) return [];
  const decisions = records.payments.db.collection('payment_hold_decisions') as unknown as Collection<{ _id: string; decision: string; at: Date }>;
  const captured = await findByIds(held.map((p) => p._id), (id) => decisions.findOne({ _id: id, decision: 'capture', at: { $lt: cutoff } }));
  const ids = new Set(captured.map((d) => d._id));
  return held.filter((p) => ids.has(p._id));
}

/** Gives an open payment to a lane again; its holder records the outcome (the same path as a new payment's). */
async function resend(settlement: PaymentSettlement, payment: PaymentDoc, log: Logger | undefined): Promise<'settled' | 'failed' | 'resent'> {
  const result = await settlement.resubmit(payment);
  if (!result) return 'resent'; // nothing was sent: the next round tries again
  if (result.ok) {
    log?.info({ txHash: result.txHash }, 'reconciliation settled an open payment');
    return 'settled';
  }
  if (result.reason === 'settle_unconfirmed') return 'resent';
  log?.warn({ reason: result.reason }, 'reconciliation closed an open payment as failed');
  return 'failed';
}

/**
 * Runs reconciliation at start-up and then every `everyMs`. Every process runs it (servers and workers);
 * the per-payment claims keep them from doing the same work twice.
 */
export function startReconciler(service: ReconcilablePayments, options: { everyMs: number; olderThanMs: number; log: Logger; metrics: Metrics }): { stop(): Promise<void> } {
  let end!: () => void;
  const stopping = { stopped: false, signal: new Promise<void>((resolve) => { end = resolve; }) };
  const stopRounds = startRounds({
    everyMs: options.everyMs,
    runNow: true,
    round: async () => {
      const totals = await reconcilePayments(service, { ...options, stopping });
      if (totals.settled + totals.failed + totals.resent > 0) options.log.info(totals, 'reconciliation round');
    },
    onError: (err) => options.log.error({ err: err.message }, 'payment reconciliation failed'),
  });
  return {
    async stop() {
      stopping.stopped = true;
      end();
      await stopRounds();
    },
  };
}
