import type { Connection, Model } from 'mongoose';
import type { Collection } from 'mongodb';
import type { Config } from '../platform/config.js';
import type { JobQueue, JobRun } from '../platform/jobs.js';
import type { SecretBox } from '../platform/secret-box.js';
import type { ActivityLog } from '../logs/activity-log.js';
import type { ServiceEvents } from '../platform/events.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { PaymentService } from '../payments/payment-service.js';
import type { EndpointDoc, PaymentDoc } from '../payments/models.js';
import { webhookSecretContext } from '../payments/models.js';
import { AppError, notFound, isDuplicateKey } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { afterCursor, pageOf, type Cursor } from '../platform/pagination.js';
import { findByIds } from '../platform/find-by-ids.js';
import { retryWhileDatabaseAway } from '../platform/database-outage.js';
import type { PaymentReceivedEvent } from '../../middleware/webhook.js';
import { deliverySchema, type DeliveryDoc, type DeliveryStatus } from './models.js';
import { postWebhook } from './attempt.js';
import { deliveryStateQuery, type DeliveryState } from './state.js';

/** SPEC 6.1 / 8: retries 1 s, 4 s, 16 s, 64 s and 300 s after the failed attempt, in units of WEBHOOK_RETRY_BASE_MS. */
export const RETRY_SCHEDULE_UNITS = [1, 4, 16, 64, 300] as const;
export const DELIVER_JOB = 'webhooks.deliver';
const EVENT = 'payment.received' as const;

/** The outbox entry markSettled writes onto the payment in the same update that settles it. */
export type PaymentOutbox = NonNullable<PaymentDoc['webhook']>;
type PaymentWithOutbox = PaymentDoc;

interface DeliverJob {
  deliveryId: string;
  round: number;
  /** Attempts already made before this round started (0 for the first round). */
  roundBase: number;
  /**
   * Attempts of this round made before this job's (each attempt is its own job, scheduled by the one
   * before). Absent in jobs queued before it existed, which Agenda retried: their failure count says it.
   */
  made?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The claim ids of one attempt up to takeover `generation`: `<attempt>`, `<attempt>#1`, ... */
const claimIds = (attempt: string) => (generation: number) => [attempt, ...Array.from({ length: generation }, (_, i) => `${attempt}#${i + 1}`)];

/**
 * `payment.received` deliveries. Settlement writes an outbox entry on the payment; `dispatch` turns it
 * into a delivery record (unique per event) and an Agenda job. Each attempt is claimed on the delivery
 * record before it is sent, so duplicate jobs (a re-dispatch after a crash, two workers) never send the
 * same attempt twice, and a lease lets another worker finish the attempt of one that died.
 */
export class WebhookService {
  readonly deliveries: Model<DeliveryDoc>;
  readonly retryDelaysMs: number[];
  private readonly claims: Collection<{ _id: string; expiresAt: Date }>;
  /** Where deliveries to endpoints other than payment endpoints go (identity mail webhooks register here). */
  private readonly targetSources: Array<(endpointId: string) => Promise<{ url: string; secret: string } | { error: string } | undefined>> = [];
  /** How long one attempt may hold its claim: the request timeout plus room for the database writes. */
  private readonly leaseMs: number;

  constructor(
    conn: Connection,
    private readonly config: Config,
    private readonly jobs: JobQueue,
    private readonly payments: PaymentService,
    private readonly secrets: SecretBox,
    private readonly logs: ActivityLog,
    /**
     * One line and one counted outcome per attempt (the operator's view; the seller's is the delivery
     * log), and one readable line per attempt for `agentgate dev`'s terminal (events).
     */
    private readonly observe: { log: Logger; metrics: Metrics; events?: ServiceEvents },
  ) {
    this.deliveries = conn.models.WebhookDelivery ?? conn.model<DeliveryDoc>('WebhookDelivery', deliverySchema, 'webhook_deliveries');
    this.claims = conn.collection<{ _id: string; expiresAt: Date }>('webhook_attempt_claims') as unknown as Collection<{ _id: string; expiresAt: Date }>;
    this.retryDelaysMs = RETRY_SCHEDULE_UNITS.map((units) => units * config.WEBHOOK_RETRY_BASE_MS);
    this.leaseMs = config.WEBHOOK_TIMEOUT_MS + 2_000;
    // No Agenda retries: a failed attempt schedules the next one itself (see attempt), so the schedule
    // follows the attempts on record, also for a delivery the stall sweep resumes.
    jobs.define<DeliverJob>(DELIVER_JOB, (data, run) => this.attempt(data, run), {
      // Longer than the lease, so when Agenda hands a dead worker's job to another, the claim has expired.
      lockLifetimeMs: this.leaseMs + 1_000,
      concurrency: 10,
    });
    // Never let a webhook problem fail the redeem that already moved money: the sweep retries the dispatch.
    payments.records.onSettled.push(async (payment) => {
      await this.dispatch(payment).catch((err) => observe.log.warn({ err, paymentId: payment._id }, 'webhook dispatch deferred to the outbox sweep'));
    });
  }

  /**
   * Other outboxes the sweep drains (mail events not yet told to their webhooks): each is given the age
   * below which its entries are still being dispatched by the request that made them.
   */
  readonly outboxes: Array<(olderThanMs: number) => Promise<number>> = [];

  /** Adds a source of delivery targets: it answers for the endpoint ids it owns, undefined for others. */
  addTargets(source: (endpointId: string) => Promise<{ url: string; secret: string } | { error: string } | undefined>): void {
    this.targetSources.push(source);
  }

  /**
   * Creates the delivery of one event to one endpoint and its first attempt, on the same schedule, claims
   * and delivery log as payment.received. Idempotent per `eventId` (unique): a second call is a no-op.
   */
  async enqueue(input: { eventId: string; event: string; orgId: string; endpointId: string; identityId?: string; subjectId?: string; body: string }): Promise<void> {
    const now = new Date();
    try {
      const delivery = await this.deliveries.create({
        _id: newId('whd'), ...input, status: 'pending', attempts: [], attemptCount: 0, round: 0, nextAttemptAt: now, createdAt: now, updatedAt: now,
      });
      await this.jobs.now<DeliverJob>(DELIVER_JOB, { deliveryId: delivery._id, round: 0, roundBase: 0, made: 0 });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
  }

  /** The delivery log of one endpoint (an identity's mail webhook), newest first. */
  async listForEndpoint(endpointId: string, limit: number): Promise<DeliveryDoc[]> {
    return this.deliveries.find({ endpointId }).sort({ createdAt: -1, _id: -1 }).limit(limit).lean();
  }

  // --- outbox -> delivery + job ----------------------------------------------------------------

  /** Idempotent: safe to call again for the same payment (the sweep does after a crash). */
  async dispatch(payment: PaymentWithOutbox): Promise<void> {
    const outbox = payment.webhook;
    if (!outbox || outbox.status !== 'pending' || !payment.signedReceipt || !payment.settledAt) return;
    // Served from the seller caches (invalidated everywhere when the endpoint changes): a settled batch
    // dispatches many payments of one endpoint at once.
    const endpoint = payment.endpointId ? await this.payments.endpoints.byId(payment.orgId, payment.endpointId) : null;
    if (!endpoint || endpoint.deletedAt || !endpoint.webhookUrl) {
      await this.markOutbox(payment._id, { ...outbox, status: 'skipped' });
      return;
    }
    const event: PaymentReceivedEvent = { event: EVENT, paymentId: payment._id, createdAt: payment.settledAt.toISOString(), ...payment.signedReceipt };
    const now = new Date();
    let delivery: DeliveryDoc | null;
    let created = true;
    try {
      delivery = (await this.deliveries.create({
        _id: newId('whd'), eventId: outbox.eventId, event: EVENT, orgId: payment.orgId, endpointId: endpoint._id, paymentId: payment._id,
        body: JSON.stringify(event), status: 'pending', attempts: [], attemptCount: 0, round: 0, nextAttemptAt: now, createdAt: now, updatedAt: now,
      })).toObject();
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      created = false;
      delivery = await this.deliveries.findOne({ eventId: outbox.eventId }).lean();
    }
    if (!delivery) return;
    // A second job for round 0 (crash after enqueue, before the mark below) is harmless: it finds its
    // attempt already claimed or made. But a delivery found already made is enqueued again only if no job
    // holds it: under load, sweeps of every process finding it still unattempted would each add a job,
    // and a job queue that grows makes every poll of it slower (FerretDB reads the whole queue per poll).
    if (delivery.status === 'pending' && delivery.round === 0 && delivery.attemptCount === 0
      && (created || !(await this.jobs.has(DELIVER_JOB, { deliveryId: delivery._id })))) {
      await this.jobs.now<DeliverJob>(DELIVER_JOB, { deliveryId: delivery._id, round: 0, roundBase: 0, made: 0 });
    }
    await this.markOutbox(payment._id, { ...outbox, status: 'dispatched', deliveryId: delivery._id });
  }

  private async markOutbox(paymentId: string, outbox: PaymentOutbox): Promise<void> {
    await this.payments.records.payments.updateOne({ _id: paymentId, 'webhook.eventId': outbox.eventId }, { $set: { webhook: outbox } });
  }

  /** Dispatches outbox entries left pending (a crash between settling and enqueueing). */
  async sweepOutbox(olderThanMs: number): Promise<number> {
    const stale = await this.payments.records.payments.find({ 'webhook.status': 'pending', settledAt: { $lt: new Date(Date.now() - olderThanMs) } } as never)
      .sort({ settledAt: 1 }).limit(200).lean() as PaymentWithOutbox[];
    for (const payment of stale) await this.dispatch(payment);
    return stale.length;
  }

  /**
   * Re-enqueues deliveries whose next attempt is overdue while no job for them exists: the worker that
   * recorded a failed attempt died before it scheduled the next one, or a job failed unexpectedly. Such a
   * delivery would otherwise stay pending forever. A job that exists (queued, or locked by a dead worker
   * until its lock expires) runs in time by itself, so it is left alone and nothing is multiplied.
   */
  async resumeStalled(): Promise<number> {
    // Overdue by more than a dead worker's lock lifetime and a few polls: its job, if any, had its chance.
    const overdue = new Date(Date.now() - (this.leaseMs + 1_000 + 3 * this.config.JOBS_PROCESS_EVERY_MS));
    const stalled = await this.deliveries.find({ status: 'pending', nextAttemptAt: { $lt: overdue } }).sort({ nextAttemptAt: 1 }).limit(200).lean();
    let resumed = 0;
    for (const delivery of stalled) {
      if (await this.jobs.has(DELIVER_JOB, { deliveryId: delivery._id })) continue;
      const roundBase = delivery.roundBase ?? 0;
      await this.jobs.now<DeliverJob>(DELIVER_JOB, { deliveryId: delivery._id, round: delivery.round, roundBase, made: delivery.attemptCount - roundBase });
      resumed++;
    }
    return resumed;
  }

  /**
   * Sweeps once now and then every WEBHOOK_OUTBOX_SWEEP_MS; returns the stop function. The first sweep runs
   * in the background: a process that starts while the deployment is busy (a rolling restart under load)
   * may find hundreds of pending entries, and serving must not wait for them.
   */
  async startOutboxSweep(): Promise<() => Promise<void>> {
    const failed = (err: unknown) => this.observe.log.error({ err }, 'webhook outbox sweep failed');
    const sweep = (olderThanMs: number) => Promise.all([this.sweepOutbox(olderThanMs), this.resumeStalled(), ...this.outboxes.map((o) => o(olderThanMs))]).catch(failed);
    let running: Promise<unknown> = sweep(0);
    const timer = setInterval(() => {
      // Entries younger than this are still being dispatched by the settling request itself.
      running = sweep(10_000);
    }, this.config.WEBHOOK_OUTBOX_SWEEP_MS);
    timer.unref();
    return async () => {
      clearInterval(timer);
      await running;
    };
  }

  // --- one attempt (the job) -------------------------------------------------------------------

  private async attempt(job: DeliverJob, run: JobRun): Promise<void> {
    const made = job.made ?? run.attempt - 1;
    const expectedCount = job.roundBase + made;
    const claimed = await this.claim(job, expectedCount);
    if (!claimed) return;
    const { delivery } = claimed;
    const target = await this.targetFor(delivery.endpointId);
    if ('error' in target) {
      await this.finish(claimed, expectedCount, 'failed', undefined, target.error);
      return;
    }
    const result = await postWebhook({
      url: target.url, body: delivery.body, secret: target.secret, event: delivery.event, idempotencyKey: delivery.eventId,
      timeoutMs: this.config.WEBHOOK_TIMEOUT_MS, allowLoopback: this.config.mode === 'dev',
    });
    const retry = result.verdict === 'retry' && made < this.retryDelaysMs.length;
    const status: DeliveryStatus = result.verdict === 'delivered' ? 'delivered' : retry ? 'pending' : 'failed';
    const nextAttemptAt = retry ? new Date(Date.now() + this.retryDelaysMs[made]!) : null;
    await this.finish(claimed, expectedCount, status, result.record, result.record.error ?? (result.record.statusCode && status !== 'delivered' ? `receiver answered ${result.record.statusCode}` : undefined), nextAttemptAt);
    // Recorded first, then scheduled: dying in between leaves an overdue pending delivery without a job,
    // which resumeStalled picks up; the other order could send this attempt twice.
    if (retry) await this.jobs.schedule<DeliverJob>(nextAttemptAt!, DELIVER_JOB, { ...job, made: made + 1 });
  }

  /**
   * Claims attempt `expectedCount + 1` of this round by inserting its claim under a unique _id: the one
   * guarantee that holds on FerretDB 1.x too (its findOneAndUpdate is not atomic under concurrency). A
   * live claim is waited out (it ends within the lease). An expired one (its worker died) is not deleted
   * and inserted again: on FerretDB two workers can both do that and both win (a delete that matched the
   * dead worker's claim removes the claim another worker has just put in its place; measured: 3 of 60
   * rounds of 12 claimers). The takeover is a new claim instead, `<attempt>#1`, then `#2`, ..., which
   * only one worker can insert. Whoever holds the claim then checks the attempt was not already recorded.
   */
  private async claim(job: DeliverJob, expectedCount: number): Promise<{ delivery: DeliveryDoc; claimIds: string[] } | null> {
    const ids = claimIds(`${job.deliveryId}:${job.round}:${expectedCount + 1}`);
    let generation = 0;
    // A holder ends within its lease; two leases is room for one takeover after a death.
    const giveUpAt = Date.now() + 2 * this.leaseMs;
    while (Date.now() < giveUpAt) {
      const id = ids(generation).at(-1)!;
      try {
        await this.claims.insertOne({ _id: id, expiresAt: new Date(Date.now() + this.leaseMs) });
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        if (!(await this.stillDue(job, expectedCount))) return null;
        const holder = await this.claims.findOne({ _id: id });
        const wait = holder ? holder.expiresAt.getTime() - Date.now() : 0;
        // A live holder: look again shortly (it usually finishes long before its lease ends, and then
        // this attempt is no longer due). An expired one: take over with the next generation.
        if (wait > 0) await sleep(Math.min(wait + 50, 1_000));
        else if (holder) generation++;
        continue;
      }
      const delivery = await this.deliveries.findById(job.deliveryId).lean();
      if (delivery && this.isDue(delivery, job, expectedCount)) return { delivery, claimIds: ids(generation) };
      await this.claims.deleteOne({ _id: id });
      return null;
    }
    return null;
  }

  private isDue(delivery: DeliveryDoc, job: DeliverJob, expectedCount: number): boolean {
    return delivery.status === 'pending' && delivery.round === job.round && delivery.attemptCount === expectedCount;
  }

  private async stillDue(job: DeliverJob, expectedCount: number): Promise<boolean> {
    const delivery = await this.deliveries.findById(job.deliveryId).lean();
    return !!delivery && this.isDue(delivery, job, expectedCount);
  }

  private async targetFor(endpointId: string): Promise<{ url: string; secret: string } | { error: string }> {
    for (const source of this.targetSources) {
      const target = await source(endpointId);
      if (target) return target;
    }
    const endpoint = await this.payments.endpoints.endpoints.findById(endpointId).lean();
    return endpoint ? this.targetOf(endpoint) : { error: 'endpoint_deleted: the endpoint was deleted' };
  }

  private targetOf(endpoint: EndpointDoc): { url: string; secret: string } | { error: string } {
    if (endpoint.deletedAt) return { error: 'endpoint_deleted: the endpoint was deleted' };
    if (!endpoint.webhookUrl || !endpoint.webhookSecret) return { error: 'webhook_removed: the endpoint no longer has a webhookUrl' };
    // Read at every attempt, so a rotated secret or a corrected URL applies to the retries that follow.
    return { url: endpoint.webhookUrl, secret: this.secrets.openText(endpoint.webhookSecret, webhookSecretContext(endpoint._id)) };
  }

  private async finish(claimed: { delivery: DeliveryDoc; claimIds: string[] }, expectedCount: number, status: DeliveryStatus, record: DeliveryDoc['attempts'][number] | undefined, error: string | undefined, nextAttemptAt: Date | null = null): Promise<void> {
    const { delivery } = claimed;
    const now = new Date();
    // The attempt was made (the receiver may have the event): recording it waits out a database that is
    // away for a moment, or the job would fail and send it again. The update is conditional on the count
    // it raises, so a repeat of it after a lost answer changes nothing.
    await retryWhileDatabaseAway(() => this.deliveries.updateOne({ _id: delivery._id, round: delivery.round, attemptCount: expectedCount }, {
      ...(record ? { $push: { attempts: record }, $inc: { attemptCount: 1 } } : {}),
      $set: {
        status, nextAttemptAt, lastError: error ?? null, updatedAt: now,
        ...(status === 'delivered' ? { deliveredAt: now } : {}), ...(status === 'failed' ? { failedAt: now } : {}),
      },
    }), this.observe.log, 'recording a webhook attempt', Date.now() + 60_000);
    // The attempt is on record, so a late copy of this job that claims it again finds nothing to do.
    // (One delete per id: an equality on _id is what FerretDB answers from its index.)
    await retryWhileDatabaseAway(() => Promise.all(claimed.claimIds.map((id) => this.claims.deleteOne({ _id: id }))), this.observe.log, 'releasing a webhook attempt claim', Date.now() + 60_000);
    const outcome = status === 'pending' ? 'retry' : status;
    this.observe.metrics.webhookOutcomes.inc({ outcome });
    const line = {
      deliveryId: delivery._id, event: delivery.event, ...(delivery.paymentId ? { paymentId: delivery.paymentId } : {}), endpointId: delivery.endpointId, attempt: expectedCount + 1, outcome,
      statusCode: record?.statusCode ?? null, durationMs: record?.durationMs ?? null, ...(error ? { error } : {}), ...(nextAttemptAt ? { nextAttemptAt } : {}),
    };
    this.observe.events?.emit({ category: 'webhooks', line: attemptLine(delivery.event, delivery.paymentId ?? delivery.subjectId ?? delivery.eventId, expectedCount + 1, record, status, error, nextAttemptAt) });
    if (status === 'delivered') this.observe.log.info(line, 'webhook delivered');
    else this.observe.log.warn(line, status === 'pending' ? 'webhook attempt failed, will retry' : 'webhook delivery failed');
    if (status === 'pending') return;
    const subject = delivery.paymentId ?? delivery.subjectId ?? delivery.eventId;
    await this.logs.record({
      orgId: delivery.orgId, ...(delivery.identityId ? { identityId: delivery.identityId } : {}),
      action: status === 'delivered' ? 'webhooks.delivered' : 'webhooks.failed', category: 'webhooks',
      severity: status === 'delivered' ? 'info' : 'warning', status: status === 'delivered' ? 'success' : 'failure',
      description: status === 'delivered' ? `${delivery.event} delivered for ${subject}` : `${delivery.event} delivery for ${subject} failed: ${error ?? 'unknown'}`,
      targetType: 'webhook_delivery', targetId: delivery._id, metadata: { endpointId: delivery.endpointId, attempts: expectedCount + (record ? 1 : 0) },
    });
  }

  // --- seller reads and manual retry -----------------------------------------------------------

  async list(orgId: string, filter: DeliveryFilter, limit: number, cursor?: Cursor) {
    const rows = await this.deliveries.find({ ...deliveryQuery(orgId, filter), ...afterCursor('createdAt', cursor) }).sort({ createdAt: -1, _id: -1 }).limit(limit + 1).lean();
    return pageOf(rows, limit, (row) => ({ at: row.createdAt, id: row._id }));
  }

  /** One numbered page (the console's "26–50 of N"), without the bodies; newest first. */
  async listPage(orgId: string, filter: DeliveryFilter, offset: number, limit: number): Promise<Array<Omit<DeliveryDoc, 'body'>>> {
    return this.deliveries.find(deliveryQuery(orgId, filter), { body: 0 }).sort({ createdAt: -1, _id: -1 }).skip(offset).limit(limit).lean();
  }

  /** Counted in the database. */
  async count(orgId: string, filter: DeliveryFilter): Promise<number> {
    return this.deliveries.countDocuments(deliveryQuery(orgId, filter));
  }

  /** Status fields of the org's deliveries with these ids (a payments page's webhook column): no bodies or attempts. */
  async summaries(orgId: string, ids: string[]): Promise<Map<string, Pick<DeliveryDoc, '_id' | 'status' | 'lastError' | 'attemptCount' | 'nextAttemptAt'>>> {
    const rows = await findByIds(ids, (id) => this.deliveries.findOne({ _id: id, orgId }, { status: 1, lastError: 1, attemptCount: 1, nextAttemptAt: 1 }).lean());
    return new Map(rows.map((row) => [row._id, row]));
  }

  async get(orgId: string, id: string): Promise<DeliveryDoc> {
    const doc = await this.deliveries.findOne({ _id: id, orgId }).lean();
    if (!doc || doc.identityId) throw notFound('Webhook delivery not found');
    return doc;
  }

  /**
   * "Retry now": a pending or failing delivery gets its due attempt at once instead of at nextAttemptAt;
   * a finished one (failed or delivered) starts a new round, as retry does. The early job carries the same
   * round and attempt number as the scheduled one, so the attempt claim lets only one of them send; the
   * other finds the attempt made (or, if an attempt is running now, it waits and then finds it made).
   * Nothing here writes the delivery, so no conditional update is relied on. `seen` is the round and
   * attempt count the person was shown: when the delivery has moved on since (the attempt they meant to
   * hurry was made, perhaps delivered), nothing is sent again.
   */
  async retryNow(orgId: string, id: string, seen?: { round: number; attemptCount: number }): Promise<{ delivery: DeliveryDoc; outcome: 'hurried' | 'new_round' | 'moved_on' }> {
    const current = await this.get(orgId, id);
    if (seen && (current.round !== seen.round || current.attemptCount !== seen.attemptCount)) return { delivery: current, outcome: 'moved_on' };
    if (current.status !== 'pending') return { delivery: await this.retry(orgId, id), outcome: 'new_round' };
    const roundBase = current.roundBase ?? 0;
    await this.jobs.now<DeliverJob>(DELIVER_JOB, { deliveryId: id, round: current.round, roundBase, made: current.attemptCount - roundBase });
    this.observe.log.info({ deliveryId: id, paymentId: current.paymentId, attempt: current.attemptCount + 1, round: current.round }, 'webhook attempt brought forward by hand');
    await this.logs.record({ orgId, action: 'webhooks.retried', category: 'webhooks', description: `payment.received delivery for ${current.paymentId}: next attempt (#${current.attemptCount + 1}) sent now by hand`, targetType: 'webhook_delivery', targetId: id });
    return { delivery: current, outcome: 'hurried' };
  }

  /** Starts a new round of the full schedule for a delivery that has finished (failed or delivered). */
  async retry(orgId: string, id: string): Promise<DeliveryDoc> {
    const current = await this.get(orgId, id);
    if (current.status === 'pending') throw new AppError(409, 'delivery_pending', 'This delivery is still being attempted');
    const round = current.round + 1;
    // Of concurrent retries (two clicks, two processes), the one that inserts the round's claim starts it.
    if (!(await this.claimRound(id, round))) throw new AppError(409, 'delivery_pending', 'This delivery is already being retried');
    const now = new Date();
    // Unconditional: only the round's claimant writes, and while a delivery is finished no attempt job writes it.
    await this.deliveries.updateOne({ _id: id, orgId },
      { $set: { status: 'pending', round, roundBase: current.attemptCount, nextAttemptAt: now, updatedAt: now, lastError: null, deliveredAt: null, failedAt: null } });
    const doc = { ...current, status: 'pending' as const, round, roundBase: current.attemptCount, nextAttemptAt: now, updatedAt: now, lastError: null, deliveredAt: null, failedAt: null };
    await this.jobs.now<DeliverJob>(DELIVER_JOB, { deliveryId: id, round, roundBase: doc.attemptCount, made: 0 });
    this.observe.log.info({ deliveryId: id, paymentId: doc.paymentId, round }, 'webhook delivery retried by hand: new round');
    await this.logs.record({ orgId, action: 'webhooks.retried', category: 'webhooks', description: `${doc.event} delivery for ${doc.paymentId} retried by hand`, targetType: 'webhook_delivery', targetId: id });
    return doc;
  }

  /**
   * The right to start round `round`: a unique insert, as for attempts. A claim whose holder died before
   * it started the round (the lease ran out and the delivery is still at an earlier round) is taken over
   * with the next generation, `<round>#1`, ..., which again only one process can insert.
   */
  private async claimRound(deliveryId: string, round: number): Promise<boolean> {
    const ids = claimIds(`${deliveryId}:round:${round}`);
    for (let generation = 0; generation < 20; generation++) {
      const id = ids(generation).at(-1)!;
      try {
        await this.claims.insertOne({ _id: id, expiresAt: new Date(Date.now() + this.leaseMs) });
        return true;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        const holder = await this.claims.findOne({ _id: id });
        if (holder && holder.expiresAt.getTime() > Date.now()) return false;
        const delivery = await this.deliveries.findById(deliveryId, { round: 1 }).lean();
        if (!delivery || delivery.round >= round) return false;
      }
    }
    return false;
  }
}

/** What the delivery log and the console narrow a list by; every field optional. */
export interface DeliveryFilter {
  endpointId?: string;
  status?: DeliveryStatus;
  /** The console's four states (state.ts); wins over status when both are given. */
  state?: DeliveryState;
  paymentId?: string;
  /** createdAt >= from */
  from?: Date;
  /** createdAt < until */
  until?: Date;
}

function deliveryQuery(orgId: string, filter: DeliveryFilter): Record<string, unknown> {
  return {
    orgId,
    // The seller's delivery log: payment.received only; identities' mail webhooks have their own log.
    identityId: { $exists: false },
    ...(filter.endpointId ? { endpointId: filter.endpointId } : {}),
    ...(filter.status ? { status: filter.status } : {}),
    ...(filter.state ? deliveryStateQuery(filter.state) : {}),
    ...(filter.paymentId ? { paymentId: filter.paymentId } : {}),
    ...(filter.from || filter.until ? { createdAt: { ...(filter.from ? { $gte: filter.from } : {}), ...(filter.until ? { $lt: filter.until } : {}) } } : {}),
  };
}

/** `webhooks: payment.received for pay_… attempt 2 to https://…: 503 in 41 ms, next attempt in 10 s`. */
function attemptLine(event: string, subject: string, attempt: number, record: DeliveryDoc['attempts'][number] | undefined, status: DeliveryStatus, error: string | undefined, nextAttemptAt: Date | null): string {
  const answer = record ? (record.statusCode ? `${record.statusCode} in ${record.durationMs} ms` : `${record.error ?? 'no answer'} after ${record.durationMs} ms`) : (error ?? 'not sent');
  const next = status === 'delivered' ? 'delivered'
    : status === 'pending' ? `next attempt in ${Math.max(0, Math.round(((nextAttemptAt?.getTime() ?? Date.now()) - Date.now()) / 1000))} s`
    : 'failed, no more attempts';
  return `webhooks: ${event} for ${subject} attempt ${attempt}${record?.url ? ` to ${record.url}` : ''}: ${answer}, ${next}`;
}
