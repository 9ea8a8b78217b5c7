import type { Connection } from 'mongoose';
import type { PaymentReceivedEvent } from 'agentgate-x402-wire';
import type { Logger } from '../platform/logger.js';
import { runOnce } from '../platform/once.js';
import type { DeliveryQueue, Outbox } from '../webhooks/webhook-service.js';
import type { PaymentDoc } from './models.js';
import type { PaymentRecords } from './records.js';
import type { Endpoints } from './endpoints.js';

// `payment.received`: settlement writes an outbox entry on the payment in the same update that settles it
// (records.ts); this hands the event to the webhook engine (one delivery per event id) right after the
// settlement, and again from the sweep for whatever a crash or a database outage interrupted.

const EVENT = 'payment.received' as const;
/** Outbox entries dispatched per sweep round, oldest first. */
const SWEEP_BATCH = 100;

/** The outbox entry markSettled writes onto the payment in the same update that settles it. */
export type PaymentOutbox = NonNullable<PaymentDoc['webhook']>;

export class PaymentReceivedOutbox implements Outbox {
  private upgraded = false;

  constructor(
    private readonly conn: Connection,
    private readonly deliveries: DeliveryQueue,
    private readonly records: PaymentRecords,
    private readonly endpoints: Endpoints,
    private readonly log: Logger,
  ) {}

  /** A settled payment's event handed over; a failure is logged, never the redeem's (money moved): the sweep retries. */
  async settled(payment: PaymentDoc): Promise<void> {
    await this.dispatch(payment).catch((err) => this.log.warn({ err, paymentId: payment._id }, 'webhook dispatch deferred to the outbox sweep'));
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
    const deliveryId = await this.deliveries.enqueue({ eventId: outbox.eventId, event: EVENT, orgId: payment.orgId, endpointId: endpoint._id, paymentId: payment._id, body: JSON.stringify(event) }, queued);
    await this.markOutbox(payment._id, { ...outbox, status: 'dispatched', deliveryId });
  }

  private async markOutbox(paymentId: string, outbox: PaymentOutbox): Promise<void> {
    await this.records.payments.updateOne({ _id: paymentId, 'webhook.eventId': outbox.eventId }, { $set: { webhook: outbox }, $unset: { webhookUndispatched: 1 } });
  }

  /**
   * Dispatches outbox entries left pending (a crash between settling and enqueueing, a database outage),
   * oldest first, found by their own small index (webhookUndispatched), not by reading every payment.
   */
  async sweep(olderThanMs: number, shouldStop: () => boolean = () => false): Promise<number> {
    await this.upgrade();
    const stale = await this.records.payments.find({ webhookUndispatched: true, settledAt: { $lt: new Date(Date.now() - olderThanMs) } })
      .sort({ settledAt: 1 }).limit(SWEEP_BATCH).lean() as PaymentDoc[];
    if (stale.length === 0) return 0;
    const queued = await this.deliveries.queuedDeliveries();
    let done = 0;
    for (const payment of stale) {
      if (shouldStop()) break;
      await this.dispatch(payment, queued);
      done++;
    }
    return done;
  }

  /** Payments settled before the outbox had its own index (webhookUndispatched) join it, once per database. */
  private async upgrade(): Promise<void> {
    if (this.upgraded) return;
    await runOnce(this.conn, 'payments.webhookUndispatched', async () => {
      await this.records.payments.updateMany({ 'webhook.status': 'pending', webhookUndispatched: { $exists: false } } as never, { $set: { webhookUndispatched: true } });
    });
    this.upgraded = true;
  }
}
