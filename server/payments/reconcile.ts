import type { Collection } from 'mongodb';
import { OPEN, type PaymentService } from './payment-service.js';
import type { PaymentDoc } from './models.js';
import { authorizationOf } from './settlement.js';
import { blockBefore, findSettlementTx } from '../chain/authorization-events.js';
import { authorizationState } from '../chain/usdc.js';
import type { ChainService } from '../chain/chain-service.js';
import { isDuplicateKey } from '../platform/errors.js';
import { findByIds } from '../platform/find-by-ids.js';
import { findUptoSettlementTx, uptoPermitOfRecord } from './upto-settlement.js';
import { permit2NonceUsed } from '../chain/permit2.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';

export interface ReconcileOptions {
  /** Only payments claimed longer ago than this are touched: younger ones are still being settled. */
  olderThanMs: number;
  log?: Logger;
  metrics?: Metrics;
}

/** Several processes reconcile one database: each open payment is taken by one of them per window. */
const CLAIM_WINDOW_MS = 30_000;
/** Seconds of validity an authorization needs left to be worth sending again. */
const RESEND_MARGIN_SECONDS = 6;

/**
 * Finishes payments left open (`verified`, or `held` with a capture decision): by a crash between claiming the nonce and recording the
 * result, by an answer that timed out, by a process killed mid-settlement. One whose settlement was
 * recorded (settled-payments.ts: the buyer was answered, the record update did not happen) gets its
 * record written from that settlement. For the others the chain is the source of truth, and the token's
 * own record of the authorization decides:
 * - used: the transaction that used it (its AuthorizationUsed event) is recorded as the settlement;
 * - unused and expired: failed, nothing moved and nothing can;
 * - unused and still valid: sent again, by a process that holds a relayer (the token lets it move money
 *   once, whoever sends it); a process without one leaves it to another.
 * A transaction hash on the record is only a hint: a batch can be mined while one of its transfers failed.
 */
export async function reconcilePayments(service: PaymentService, options: ReconcileOptions): Promise<{ settled: number; failed: number; resent: number }> {
  const chain = service.chain;
  const totals = { settled: 0, failed: 0, resent: 0 };
  if (!chain) return totals;
  const cutoff = new Date(Date.now() - options.olderThanMs);
  const stale = [
    ...await service.payments.find({ status: 'verified', createdAt: { $lt: cutoff } }).sort({ createdAt: 1 }).limit(200).lean(),
    ...await capturedHolds(service, cutoff),
  ];
  if (stale.length === 0) return totals;
  const claims = service.payments.db.collection('reconcile_claims') as unknown as Collection<{ _id: string; expiresAt: Date }>;
  const window = Math.floor(Date.now() / CLAIM_WINDOW_MS);
  const count = (result: 'settled' | 'failed' | 'resent') => { totals[result]++; options.metrics?.reconciled.inc({ result }); };
  const resends: Array<Promise<void>> = [];
  let canSettle: boolean | undefined;
  const settled = await service.settlements.of(stale.map((p) => p._id));

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
  for (const payment of stale) {
    const log = options.log?.child({ paymentId: payment._id });
    const entry = settled.get(payment._id);
    if (entry) {
      if (!(await claim(payment))) continue;
      const endpoint = payment.endpointId ? await service.endpoints.findById(payment.endpointId).lean() : null;
      await service.writeRecord(payment, entry, endpoint);
      log?.warn({ txHash: entry.txHash }, 'reconciliation wrote a payment record from its recorded settlement (its process stopped before the record update)');
      count('settled');
      continue;
    }
    if (payment.scheme === 'upto' && payment.status === 'held') {
      // Captured, and its process died before it wrote the charge (holds.ts writes it before sending
      // anything): nothing was sent and what the seller named is unknown, so nothing is charged.
      if (!(await claim(payment))) continue;
      await service.payments.updateOne({ _id: payment._id, status: 'held' }, { $set: { status: 'failed', failureReason: 'capture_interrupted' } });
      log?.warn({ reason: 'capture_interrupted' }, 'reconciliation closed an upto capture whose charge was never recorded: nothing was charged');
      count('failed');
      continue;
    }
    if (payment.scheme === 'upto') {
      const result = await reconcileUpto(service, chain, payment, claim, log);
      if (result) count(result);
      continue;
    }
    const auth = authorizationOf(payment);
    const used = await authorizationState({ client: chain.publicClient, token: chain.usdc.address, authorizer: auth.from, nonce: auth.nonce });
    const expired = !used && auth.validBefore <= BigInt(Math.floor(Date.now() / 1000) + RESEND_MARGIN_SECONDS);
    // Sent again through a lane of this deployment; while none can send, it waits for the next round.
    if (!used && !expired && !(canSettle ??= await service.canSettle())) continue;
    if (!(await claim(payment))) continue;
    const endpoint = payment.endpointId ? await service.endpoints.findById(payment.endpointId).lean() : null;
    const fail = async (reason: string) => {
      await service.payments.updateOne({ _id: payment._id, status: { $in: OPEN } }, { $set: { status: 'failed', failureReason: reason } });
      log?.warn({ reason }, 'reconciliation closed an open payment as failed');
      count('failed');
    };
    if (used) {
      const txHash = await findSettlementTx(chain, auth.from, auth.nonce, await blockBefore(chain, payment.createdAt));
      if (!txHash) { await fail('authorization_canceled'); continue; }
      await service.markSettled(payment, txHash, endpoint);
      log?.info({ txHash }, 'reconciliation recorded a settlement found on chain');
      count('settled');
      continue;
    }
    if (expired) { await fail('authorization_expired'); continue; }
    log?.info('reconciliation sends an open payment again');
    resends.push(resend(service, payment, log).then((result) => {
      if (result === 'settled') count('settled');
      else if (result === 'failed') count('failed');
      else if (result === 'resent') count('resent');
    }));
  }
  // Sent together, so they share transactions.
  await Promise.all(resends);
  await service.recordsWritten();
  // Housekeeping (FerretDB 1.x has no TTL indexes).
  await claims.deleteMany({ expiresAt: { $lt: new Date() } }).catch(() => {});
  return totals;
}

/**
 * Holds captured before `cutoff` and still open: a capture marks its payment by the decision alone
 * (holds.ts), so a process that died between the capture and the record leaves a `held` payment with a
 * capture decision. Held payments are few (holds not decided yet), and only their decisions are read.
 */
async function capturedHolds(service: PaymentService, cutoff: Date): Promise<PaymentDoc[]> {
  const held = await service.payments.find({ status: 'held', createdAt: { $lt: cutoff } }).sort({ createdAt: 1 }).limit(200).lean();
  if (held.length === 0) return [];
  const decisions = service.payments.db.collection('payment_hold_decisions') as unknown as Collection<{ _id: string; decision: string; at: Date }>;
  const captured = await findByIds(held.map((p) => p._id), (id) => decisions.findOne({ _id: id, decision: 'capture', at: { $lt: cutoff } }));
  const ids = new Set(captured.map((d) => d._id));
  return held.filter((p) => ids.has(p._id));
}

/** Gives an open payment to a lane again; its holder records the outcome (the same path as a new payment's). */
async function resend(service: PaymentService, payment: PaymentDoc, log: Logger | undefined): Promise<'settled' | 'failed' | 'resent'> {
  const result = await service.resubmit(payment);
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
 * An open `upto` payment: Permit2's nonce bitmap says whether its permit was used. Used: the transaction
 * that paid this record's charge is recorded (none found: the buyer cancelled the nonce). Unused and past
 * its deadline: failed. Unused and valid: sent again, by the process holding the facilitator account the
 * permit names (only it can). A zero charge sends nothing: it is recorded settled as it stands.
 */
async function reconcileUpto(service: PaymentService, chain: ChainService, payment: PaymentDoc, claim: (p: PaymentDoc) => Promise<boolean>, log: Logger | undefined): Promise<'settled' | 'failed' | 'resent' | undefined> {
  const permit = uptoPermitOfRecord(payment);
  const charge = BigInt(payment.amountUsdcRaw);
  const used = charge > 0n && await permit2NonceUsed(chain.publicClient, permit.from, permit.nonce);
  const expired = charge > 0n && !used && permit.deadline <= BigInt(Math.floor(Date.now() / 1000) + RESEND_MARGIN_SECONDS);
  if (charge > 0n && !used && !expired && !(await service.canSettle(permit.facilitator))) return undefined;
  if (!(await claim(payment))) return undefined;
  const endpoint = payment.endpointId ? await service.endpoints.findById(payment.endpointId).lean() : null;
  const fail = async (reason: string) => {
    await service.payments.updateOne({ _id: payment._id, status: 'verified' }, { $set: { status: 'failed', failureReason: reason } });
    log?.warn({ reason }, 'reconciliation closed an open payment as failed');
    return 'failed' as const;
  };
  if (charge === 0n) { await service.markSettled(payment, '', endpoint); return 'settled'; }
  if (used) {
    const txHash = await findUptoSettlementTx(chain, payment, await blockBefore(chain, payment.createdAt));
    if (!txHash) return fail('authorization_canceled');
    await service.markSettled(payment, txHash, endpoint);
    log?.info({ txHash }, 'reconciliation recorded an upto settlement found on chain');
    return 'settled';
  }
  if (expired) return fail('authorization_expired');
  const result = await service.resubmit(payment);
  if (!result || (!result.ok && result.reason === 'settle_unconfirmed')) return 'resent';
  return result.ok ? 'settled' : 'failed';
}

/**
 * Runs reconciliation at start-up and then every `everyMs`. Every process runs it (servers and workers);
 * the per-payment claims keep them from doing the same work twice.
 */
export function startReconciler(service: PaymentService, options: { everyMs: number; olderThanMs: number; log: Logger; metrics: Metrics }): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  let busy = false;
  let stopped = false;
  const tick = () => {
    if (busy || stopped) return; // a long round is not stacked with the next one
    busy = true;
    running = reconcilePayments(service, options).then((totals) => {
      if (totals.settled + totals.failed + totals.resent > 0) options.log.info(totals, 'reconciliation round');
    }, (err) => {
      if (!stopped) options.log.error({ err: (err as Error).message }, 'payment reconciliation failed');
    }).finally(() => { busy = false; });
  };
  tick();
  const timer = setInterval(tick, options.everyMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
