import type { Model } from 'mongoose';
import type { Logger } from '../platform/logger.js';
import { isDuplicateKey } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import type { PaymentDoc } from '../payments/models.js';
import type { PaymentRecords } from '../payments/records.js';
import type { Endpoints } from '../payments/endpoints.js';
import type { PaymentReceivedEvent } from 'agentgate-x402-wire';
import type { DeliveryDoc } from './models.js';
import type { DeliveryJobs } from './delivery-job.js';

// `payment.received`: settlement writes an outbox entry on the payment in the same update that settles it
// (payments/records.ts); this turns the entry into a delivery record (unique per event) and its first
// attempt's job, right after the settlement and again from the sweep for whatever a crash interrupted.

const EVENT = 'payment.received' as const;
/** Outbox entries dispatched per sweep round, oldest first. */
const SWEEP_BATCH = 100;

/** The outbox entry markSettled writes onto the payment in the same update that settles it. */
export type PaymentOutbox = NonNullable<PaymentDoc['webhook']>;

export class PaymentReceivedOutbox {
  constructor(
    private readonly deliveries: Model<DeliveryDoc>,
    private readonly deliveryJobs: DeliveryJobs,
    private readonly records: PaymentRecords,
    private readonly endpoints: Endpoints,
    log: Logger,
  ) {
    // Never let a webhook problem fail the redeem that already moved money: the sweep retries the dispatch.
    records.onSettled.push(async (payment) => {
      await this.dispatch(payment).catch((err) => log.warn({ err, paymentId: payment._id }, 'webhook dispatch deferred to the outbox sweep'));
    });
  }

  /**
   * Idempotent: safe to call again for the same payment (the sweep does after a crash). `queued`: the
   * deliveries whose job is queued or running, when the caller has read them (a sweep, once per round).
   */
  async dispatch(payment: PaymentDoc, queued?: ReadonlySet<string>): Promise<void> {
    const outbox = payment.webhook;
    if (!outbox || outbox.status !== 'pending' || !payment.signedReceipt || !payment.settledAt) return;
    // Served from the seller caches (invalidated everywhere when the endpoint changes): a settled batch
    // dispatches many payments of one endpoint at once.
    const endpoint = payment.endpointId ? await this.endpoints.byId(payment.orgId, payment.endpointId) : null;
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
      && (created || !(queued ? queued.has(delivery._id) : await this.deliveryJobs.has(delivery._id)))) {
      await this.deliveryJobs.now({ deliveryId: delivery._id, round: 0, roundBase: 0, made: 0 });
    }
    await this.markOutbox(payment._id, { ...outbox, status: 'dispatched', deliveryId: delivery._id });
  }

  private async markOutbox(paymentId: string, outbox: PaymentOutbox): Promise<void> {
    await this.records.payments.updateOne({ _id: paymentId, 'webhook.eventId': outbox.eventId }, { $set: { webhook: outbox }, $unset: { webhookUndispatched: 1 } });
  }

  /**
   * Dispatches outbox entries left pending (a crash between settling and enqueueing, a database outage),
   * oldest first, found by their own small index (webhookUndispatched), not by reading every payment.
   */
  async sweep(olderThanMs: number, shouldStop: () => boolean = () => false): Promise<number> {
    const stale = await this.records.payments.find({ webhookUndispatched: true, settledAt: { $lt: new Date(Date.now() - olderThanMs) } })
      .sort({ settledAt: 1 }).limit(SWEEP_BATCH).lean() as PaymentDoc[];
    if (stale.length === 0) return 0;
    const queued = await this.deliveryJobs.queuedDeliveries();
    let done = 0;
    for (const payment of stale) {
      if (shouldStop()) break;
      await this.dispatch(payment, queued);
      done++;
    }
    return done;
  }
}
