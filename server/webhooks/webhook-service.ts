import type { Connection, Model } from 'mongoose';
import type { Config } from '../platform/config.js';
import type { JobQueue } from '../platform/jobs.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { ServiceEvents } from '../platform/events.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { Cursor } from '../platform/pagination.js';
import { deliverySchema, type DeliveryDoc } from './models.js';
import { DeliveryJobs, type AttemptClaims, type DeliveryInput, type DeliveryQueue, type DeliveryTargets } from './delivery-job.js';
import { DeliveryLog, type DeliveryFilter } from './delivery-log.js';
import { HistoryBuckets } from '../platform/history-buckets.js';
import { ManualRetry } from './manual-retry.js';
import { startRounds } from '../platform/rounds.js';
import type { ProcessRegistry } from '../platform/process-registry.js';

export { DELIVER_JOB, RETRY_SCHEDULE_UNITS } from './delivery-job.js';
export type { DeliveryInput, DeliveryQueue, DeliveryTarget, DeliveryTargets } from './delivery-job.js';
export type { DeliveryFilter } from './delivery-log.js';

/**
 * An area's outbox: the events it recorded and did not hand over yet (its process died between the two,
 * or the database was away), handed over again, oldest first. Entries younger than `olderThanMs` are
 * still being handed over by the process that recorded them.
 */
export interface Outbox {
  sweep(olderThanMs: number, shouldStop: () => boolean): Promise<number>;
}

/** What the engine asks of the areas: where an endpoint's deliveries go, and their outboxes to sweep. */
export interface WebhookSources {
  targets: DeliveryTargets;
  outboxes: () => readonly Outbox[];
}

/**
 * Webhook deliveries, a generic engine: it knows no area. An area's outbox (a settled payment, a refund,
 * a channel claim, a mail event) hands it one delivery per event and endpoint (`enqueue`); each attempt
 * is one run of the delivery job (delivery-job.ts), sent where the endpoint's area says (`targets`); the
 * delivery log is read through delivery-log.ts and retried by hand through manual-retry.ts; the sweep
 * below drains the areas' outboxes and resumes deliveries whose job a crash lost.
 */
export class WebhookService implements DeliveryQueue {
  readonly deliveries: Model<DeliveryDoc>;
  readonly retryDelaysMs: number[];
  private readonly jobs: DeliveryJobs;
  private readonly log: DeliveryLog;
  private readonly retries: ManualRetry;

  constructor(
    conn: Connection,
    private readonly config: Config,
    jobs: JobQueue,
    private readonly sources: WebhookSources,
    logs: ActivityLog,
    processes: ProcessRegistry,
    /**
     * One line and one counted outcome per attempt (the operator's view; the seller's is the delivery
     * log), and one readable line per attempt for `agentgate dev`'s terminal (events).
     */
    private readonly observe: { log: Logger; metrics: Metrics; events?: ServiceEvents },
  ) {
    this.deliveries = conn.models.WebhookDelivery ?? conn.model<DeliveryDoc>('WebhookDelivery', deliverySchema, 'webhook_deliveries');
    const claims = conn.collection<{ _id: string; expiresAt: Date }>('webhook_attempt_claims') as unknown as AttemptClaims;
    const history = HistoryBuckets.for(conn);
    this.jobs = new DeliveryJobs(this.deliveries, history, claims, config, jobs, sources.targets, logs, processes, observe);
    this.retryDelaysMs = this.jobs.retryDelaysMs;
    this.log = new DeliveryLog(this.deliveries, history, conn);
    this.retries = new ManualRetry(this.deliveries, claims, this.log, this.jobs, logs, observe.log);
  }

  /** A delivery of one event to one endpoint, and its first attempt; idempotent per `eventId`. Returns its id. */
  enqueue(input: DeliveryInput, queued?: ReadonlySet<string>): Promise<string> {
    return this.jobs.enqueue(input, queued);
  }

  queuedDeliveries(): Promise<Set<string>> {
    return this.jobs.queuedDeliveries();
  }

  /** One pass over every area's outbox: what each left undispatched, handed over. */
  async sweepOutboxes(olderThanMs: number, shouldStop: () => boolean = () => false): Promise<number> {
    const counts = await Promise.all(this.sources.outboxes().map((outbox) => outbox.sweep(olderThanMs, shouldStop)));
    return counts.reduce((a, b) => a + b, 0);
  }

  /** Re-enqueues deliveries whose next attempt is overdue while no job for them exists. */
  resumeStalled(shouldStop?: () => boolean): Promise<number> {
    return this.jobs.resumeStalled(shouldStop);
  }

  /** How long the oldest due delivery has waited for its attempt, in ms (0: none waits). */
  oldestDueMs(): Promise<number> {
    return this.jobs.oldestDueMs();
  }

  /**
   * Sweeps at once and then every WEBHOOK_OUTBOX_SWEEP_MS, one round at a time (a round still running when
   * the next is due is not stacked with it: after a database outage every process finds a backlog, and
   * rounds piling up on each other were what kept the database busy); returns the stop function, which
   * ends the round under way after the item in hand. The first round runs in the background: a process
   * that starts while the deployment is busy (a rolling restart under load) must not wait for it to serve.
   */
  startOutboxSweep(): () => Promise<void> {
    let stopped = false;
    const shouldStop = () => stopped;
    let first = true;
    const stop = startRounds({
      everyMs: this.config.WEBHOOK_OUTBOX_SWEEP_MS,
      runNow: true,
      round: async () => {
        // Entries younger than this are still being dispatched by the process that recorded them (none at start).
        const olderThanMs = first ? 0 : 10_000;
        first = false;
        await Promise.all([this.sweepOutboxes(olderThanMs, shouldStop), this.resumeStalled(shouldStop)]);
      },
      onError: (err) => this.observe.log.error({ err }, 'webhook outbox sweep failed'),
    });
    return async () => {
      stopped = true;
      await stop();
    };
  }

  // --- the delivery log --------------------------------------------------------------------------

  list(orgId: string, filter: DeliveryFilter, limit: number, cursor?: Cursor) {
    return this.log.list(orgId, filter, limit, cursor);
  }

  listPage(orgId: string, filter: DeliveryFilter, offset: number, limit: number) {
    return this.log.listPage(orgId, filter, offset, limit);
  }

  /** Lists the orgs whose deliveries include some written without their hour (read the old way). */
  markUndated(): Promise<number> {
    return this.log.markUndated();
  }

  /** Each day's delivery counts (the day groups round writes closed days'). */
  get dayGroups() {
    return this.log.days;
  }

  countByState(orgId: string, filter: Omit<DeliveryFilter, 'state' | 'status'>) {
    return this.log.countByState(orgId, filter);
  }

  /** The webhook column of a run of payments (DeliveryLog.summaryReader). */
  summaryReader(orgId: string) {
    return this.log.summaryReader(orgId);
  }

  get(orgId: string, id: string) {
    return this.log.get(orgId, id);
  }

  listForEndpoint(endpointId: string, limit: number) {
    return this.log.listForEndpoint(endpointId, limit);
  }

  // --- retries by hand ---------------------------------------------------------------------------

  retryNow(orgId: string, id: string, seen?: { round: number; attemptCount: number }) {
    return this.retries.retryNow(orgId, id, seen);
  }

  retry(orgId: string, id: string) {
    return this.retries.retry(orgId, id);
  }
}
