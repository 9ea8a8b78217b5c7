import type { Connection, Model } from 'mongoose';
import type { Config } from '../platform/config.js';
import type { JobQueue } from '../platform/jobs.js';
import type { SecretBox } from '../platform/secret-box.js';
import type { ActivityLog } from '../logs/activity-log.js';
import type { ServiceEvents } from '../platform/events.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { Cursor } from '../platform/pagination.js';
import type { PaymentDoc } from '../payments/models.js';
import type { PaymentRecords } from '../payments/records.js';
import type { Endpoints } from '../payments/endpoints.js';
import { deliverySchema, type DeliveryDoc } from './models.js';
import { DeliveryJobs, type AttemptClaims, type TargetSource } from './delivery-job.js';
import { PaymentReceivedOutbox } from './payment-outbox.js';
import { DeliveryLog, type DeliveryFilter } from './delivery-log.js';
import { ManualRetry } from './manual-retry.js';
import { startRounds } from '../platform/rounds.js';
import { runOnce } from '../platform/once.js';
import type { ProcessRegistry } from '../platform/process-registry.js';

export { DELIVER_JOB, RETRY_SCHEDULE_UNITS } from './delivery-job.js';
export type { PaymentOutbox } from './payment-outbox.js';
export type { DeliveryFilter } from './delivery-log.js';

/**
 * Webhook deliveries, as the routes, the console and the other areas use them: one object over the rooms
 * that do the work. payment.received deliveries come from settled payments' outbox (payment-outbox.ts),
 * other events are enqueued by their areas (mail-webhooks.ts); each attempt is one run of the delivery
 * job (delivery-job.ts); the delivery log is read through delivery-log.ts and retried by hand through
 * manual-retry.ts; the sweep below finishes what a crash interrupted.
 */
export class WebhookService {
  readonly deliveries: Model<DeliveryDoc>;
  readonly retryDelaysMs: number[];
  private readonly jobs: DeliveryJobs;
  private readonly paymentOutbox: PaymentReceivedOutbox;
  private readonly log: DeliveryLog;
  private readonly retries: ManualRetry;
  private readonly paymentRecords: PaymentRecords;

  /**
   * Other outboxes the sweep drains (mail events not yet told to their webhooks): each is given the age
   * below which its entries are still being dispatched by the request that made them.
   */
  readonly outboxes: Array<(olderThanMs: number) => Promise<number>> = [];

  constructor(
    private readonly conn: Connection,
    private readonly config: Config,
    jobs: JobQueue,
    payments: { records: PaymentRecords; endpoints: Endpoints },
    secrets: SecretBox,
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
    this.jobs = new DeliveryJobs(this.deliveries, claims, config, jobs, payments.endpoints.endpoints, secrets, logs, processes, observe);
    this.retryDelaysMs = this.jobs.retryDelaysMs;
    this.paymentRecords = payments.records;
    this.paymentOutbox = new PaymentReceivedOutbox(this.deliveries, this.jobs, payments.records, payments.endpoints, observe.log);
    this.log = new DeliveryLog(this.deliveries);
    this.retries = new ManualRetry(this.deliveries, claims, this.log, this.jobs, logs, observe.log);
  }

  /** Adds a source of delivery targets: it answers for the endpoint ids it owns, undefined for others. */
  addTargets(source: TargetSource): void {
    this.jobs.addTargets(source);
  }

  /** A delivery of one event to one endpoint, and its first attempt; idempotent per `eventId`. */
  enqueue(input: Parameters<DeliveryJobs['enqueue']>[0]): Promise<void> {
    return this.jobs.enqueue(input);
  }

  /** A settled payment's payment.received outbox entry, dispatched; idempotent. */
  dispatch(payment: PaymentDoc): Promise<void> {
    return this.paymentOutbox.dispatch(payment);
  }

  /** Dispatches outbox entries left pending (a crash between settling and enqueueing). */
  sweepOutbox(olderThanMs: number, shouldStop?: () => boolean): Promise<number> {
    return this.paymentOutbox.sweep(olderThanMs, shouldStop);
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
    // Payments settled before the outbox had its own index (webhookUndispatched) join it, once per database.
    let upgraded = false;
    const upgrade = async () => {
      if (upgraded) return;
      await runOnce(this.conn, 'payments.webhookUndispatched', async () => {
        await this.paymentRecords.payments.updateMany({ 'webhook.status': 'pending', webhookUndispatched: { $exists: false } } as never, { $set: { webhookUndispatched: true } });
      });
      upgraded = true;
    };
    let stopped = false;
    const shouldStop = () => stopped;
    let first = true;
    const stop = startRounds({
      everyMs: this.config.WEBHOOK_OUTBOX_SWEEP_MS,
      runNow: true,
      round: async () => {
        await upgrade();
        // Entries younger than this are still being dispatched by the settling request itself (none at start).
        const olderThanMs = first ? 0 : 10_000;
        first = false;
        await Promise.all([this.sweepOutbox(olderThanMs, shouldStop), this.resumeStalled(shouldStop), ...this.outboxes.map((o) => o(olderThanMs))]);
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

  count(orgId: string, filter: DeliveryFilter) {
    return this.log.count(orgId, filter);
  }

  summaries(orgId: string, ids: string[]) {
    return this.log.summaries(orgId, ids);
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
