import { getAddress, type Address, type Hex } from 'viem';
import type { Collection } from 'mongodb';
import type { Connection } from 'mongoose';
import { AppError } from '../platform/errors.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { Metrics } from '../platform/metrics.js';
import { GroupedInserts } from '../platform/group-commit.js';
import { isDatabaseUnavailable, retryWhileDatabaseAway } from '../platform/database-outage.js';
import type { Party, Screening } from '../screening/index.js';
import { screenedNetwork } from '../screening/sources.js';
import type { SettleOutcome } from '../settlement/settler.js';
import type { SettlementEngine } from '../settlement/engine.js';
import type { SendTools, SettlementWork, WorkExecutor, WorkOutcome } from '../settlement/work.js';
import type { EndpointDoc, PaymentDoc, SellerAccountDoc } from './models.js';
import { OPEN, settledResultOf, type PaymentRecords } from './records.js';
import type { Endpoints } from './endpoints.js';
import type { SettlementResult } from './settlement.js';
import { PaymentIdentifiers, type IdentifiedPayment } from './payment-identifier.js';
import { hourOf } from '../platform/history-buckets.js';

// The one path every scheme's payments take once verified: the claim that makes them at-most-once, the
// payment-identifier that makes a retry answer the first result, the hand-over to the settlement desk
// (server/settlement/), which gives the payment to whichever process holds a lane, and the record of
// what the chain did. A scheme brings its verification and what its settlement sends (SchemeSettler).

/** What a payment must meet, and which door it came through (for the metrics). */
export interface SettleTerms { resource: string; amountAtomic: bigint; endpoint: EndpointDoc | null; door: 'redeem' | 'facilitator'; /** The payee; default the seller's payTo. */ payTo?: string }

export type Door = SettleTerms['door'];

/** A claim: the payment record inserted, or the refusal (a duplicate, a failed verification). */
export type ClaimOutcome = { ok: true; payment: PaymentDoc } | { ok: false; refused: Extract<SettlementResult, { ok: false }> };

/** What the settlement path needs of a scheme to send its claimed payments. */
export interface SchemeSettler {
  /** The scheme's name: the kind of its settlement work, and the record's `scheme` (absent on a record: exact). */
  readonly name: string;
  /** The one relayer (lower-case) that may send this payment, if the payment names one; undefined: any relayer. */
  laneOf(payment: PaymentDoc): string | undefined;
  /** A claimed payment that moves nothing (an upto charge of 0): recorded settled without a transaction. */
  movesNothing?(payment: PaymentDoc): boolean;
  /**
   * Sends the payment's settlement from this process's relayers and says what the chain did. Runs on the
   * process holding the lane, and must be safe to run twice for one payment (a lane taken over from a
   * holder that died): the chain's at-most-once (a nonce) refuses the second transfer and names the first.
   */
  send(payment: PaymentDoc, tools: SendTools): Promise<SettleOutcome>;
  /**
   * Records a sent settlement its own way instead of as the payment's settlement (auth-capture: an
   * authorization is held in escrow, and only its capture settles the payment). Runs where it was sent.
   */
  recordSent?(payment: PaymentDoc, txHash: string): Promise<SettlementResult>;
  /**
   * Kinds of settlement work the scheme has beyond settling its payments (a channel claim, a refund), by
   * kind: each runs on the process holding the lane it is given, as a payment's settlement does.
   */
  readonly otherWork?: Readonly<Record<string, WorkExecutor>>;
}

const isPending = (result: SettlementResult) => !result.ok && result.reason === 'settle_unconfirmed';

/** The promise's value, or `fallback` if it takes longer than `ms` (the promise goes on). */
function withDeadline<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout;
  const deadline = new Promise<T>((resolve) => { timer = setTimeout(() => resolve(fallback), ms); });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/**
 * Money moves at most once per authorization because the claim is a unique index written before the
 * transaction is sent. A paid request's answer waits for two database writes, both unique inserts grouped
 * with those of concurrent requests (platform/group-commit.ts): the claim, and the settlement with its
 * receipt (records.ts; a duplicate fails only its own request).
 */
export class PaymentSettlement {
  /** Payment claims (unique authorization key), grouped into insertMany commands. */
  private readonly claims: GroupedInserts<PaymentDoc>;
  private readonly identifiers: PaymentIdentifiers;
  private readonly settlers = new Map<string, SchemeSettler>();

  constructor(
    conn: Connection,
    private readonly config: Config,
    /**
     * The settlement engine: the desk this process hands claimed payments to, and, in a process holding
     * relayer lanes, the registered schemes' executors run there for payments accepted anywhere;
     * undefined without a chain.
     */
    private readonly engine: SettlementEngine | undefined,
    readonly records: PaymentRecords,
    private readonly endpoints: Endpoints,
    private readonly logs: ActivityLog,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    /** Sanctions screening: a claim's payer and payTo are screened before it is inserted (server/screening). */
    private readonly screening: Screening,
  ) {
    this.identifiers = new PaymentIdentifiers(conn, config.SETTLEMENT_TIMEOUT_MS);
    this.stoppingDue = new Promise((resolve) => { this.answerStopping = resolve; });
    this.claims = new GroupedInserts(() => records.payments.collection as unknown as Collection<PaymentDoc>, { onCommand: (size) => metrics.groupCommitSize.observe({ write: 'payment_claims' }, size) });
  }

  /** Resolves once this process, stopping, has waited long enough for the blocks its paid requests wait for. */
  private readonly stoppingDue: Promise<void>;
  private answerStopping!: () => void;

  /**
   * A stopping process (a rolling restart) answers the paid requests still waiting for their block after
   * `graceMs` as pending, instead of holding its stop for up to SETTLEMENT_TIMEOUT_MS: the settlement goes
   * on (lanes of other processes send and record it), and the buyer's retry with the same
   * payment-identifier is answered its result by any process.
   */
  answerPendingAfter(graceMs: number): void {
    setTimeout(() => this.answerStopping(), graceMs).unref();
  }

  /** A scheme's settlement work: run by whichever process holds the lane given the work. */
  register(scheme: SchemeSettler): void {
    this.settlers.set(scheme.name, scheme);
    this.engine?.register(scheme.name, (work, tools) => this.execute(scheme, work as SettlementWork<PaymentDoc>, tools));
    for (const [kind, executor] of Object.entries(scheme.otherWork ?? {})) this.engine?.register(kind, executor);
  }

  /** Work of another kind than a scheme's (an exact payment's refund): run by whichever process holds the lane given the work. */
  registerWork(kind: string, executor: WorkExecutor): void {
    this.engine?.register(kind, executor);
  }

  private settlerOf(payment: PaymentDoc): SchemeSettler {
    const settler = this.settlers.get(payment.scheme ?? 'exact');
    if (!settler) throw new Error(`no settlement registered for the scheme ${payment.scheme} of payment ${payment._id}`);
    return settler;
  }

  // --- idempotency -----------------------------------------------------------------------------

  /**
   * Runs `once` (claim and settle) unless the payload's payment-identifier says it ran already: a retry
   * then answers the first result instead of settling again. The answer waits for the chain at most
   * SETTLEMENT_TIMEOUT_MS; then it is a pending answer, and the settlement goes on and is recorded (a
   * retry with the same payment-identifier gets its final result).
   */
  async settleIdempotently(seller: SellerAccountDoc, decoded: IdentifiedPayment, authorizationKey: string, once: () => Promise<{ answer: SettlementResult; final?: Promise<SettlementResult> }>): Promise<SettlementResult> {
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
   * 'open' while being settled, 'absent' if it was never claimed (or its claim was let go).
   */
  private async outcomeByAuthorization(orgId: string, authorizationKey: string): Promise<SettlementResult | 'open' | 'absent'> {
    const record = await this.records.byAuthorization(orgId, authorizationKey);
    if (!record) return 'absent';
    if (record.status === 'settled') return settledResultOf(record);
    if (record.status === 'failed') {
      const reason = record.failureReason ?? 'settle_failed';
      return { ok: false, reason, message: `the payment's settlement failed: ${reason}`, payer: record.payerAddress, ...(record.txHash ? { txHash: record.txHash } : {}) };
    }
    return 'open';
  }

  // --- the claim -------------------------------------------------------------------------------

  /**
   * The claim itself, of a payment its scheme verified. The unique index on authorizationKey decides,
   * inside a grouped insert as alone: of any number of copies, in one command or in several, one is
   * inserted and the others are duplicates.
   */
  async insertClaim(payment: PaymentDoc, door: Door, duplicateMessage: string): Promise<ClaimOutcome> {
    // Screened before anything is claimed or sent: a listed party's payment leaves no record but the refusal's.
    const screened = this.screening.enabled ? await this.screen(payment, door) : undefined;
    if (screened) return screened;
    // A database away for a moment is waited for (within the settlement timeout). An insert that failed
    // that way may have landed all the same: a duplicate then may be our own claim.
    let uncertain = false;
    // Filed under its hour, listed before the record exists (records.ts reads pages hour by hour).
    payment.hour = hourOf(payment.createdAt);
    const insert = async () => {
      try {
        await this.records.noteHour(payment);
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
      const existing = await retryWhileDatabaseAway(() => this.records.payments.findOne({ authorizationKey: payment.authorizationKey }, { _id: 1 }).lean(), this.log, 'reading a claim back');
      if (existing?._id === payment._id) result = 'inserted' as const;
    }
    if (result === 'duplicate') {
      this.metrics.paidRequests.inc({ outcome: 'nonce_already_used', door });
      return { ok: false, refused: { ok: false, reason: 'nonce_already_used', message: duplicateMessage, payer: payment.payerAddress } };
    }
    return { ok: true, payment };
  }

  /**
   * The payment's payer and payTo screened (server/screening): undefined if they may pay and be paid,
   * else the refusal, counted as a paid request refused for its reason. Claims screen themselves
   * (insertClaim); what moves a claimed payment's money later (an escrow capture, a refund) screens again.
   */
  async screen(payment: Pick<PaymentDoc, 'orgId' | 'payerAddress' | 'recipientAddress' | 'network' | 'scheme'>, door: Door): Promise<Extract<ClaimOutcome, { ok: false }> | undefined> {
    const refusal = await this.screenParties([{ role: 'payer', address: payment.payerAddress }, { role: 'payTo', address: payment.recipientAddress }], { orgId: payment.orgId, network: payment.network, scheme: payment.scheme ?? 'exact', door });
    return refusal && { ok: false, refused: { ok: false, ...refusal } };
  }

  /**
   * Any parties' screening (a channel's payer and receiver). A refusal of what would have moved money is
   * counted as a paid request refused (`counted`: not a /verify, which moves nothing).
   */
  async screenParties(parties: Party[], at: { orgId: string; network: string; scheme: string; door: Door }, counted = true): Promise<{ reason: string; message: string; payer?: string } | undefined> {
    if (!this.screening.enabled) return undefined;
    const refusal = await this.screening.screen(parties, { ...at, network: screenedNetwork(at.network) });
    if (!refusal) return undefined;
    if (counted) this.metrics.paidRequests.inc({ outcome: refusal.reason, door: at.door });
    const payer = parties.find((p) => p.role === 'payer')?.address;
    return { reason: refusal.reason, message: `${refusal.message}; nothing was charged`, ...(payer ? { payer } : {}) };
  }

  /** Lets go of a claim that will not be sent (its last check failed): the payment may be presented again. */
  async release(payment: PaymentDoc): Promise<void> {
    await retryWhileDatabaseAway(() => this.records.payments.deleteOne({ _id: payment._id, status: { $in: OPEN } }), this.log, 'releasing an unsent claim');
  }

  /** Deletes an unsettled claim once the database answers again, however long that takes (this process lives). */
  private releaseWhenBack(payment: PaymentDoc): void {
    void retryWhileDatabaseAway(() => this.records.payments.deleteOne({ _id: payment._id, status: { $in: OPEN } }), this.log, 'releasing a claim the buyer was told to retry')
      .catch((err) => this.log.error({ paymentId: payment._id, err: (err as Error).message }, 'could not release a claim the buyer was told to retry'));
  }

  /** A verification refused: counted, and answered as a settlement that did not happen. */
  refused(door: Door, verdict: { reason: string; message: string; payer?: string }): ClaimOutcome {
    this.metrics.paidRequests.inc({ outcome: verdict.reason, door });
    return { ok: false, refused: { ok: false, reason: verdict.reason, message: verdict.message, ...(verdict.payer ? { payer: verdict.payer } : {}) } };
  }

  // --- who can send ----------------------------------------------------------------------------

  /** Whether some lane of the deployment can send now (`lane`: that relayer), for reconciliation. */
  canSettle(lane?: string): Promise<boolean> {
    return this.engine ? this.engine.desk.canTake(lane?.toLowerCase()) : Promise.resolve(false);
  }

  /** 503 before anything is claimed when no process of the deployment can send settlements now. */
  async ensureCanSend(door: Door): Promise<void> {
    const desk = this.engine!.desk;
    if (await desk.canTake()) return;
    this.metrics.paidRequests.inc({ outcome: 'relayer_unavailable', door });
    throw new AppError(503, 'relayer_unavailable', `This deployment cannot settle payments now: ${await desk.why()}`, undefined, { 'Retry-After': '2' });
  }

  /**
   * 503 before anything is claimed when no process of the deployment can send from `address` now: a
   * payment that names its sender (the facilitator an upto permit names, an auth-capture payment's operator).
   */
  async ensureCanSendFrom(address: Address, door: Door): Promise<void> {
    const desk = this.engine!.desk;
    if (await desk.canTake(address.toLowerCase())) return;
    this.metrics.paidRequests.inc({ outcome: 'relayer_unavailable', door });
    throw new AppError(503, 'relayer_unavailable', `This deployment cannot settle from ${address} now (the account the payment names as its sender): ${await desk.why(address.toLowerCase())}`, undefined, { 'Retry-After': '2' });
  }

  /**
   * The accounts that settle payments: the relayer pool, in configuration order (read from the registry
   * in a process given no keys; empty while no process with keys runs). A scheme whose payments name
   * their sender (upto) offers these.
   */
  async signers(): Promise<Address[]> {
    return (await this.engine!.poolAddresses()).map((a) => getAddress(a));
  }

  // --- settling --------------------------------------------------------------------------------

  /** Counts a claimed payment's outcome, and how long it took from its claim (this path's network's metrics). */
  countOutcome(result: SettlementResult, door: Door, claimedAt: number): void {
    this.metrics.paidRequests.inc({ outcome: result.ok ? 'settled' : result.reason, door });
    const kind = result.ok ? 'settled' : result.unavailable ? 'unavailable' : isPending(result) ? 'pending' : 'failed';
    this.metrics.settleSeconds.observe({ outcome: kind }, (Date.now() - claimedAt) / 1000);
  }

  /**
   * Settles a claimed payment: hands it to the settlement desk, which gives it to a relayer lane of this
   * process or of another one, whose holder sends it and records the outcome. The answer waits at most
   * SETTLEMENT_TIMEOUT_MS; `final` is the outcome whenever it comes (it is recorded either way). Nothing
   * sent (no lane could take it): the claim goes, and the buyer may present the same payment again.
   */
  settleClaimed(payment: PaymentDoc, terms: { door: Door }): Promise<{ answer: SettlementResult; final: Promise<SettlementResult> }> {
    const claimedAt = Date.now();
    const final = this.handOver(payment)
      .then((result) => {
        this.countOutcome(result, terms.door, claimedAt);
        return result;
      });
    const pending: SettlementResult = {
      ok: false, reason: 'settle_unconfirmed', payer: payment.payerAddress,
      message: `the settlement is not confirmed on chain after ${this.config.SETTLEMENT_TIMEOUT_MS / 1000} s; it goes on: retry with the same payment-identifier for the final result`,
    };
    const stopping: SettlementResult = {
      ok: false, reason: 'settle_unconfirmed', payer: payment.payerAddress,
      message: 'this server is restarting and the settlement is not confirmed yet; it goes on: retry with the same payment-identifier for the final result',
    };
    return withDeadline(Promise.race([final, this.stoppingDue.then(() => stopping)]), this.config.SETTLEMENT_TIMEOUT_MS, pending).then((answer) => {
      if (answer === pending) this.log.warn({ paymentId: payment._id, timeoutMs: this.config.SETTLEMENT_TIMEOUT_MS }, 'settlement answer timed out; the settlement goes on');
      if (answer === stopping) this.log.info({ paymentId: payment._id }, 'settlement answered pending: this process is stopping; the settlement goes on');
      return { answer, final };
    });
  }

  /** The payment as settlement work of its scheme's kind, for the lane its scheme names (if any). */
  private workOf(payment: PaymentDoc): SettlementWork<PaymentDoc> {
    const settler = this.settlerOf(payment);
    const lane = settler.laneOf(payment);
    return { id: payment._id, kind: settler.name, ...(lane ? { lane } : {}), data: payment };
  }

  private async handOver(payment: PaymentDoc): Promise<SettlementResult> {
    // A payment that moves nothing sends no transaction, and the claim keeps it used here.
    if (this.settlerOf(payment).movesNothing?.(payment)) {
      return this.recordOutcome(payment, { ok: true, txHash: '' as Hex, batchSize: 0 }, await this.endpointOf(payment));
    }
    const outcome = await this.engine!.desk.submit(this.workOf(payment));
    if ('done' in outcome) return outcome.done as SettlementResult;
    // Nothing was sent: the claim goes, so the buyer may present the same payment again.
    await retryWhileDatabaseAway(() => this.records.payments.deleteOne({ _id: payment._id, status: { $in: OPEN } }), this.log, 'releasing an unsent claim');
    return { ok: false, reason: 'relayer_unavailable', message: outcome.unavailable, payer: payment.payerAddress, unavailable: true };
  }

  /**
   * Hands work of a scheme's other kind (its `otherWork`: an escrow capture, a refund) to the desk, like
   * a payment's settlement: to a lane of this process or of the process holding it.
   */
  submit(work: SettlementWork): Promise<WorkOutcome> {
    return this.engine!.desk.submit(work);
  }

  /** Gives an open payment to a lane again (reconciliation): its outcome is recorded by the lane's holder; undefined if nothing was sent. */
  async resubmit(payment: PaymentDoc): Promise<SettlementResult | undefined> {
    const outcome = await this.engine!.desk.submit(this.workOf(payment));
    return 'done' in outcome ? outcome.done as SettlementResult : undefined;
  }

  /**
   * Runs on the process that holds the lane the payment was given to (sender.ts), whichever process
   * accepted it: sends the settlement and records what the chain did. Run again for the same payment
   * (a lane taken over from a holder that died), the token or Permit2 refuses the second transfer, the
   * chain names the first one, and the settlement entry that stands is the first.
   */
  private async execute(scheme: SchemeSettler, work: SettlementWork<PaymentDoc>, tools: SendTools): Promise<WorkOutcome> {
    const payment = work.data;
    const settled = await scheme.send(payment, tools);
    if (!settled.ok && settled.unavailable) return { unavailable: settled.message };
    const endpoint = await retryWhileDatabaseAway(() => this.endpointOf(payment), this.log, 'reading a settled payment\'s endpoint');
    return { done: await this.recordOutcome(payment, settled, endpoint) };
  }

  private endpointOf(payment: PaymentDoc): Promise<EndpointDoc | null> {
    return payment.endpointId ? this.endpoints.byId(payment.orgId, payment.endpointId) : Promise.resolve(null);
  }

  /**
   * Writes what the chain did into the payment record, and turns it into the answer. Runs where the
   * settlement was sent; a database away meanwhile is waited for (what the chain did is not lost).
   */
  async recordOutcome(payment: PaymentDoc, settled: SettleOutcome, endpoint: EndpointDoc | null): Promise<SettlementResult> {
    const payer = payment.payerAddress;
    if (settled.ok) {
      const recordSent = this.settlerOf(payment).recordSent;
      if (recordSent) return retryWhileDatabaseAway(() => recordSent.call(this.settlerOf(payment), payment, settled.txHash), this.log, 'recording a sent settlement');
      const done = await retryWhileDatabaseAway(() => this.records.markSettled(payment, settled.txHash, endpoint), this.log, 'recording a settlement');
      return { ...settledResultOf(done), txHash: settled.txHash, payer };
    }
    // An unconfirmed settlement may still be mined: the record stays open for reconciliation to close
    // from the chain, so money that moves is never recorded as failed.
    const change = settled.unconfirmed ? { ...(settled.txHash ? { txHash: settled.txHash } : {}) } : { status: 'failed', failureReason: settled.reason, ...(settled.txHash ? { txHash: settled.txHash } : {}) };
    if (Object.keys(change).length) await retryWhileDatabaseAway(() => this.records.payments.updateOne({ _id: payment._id, status: { $in: OPEN } }, { $set: change }), this.log, 'recording a failed settlement');
    this.logs.recordSoon({ orgId: payment.orgId, action: 'payments.settlement_failed', category: 'payments', severity: 'error', status: 'failure', description: settled.message, targetType: 'payment', targetId: payment._id });
    this.log.warn({ paymentId: payment._id, reason: settled.reason, message: settled.message, txHash: settled.txHash }, settled.unconfirmed ? 'settlement unconfirmed; reconciliation will finish it' : 'settlement failed');
    return { ok: false, reason: settled.reason, message: settled.message, payer, ...(settled.txHash ? { txHash: settled.txHash } : {}) };
  }
}
