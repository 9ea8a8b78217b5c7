import { Schema, type Connection, type Model } from 'mongoose';
import { AppError, notFound } from '../platform/errors.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { Logger } from '../platform/logger.js';
import type { Config } from '../platform/config.js';
import type { PaymentDoc } from './models.js';
import { GroupedInserts } from '../platform/group-commit.js';
import { findByIds } from '../platform/find-by-ids.js';
import type { Collection } from 'mongodb';
import type { Metrics } from '../platform/metrics.js';
import type { RedeemInput, RedeemOutcome } from './redemption.js';
import { settledResultOf } from './records.js';
import type { PaymentService } from './payment-service.js';
import { startRounds } from '../platform/rounds.js';

/**
 * Holds: how our middleware charges only for what was served. A hold verifies the buyer's payment and
 * claims its authorization (so a concurrent copy cannot also run the seller's handler) without settling;
 * the middleware then runs the handler and either captures the hold (the handler succeeded: settle) or
 * releases it (the handler failed: nothing is charged, and the same signed payment may be presented
 * again). A hold nobody decides is released when it expires.
 *
 * Capture and release are decided once per hold by a unique insert (FerretDB makes no conditional update
 * atomic): whichever comes first wins, and the other answers 409. Only the winner writes the payment.
 * What differs between schemes (how a header is read and claimed, what a capture charges) is the
 * scheme's (schemes/<name>/scheme.ts); the rest is the same for all.
 */
interface HoldDecisionDoc {
  _id: string; // the payment id
  orgId: string;
  decision: 'capture' | 'release';
  why: 'captured' | 'released' | 'expired';
  at: Date;
}

const decisionSchema = new Schema<HoldDecisionDoc>({
  _id: String,
  orgId: { type: String, required: true },
  decision: { type: String, required: true },
  why: { type: String, required: true },
  at: { type: Date, required: true },
}, { versionKey: false });

export interface HoldInput extends RedeemInput {
  /** How long the seller's handler may take; capped by the authorization's own validity. */
  holdSeconds?: number;
}

export type HoldOutcome =
  | { ok: true; holdId: string; payer: string; expiresAt: string }
  | Extract<RedeemOutcome, { ok: false }>;

/** The longest a handler may hold a payment, whatever it asks. */
export const MAX_HOLD_SECONDS = 900;
export const DEFAULT_HOLD_SECONDS = 120;
/** Undecided holds of this process kept in memory for their capture (a few MB at most). */
const MAX_OPEN_IN_MEMORY = 5_000;

export class HoldService {
  private readonly decisions: Model<HoldDecisionDoc>;
  /** Capture and release decisions, grouped into insertMany commands (each still a unique insert of its own). */
  private readonly decisionInserts: GroupedInserts<HoldDecisionDoc>;
  /**
   * The holds this process made and nobody has decided yet, so that a capture reaching this process
   * (the seller's middleware keeps its connection) need not read the payment back. Only a shortcut: the
   * decision insert still decides, and a capture that loses it reads the database.
   */
  private readonly open = new Map<string, PaymentDoc>();

  constructor(
    conn: Connection,
    private readonly config: Config,
    /** The records, and each network's schemes, settlement and door: a hold is its payment's network's. */
    private readonly payments: Pick<PaymentService, 'records' | 'forHeader' | 'of'>,
    private readonly logs: ActivityLog,
    private readonly log: Logger,
    metrics?: Metrics,
  ) {
    this.decisions = conn.models.HoldDecision ?? conn.model<HoldDecisionDoc>('HoldDecision', decisionSchema, 'payment_hold_decisions');
    this.decisionInserts = new GroupedInserts(() => this.decisions.collection as unknown as Collection<HoldDecisionDoc>, {
      onCommand: (size) => metrics?.groupCommitSize.observe({ write: 'hold_decisions' }, size),
    });
  }

  async hold(orgId: string, input: HoldInput): Promise<HoldOutcome> {
    // The header's network: its chain, its schemes, its settlement.
    const network = this.payments.forHeader(input.paymentHeader);
    const scheme = network.schemes.forHeader(input.paymentHeader);
    const refused = network.schemes.refusal(scheme);
    if (refused) return { ok: false, error: 'unsupported_scheme', message: refused };
    const prepared = await network.redemption.prepareTerms(orgId, input, scheme);
    if ('refused' in prepared) return prepared.refused;
    const { seller, terms, refuse } = prepared;
    const holdable = scheme.holdable(input.paymentHeader);
    if (!holdable.ok) return refuse(holdable.reason, holdable.message);
    // Settlement must still be possible when the handler is done: the hold ends before the payment does.
    const margin = this.config.PAYMENT_VALIDITY_MARGIN_SECONDS * 1000;
    const until = Math.min(Date.now() + Math.min(input.holdSeconds ?? DEFAULT_HOLD_SECONDS, MAX_HOLD_SECONDS) * 1000, holdable.validBefore * 1000 - margin);
    if (until <= Date.now()) return refuse('authorization_expired', `the ${holdable.instrument} expires before a handler could run and the payment be settled`);
    const claimed = await holdable.claim(seller, terms, new Date(until));
    if (!claimed.ok) return refuse(claimed.refused.reason, claimed.refused.message);
    // Bounded: holds nobody decides stay until their expiry sweep; beyond this many, captures read the database.
    if (this.open.size < MAX_OPEN_IN_MEMORY) this.open.set(claimed.payment._id, claimed.payment);
    return { ok: true, holdId: claimed.payment._id, payer: claimed.payment.payerAddress, expiresAt: new Date(until).toISOString() };
  }

  /**
   * Settles a held payment (the seller's handler succeeded). Answers like redeem. For an exact hold the
   * capture decision (a unique insert) is what marks the payment as being settled: the record keeps `held`
   * until the settlement is recorded, and reconciliation finishes a captured hold whose process died
   * meanwhile (reconcile.ts), so a capture costs no update of its own. An `upto` hold is captured for
   * `amount` (USDC, "0.0123"), what the request used: at most the permit's maximum, absent or "0" for
   * nothing (no transaction; the permit is used up all the same). That charge must be on the record before
   * anything is sent, so reconciliation settles what the seller named: the winning capture writes it
   * (held -> verified), one update that only upto captures pay.
   */
  async capture(orgId: string, id: string, amount?: string): Promise<RedeemOutcome> {
    const payment = this.takeOpen(orgId, id) ?? await this.find(orgId, id);
    if (payment.status !== 'held') return this.outcomeOf(payment);
    const network = this.payments.of(payment);
    const scheme = network.schemes.of(payment);
    // Refused before the decision: the hold stays, so the seller's middleware can still release it. That
    // holds for a process that cannot send now too (no relayer lease, or not the one an upto permit names):
    // the hold stays for another try or a release.
    let charge: bigint | undefined;
    try {
      charge = scheme.captureCharge(payment, amount);
      await scheme.ensureCanSettle(payment, charge);
    } catch (err) {
      this.keepOpen(payment);
      throw err;
    }
    if (!(await this.decide(payment, 'capture', 'captured'))) {
      const decision = await this.decisions.findById(payment._id).lean();
      if (decision?.decision === 'release') throw released(decision);
      // Captured by a concurrent call: answer what it did (or does, once known).
      return this.outcomeOf((await this.payments.records.record(payment._id)) ?? payment);
    }
    if (scheme.captureHold) {
      const answer = await scheme.captureHold(payment, charge);
      return answer.ok ? network.redemption.redeemed(answer, payment.x402Version) : { ok: false, error: answer.reason, message: answer.message };
    }
    let settling = payment;
    if (charge !== undefined) {
      settling = { ...payment, status: 'verified', amountUsdcRaw: charge.toString() };
      await this.payments.records.payments.updateOne({ _id: payment._id }, { $set: { status: 'verified', amountUsdcRaw: charge.toString() }, $unset: { holdExpiresAt: 1 } });
    }
    const { answer } = await network.settlement.settleClaimed(settling, { door: 'redeem' });
    if (!answer.ok && answer.unavailable) throw new AppError(503, 'relayer_unavailable', `${answer.message}; nothing was charged`, undefined, { 'Retry-After': '2' });
    return answer.ok ? network.redemption.redeemed(answer, payment.x402Version) : { ok: false, error: answer.reason, message: answer.message };
  }

  /** Drops a held payment (the seller's handler failed): nothing is charged, the authorization is free again. */
  async release(orgId: string, id: string): Promise<{ holdId: string; released: true }> {
    const payment = await this.find(orgId, id).catch((err) => {
      if (err instanceof AppError && err.code === 'hold_released') return undefined; // released already: nothing to do
      throw err;
    });
    if (!payment) return { holdId: id, released: true };
    this.open.delete(id);
    if (payment.status !== 'held') throw captured();
    if (!(await this.decide(payment, 'release', 'released'))) {
      const decision = await this.decisions.findById(payment._id).lean();
      if (decision?.decision === 'capture') throw captured();
      return { holdId: id, released: true };
    }
    await this.drop(payment, 'released');
    return { holdId: id, released: true };
  }

  /** Releases every hold past its expiry (a handler that never answered, a seller process that died). */
  async releaseExpired(): Promise<number> {
    for (const [id, payment] of this.open) if (payment.holdExpiresAt! < new Date()) this.open.delete(id);
    const expired = await this.payments.records.payments.find({ status: 'held', holdExpiresAt: { $lt: new Date() } }).limit(200).lean();
    if (expired.length === 0) return 0;
    // A captured hold stays `held` until its settlement is recorded (reconciliation finishes one whose
    // process died): it is no longer a hold to expire, and one read of the batch's decisions skips it
    // rather than a refused insert each sweep. A release whose drop was interrupted is finished.
    const decided = new Map((await findByIds(expired.map((p) => p._id), (id) => this.decisions.findById(id).lean())).map((d) => [d._id, d.decision]));
    let count = 0;
    for (const payment of expired) {
      const decision = decided.get(payment._id);
      if (decision === 'capture') continue;
      if (decision === undefined && !(await this.decide(payment, 'release', 'expired'))) continue;
      await this.drop(payment, 'expired');
      count++;
    }
    return count;
  }

  /** Runs releaseExpired every `everyMs` in this process; returns the stop function. */
  startExpirySweep(everyMs: number): () => Promise<void> {
    return startRounds({
      everyMs,
      round: async () => {
        const n = await this.releaseExpired();
        if (n) this.log.info({ released: n }, 'expired payment holds released');
      },
      onError: (err) => this.log.error({ err: err.message }, 'releasing expired payment holds failed'),
    });
  }

  /** A hold this process made and has not seen decided, taken out of memory (the capture decides it now). */
  private takeOpen(orgId: string, id: string): PaymentDoc | undefined {
    const payment = this.open.get(id);
    if (!payment || payment.orgId !== orgId) return undefined;
    this.open.delete(id);
    return payment;
  }

  /** A hold taken out of memory for a capture that was refused before deciding: still undecided. */
  private keepOpen(payment: PaymentDoc): void {
    if (this.open.size < MAX_OPEN_IN_MEMORY) this.open.set(payment._id, payment);
  }

  /** The org's hold (or what it became); a released one is gone, and says so. Another org's is a 404. */
  private async find(orgId: string, id: string): Promise<PaymentDoc> {
    const payment = await this.payments.records.payments.findOne({ _id: id, orgId }).lean();
    if (payment) return payment;
    const decision = await this.decisions.findOne({ _id: id, orgId }).lean();
    if (decision?.decision === 'release') throw released(decision);
    throw notFound('Hold not found');
  }

  /** Inserts the hold's one decision; false if another was inserted first (here or in another process). */
  private async decide(payment: PaymentDoc, decision: HoldDecisionDoc['decision'], why: HoldDecisionDoc['why']): Promise<boolean> {
    return (await this.decisionInserts.insert({ _id: payment._id, orgId: payment.orgId, decision, why, at: new Date() })) === 'inserted';
  }

  /** The claim goes: the same signed payment may be presented again. */
  private async drop(payment: PaymentDoc, why: 'released' | 'expired'): Promise<void> {
    const scheme = this.payments.of(payment).schemes.of(payment);
    if (scheme.releaseHold) await scheme.releaseHold(payment, why);
    else await this.payments.records.payments.deleteOne({ _id: payment._id, status: 'held' });
    this.logs.recordSoon({
      orgId: payment.orgId, action: 'payments.hold_released', category: 'payments',
      description: `Payment of ${payment.payerAddress} for ${payment.resourceUrl} not charged: hold ${why}`, targetType: 'payment', targetId: payment._id,
      metadata: { why },
    });
  }

  /** A capture asked of a hold already decided: what it came to (or, while settling, its result when known). */
  private async outcomeOf(payment: PaymentDoc): Promise<RedeemOutcome> {
    if (payment.status === 'voided') throw new AppError(409, 'hold_released', 'This hold was released and its authorization voided: nothing was charged');
    if (payment.status === 'settled') return this.payments.of(payment).redemption.redeemed(settledResultOf(payment), payment.x402Version);
    if (payment.status === 'failed') return { ok: false, error: payment.failureReason ?? 'settle_failed', message: `the hold was captured, and its settlement failed: ${payment.failureReason ?? 'unknown'}` };
    // Being settled by the capture that won (still `held` or `verified`): wait for its outcome, within the settlement timeout.
    const deadline = Date.now() + this.config.SETTLEMENT_TIMEOUT_MS;
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      const now = await this.payments.records.record(payment._id);
      if (!now) break;
      if (now.status === 'settled' || now.status === 'failed') return this.outcomeOf(now);
    }
    return { ok: false, error: 'settle_unconfirmed', message: 'the capture is still settling; ask again for its result' };
  }
}

const captured = () => new AppError(409, 'hold_captured', 'This hold was already captured: the payment is settled or settling');
const released = (decision: HoldDecisionDoc) => new AppError(409, decision.why === 'expired' ? 'hold_expired' : 'hold_released', decision.why === 'expired' ? 'This hold expired and was released: nothing was charged' : 'This hold was released: nothing was charged');
