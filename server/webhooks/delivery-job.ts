import type { Model } from 'mongoose';
import type { Collection } from 'mongodb';
import type { Config } from '../platform/config.js';
import type { JobQueue, JobRun } from '../platform/jobs.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { ServiceEvents } from '../platform/events.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import { isDuplicateKey } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { retryWhileDatabaseAway } from '../platform/database-outage.js';
import { outboundPolicy } from '../platform/ssrf.js';
import type { ProcessRegistry } from '../platform/process-registry.js';
import type { DeliveryDoc, DeliveryStatus } from './models.js';
import { postWebhook } from './attempt.js';
import { hourOf, type HistoryBuckets } from '../platform/history-buckets.js';
import { deliveriesScope } from './delivery-log.js';

// The delivery job: one attempt of one delivery per run, on the retry schedule, each attempt claimed
// before it is sent so that duplicate jobs (a re-dispatch after a crash, two workers) never send the same
// attempt twice, and a lease lets another worker finish the attempt of one that died. Whatever made the
// delivery (an area's outbox: a settled payment, a refund, a channel claim, an identity's mail event)
// hands it here; where it goes is asked of the area that owns its endpoint, at every attempt.

/** SPEC 6.1 / 8: retries 1 s, 4 s, 16 s, 64 s and 300 s after the failed attempt, in units of WEBHOOK_RETRY_BASE_MS. */
export const RETRY_SCHEDULE_UNITS = [1, 4, 16, 64, 300] as const;
export const DELIVER_JOB = 'webhooks.deliver';

export interface DeliverJob {
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

/** Where a delivery goes: its URL and signing secret, or why it cannot go any more. */
export type DeliveryTarget = { url: string; secret: string } | { error: string };
/** Where the delivery to an endpoint goes, asked at every attempt (a rotated secret applies at once); undefined: no such endpoint. */
export type DeliveryTargets = (endpointId: string) => Promise<DeliveryTarget | undefined>;

/** One event for one endpoint, as an area's outbox hands it over; `eventId` makes it once. */
export type DeliveryInput = Pick<DeliveryDoc, 'eventId' | 'event' | 'orgId' | 'endpointId' | 'paymentId' | 'identityId' | 'subjectId' | 'body'>;

/** What an area's outbox needs of the engine. */
export interface DeliveryQueue {
  /**
   * The delivery of one event to one endpoint and its first attempt; idempotent per `eventId` (unique).
   * Returns the delivery's id. `queued`: the deliveries whose job is queued or running, when the caller
   * has read them (a sweep, once per round).
   */
  enqueue(input: DeliveryInput, queued?: ReadonlySet<string>): Promise<string>;
  /** The deliveries whose job is queued or running, in one read. */
  queuedDeliveries(): Promise<Set<string>>;
}

/** An attempt's claims and a round's: unique ids in one collection, each with the process making it and a lease. */
export type AttemptClaims = Collection<{ _id: string; owner?: string; expiresAt: Date }>;

/** Takeovers of one attempt tried in a row before the job gives up (the stall sweep brings it back). */
const MAX_CLAIM_TRIES = 8;

/** A stalled delivery (due, no job) is enqueued again once it is this much (and two polls) overdue. */
const STALL_GRACE_MS = 3_000;
/** Stalled deliveries looked at per sweep round, oldest first. */
const STALL_BATCH = 200;

/** The claim ids of one attempt up to takeover `generation`: `<attempt>`, `<attempt>#1`, ... */
export const claimIds = (attempt: string) => (generation: number) => [attempt, ...Array.from({ length: generation }, (_, i) => `${attempt}#${i + 1}`)];

export class DeliveryJobs implements DeliveryQueue {
  readonly retryDelaysMs: number[];
  /** How long one attempt may hold its claim: the request timeout plus room for the database writes. */
  readonly leaseMs: number;

  constructor(
    private readonly deliveries: Model<DeliveryDoc>,
    /** Where deliveries are filed by the hour (the delivery log's pages read them so). */
    private readonly history: HistoryBuckets,
    private readonly claims: AttemptClaims,
    private readonly config: Config,
    private readonly jobs: JobQueue,
    private readonly targets: DeliveryTargets,
    private readonly logs: ActivityLog,
    /** Who is live: an attempt claimed by a process that is gone is taken over at once. */
    private readonly processes: ProcessRegistry,
    /**
     * One line and one counted outcome per attempt (the operator's view; the seller's is the delivery
     * log), and one readable line per attempt for `agentgate dev`'s terminal (events).
     */
    private readonly observe: { log: Logger; metrics: Metrics; events?: ServiceEvents },
  ) {
    this.retryDelaysMs = RETRY_SCHEDULE_UNITS.map((units) => units * config.WEBHOOK_RETRY_BASE_MS);
    this.leaseMs = config.WEBHOOK_TIMEOUT_MS + 2_000;
    // No Agenda retries: a failed attempt schedules the next one itself (see attempt), so the schedule
    // follows the attempts on record, also for a delivery the stall sweep resumes.
    jobs.define<DeliverJob>(DELIVER_JOB, (data, run) => this.attempt(data, run), {
      // Longer than the lease, so when Agenda hands a dead worker's job to another, the claim has expired.
      lockLifetimeMs: this.leaseMs + 1_000,
      // Attempts wait on the receiver and the database, not on this process's CPU (see the setting).
      concurrency: config.WEBHOOK_CONCURRENCY,
    });
  }

  /** Queues the attempt of a delivery that `job` names, to run now. */
  async now(job: DeliverJob): Promise<void> {
    await this.jobs.now<DeliverJob>(DELIVER_JOB, job);
  }

  /** Whether a job for this delivery is queued (or running). */
  has(deliveryId: string): Promise<boolean> {
    return this.jobs.has(DELIVER_JOB, { deliveryId });
  }

  /** The deliveries whose job is queued or running, in one read (a sweep round's). */
  queuedDeliveries(): Promise<Set<string>> {
    return this.jobs.liveKeys(DELIVER_JOB, 'deliveryId');
  }

  /**
   * Creates the delivery of one event to one endpoint and its first attempt's job. Idempotent per
   * `eventId` (unique): a second call finds the first one's delivery, and queues its first attempt again
   * only if no attempt was made and no job holds it (its maker died between the two), so sweeps of many
   * processes finding it add no jobs: a job queue that grows makes every poll of it slower (FerretDB reads
   * the whole queue per poll). A second job for one attempt would be harmless anyway: the attempt's claim.
   */
  async enqueue(input: DeliveryInput, queued?: ReadonlySet<string>): Promise<string> {
    const now = new Date();
    let delivery: DeliveryDoc | null;
    try {
      // Its hour listed before the delivery exists, so a page never misses it.
      await this.history.note(deliveriesScope(input.orgId), now);
      delivery = (await this.deliveries.create({
        _id: newId('whd'), ...input, status: 'pending', attempts: [], attemptCount: 0, round: 0, nextAttemptAt: now, createdAt: now, hour: hourOf(now), updatedAt: now,
      })).toObject();
      await this.now({ deliveryId: delivery._id, round: 0, roundBase: 0, made: 0 });
      return delivery._id;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
    delivery = await this.deliveries.findOne({ eventId: input.eventId }).lean();
    if (!delivery) throw new Error(`webhook delivery of event ${input.eventId}: a duplicate that cannot be found`);
    if (delivery.status === 'pending' && delivery.round === 0 && delivery.attemptCount === 0
      && !(queued ? queued.has(delivery._id) : await this.has(delivery._id))) {
      await this.now({ deliveryId: delivery._id, round: 0, roundBase: 0, made: 0 });
    }
    return delivery._id;
  }

  /**
   * Re-enqueues deliveries whose next attempt is overdue while no job for them is queued or running: the
   * process that recorded a failed attempt died before it scheduled the next one, a job failed unexpectedly,
   * or a database outage lost the enqueue. Such a delivery would otherwise stay pending forever. A job that
   * exists runs by itself (one locked by a process that is gone is taken over at once), so it is left alone
   * and nothing is multiplied. One read of the live jobs for the whole round.
   */
  async resumeStalled(shouldStop: () => boolean = () => false): Promise<number> {
    // Overdue by a few polls: a delivery's job runs within one poll of its time (at once in the process that enqueued it).
    const overdue = new Date(Date.now() - (STALL_GRACE_MS + 2 * this.config.JOBS_PROCESS_EVERY_MS));
    const stalled = await this.deliveries.find({ status: 'pending', nextAttemptAt: { $lt: overdue } }).sort({ nextAttemptAt: 1 }).limit(STALL_BATCH).lean();
    if (stalled.length === 0) return 0;
    const queued = await this.queuedDeliveries();
    let resumed = 0;
    for (const delivery of stalled) {
      if (shouldStop()) break;
      if (queued.has(delivery._id)) continue;
      const roundBase = delivery.roundBase ?? 0;
      await this.now({ deliveryId: delivery._id, round: delivery.round, roundBase, made: delivery.attemptCount - roundBase });
      this.observe.log.warn({ deliveryId: delivery._id, overdueMs: Date.now() - (delivery.nextAttemptAt?.getTime() ?? Date.now()) }, 'webhook delivery had no job; enqueued again');
      resumed++;
    }
    return resumed;
  }

  /** The oldest delivery whose attempt is due and not yet made: how far behind delivery is (/metrics, /ready). */
  async oldestDueMs(): Promise<number> {
    const [oldest] = await this.deliveries.find({ status: 'pending', nextAttemptAt: { $lte: new Date() } }, { nextAttemptAt: 1 }).sort({ nextAttemptAt: 1 }).limit(1).lean();
    return oldest?.nextAttemptAt ? Math.max(0, Date.now() - oldest.nextAttemptAt.getTime()) : 0;
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
    // A stall since the claim (the reads above, a busy event loop) may have made this process count as gone:
    // another may be taking this attempt over right now, and both would send it. It sends nothing then.
    if (!this.processes.active) return;
    const result = await postWebhook({
      url: target.url, body: delivery.body, secret: target.secret, event: delivery.event, idempotencyKey: delivery.eventId,
      timeoutMs: this.config.WEBHOOK_TIMEOUT_MS, policy: outboundPolicy(this.config),
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
   * guarantee that holds on FerretDB 1.x too (its findOneAndUpdate is not atomic under concurrency). A claim
   * held by a live process stands: this job ends, and that process records the attempt (if it dies first,
   * its own job is taken over and comes back here). A claim whose process is gone, or whose lease ran out,
   * is not deleted and inserted again: on FerretDB two workers can both do that and both win (a delete
   * that matched the dead worker's claim removes the claim another worker has just put in its place;
   * measured: 3 of 60 rounds of 12 claimers). The takeover is a new claim instead, `<attempt>#1`, then
   * `#2`, ..., which only one worker can insert. Whoever holds the claim then checks the attempt was not
   * already recorded.
   */
  private async claim(job: DeliverJob, expectedCount: number): Promise<{ delivery: DeliveryDoc; claimIds: string[] } | null> {
    // A process the others count as gone takes no attempt: they may be taking over its claims right now.
    if (!this.processes.active) return null;
    const ids = claimIds(`${job.deliveryId}:${job.round}:${expectedCount + 1}`);
    let generation = 0;
    for (let tries = 0; tries < MAX_CLAIM_TRIES; tries++) {
      const id = ids(generation).at(-1)!;
      try {
        await this.claims.insertOne({ _id: id, owner: this.processes.id, expiresAt: new Date(Date.now() + this.leaseMs) });
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        const holder = await this.claims.findOne({ _id: id });
        if (!holder) continue; // released meanwhile: the same id again
        const held = holder.expiresAt.getTime() > Date.now() && (!holder.owner || await this.processes.isLive(holder.owner));
        if (held) return null;
        generation++;
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

  private async targetFor(endpointId: string): Promise<DeliveryTarget> {
    return (await this.targets(endpointId)) ?? { error: 'endpoint_deleted: the endpoint was deleted' };
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
}

/** `webhooks: payment.received for pay_… attempt 2 to https://…: 503 in 41 ms, next attempt in 10 s`. */
function attemptLine(event: string, subject: string, attempt: number, record: DeliveryDoc['attempts'][number] | undefined, status: DeliveryStatus, error: string | undefined, nextAttemptAt: Date | null): string {
  const answer = record ? (record.statusCode ? `${record.statusCode} in ${record.durationMs} ms` : `${record.error ?? 'no answer'} after ${record.durationMs} ms`) : (error ?? 'not sent');
  const next = status === 'delivered' ? 'delivered'
    : status === 'pending' ? `next attempt in ${Math.max(0, Math.round(((nextAttemptAt?.getTime() ?? Date.now()) - Date.now()) / 1000))} s`
    : 'failed, no more attempts';
  return `webhooks: ${event} for ${subject} attempt ${attempt}${record?.url ? ` to ${record.url}` : ''}: ${answer}, ${next}`;
}
