import type { Model } from 'mongoose';
import type { PaymentRefundedEvent, PaymentVoidedEvent } from 'agentgate-x402-wire';
import type { Logger } from '../platform/logger.js';
import type { DeliveryQueue, Outbox } from '../webhooks/webhook-service.js';
import type { PaymentDoc, SignedReceipt } from './models.js';

// `payment.refunded` and `payment.voided`: a refund or a void, once the chain did it, writes an outbox
// entry on its own record (an auth-capture operation, schemes/auth-capture/evm/operations.ts; an exact
// refund from the seller's wallet, schemes/exact/evm/refunds.ts) and hands the event to the webhook engine
// here: one delivery per event id, to the payment's endpoint, signed with its secret, on the same retries
// as payment.received. The webhook engine's outbox sweep hands over again whatever a crash left pending
// (RefundWebhookOutbox, one per kind of record).

/** A refund or void, as either kind of refund records it. */
export interface PaymentOperationEvent {
  event: 'payment.refunded' | 'payment.voided';
  eventId: string;
  payment: PaymentDoc;
  op: {
    _id: string;
    amountRaw: string;
    reason?: string;
    txHash?: string;
    /** The refund's signed receipt (a void has none). */
    receipt?: SignedReceipt;
    doneAt?: Date;
  };
}

/** The outbox entry a refund's record keeps, once its event was handed over. */
export interface RefundWebhookEntry { status: 'dispatched' | 'skipped'; eventId: string; deliveryId?: string }

/** The outbox entry as a record keeps it: pending from when the refund is recorded until it is handed over. */
export type RefundWebhookState = { status: 'pending'; eventId: string } | RefundWebhookEntry;

/** A record that keeps a refund's or a void's outbox entry: an auth-capture operation, an exact refund. */
export interface RefundRecord extends Omit<PaymentOperationEvent['op'], 'doneAt'> {
  paymentId: string;
  doneAt?: Date;
  webhook?: RefundWebhookState;
}

/** What a kind of refund record gives its outbox. */
export interface RefundWebhookOutboxDeps<T extends RefundRecord> {
  /** The records, each with its outbox entry. */
  records: Model<T>;
  payments: { record(id: string): Promise<PaymentDoc | null> };
  deliveries: DeliveryQueue;
  log: Logger;
  /** The event a done record announces. */
  eventOf(record: T): PaymentOperationEvent['event'];
}

/**
 * The outbox of one kind of refund record: hands a recorded refund's (or void's) pending event to the
 * webhook engine and marks it on the record; the engine's outbox sweep hands over what a crash left pending.
 */
export class RefundWebhookOutbox<T extends RefundRecord> implements Outbox {
  constructor(private readonly deps: RefundWebhookOutboxDeps<T>) {}

  /** Hands over the record's event if it is still pending; a failure is logged and left to the sweep. */
  async notify(record: T, payment: PaymentDoc): Promise<void> {
    if (record.webhook?.status !== 'pending') return;
    try {
      const entry = await deliverRefundEvent(this.deps.deliveries, { event: this.deps.eventOf(record), eventId: record.webhook.eventId, payment, op: record });
      await this.deps.records.updateOne({ _id: record._id } as never, { $set: { webhook: entry } } as never);
    } catch (err) {
      this.deps.log.warn({ err: (err as Error).message, recordId: record._id }, 'refund webhook dispatch deferred to the outbox sweep');
    }
  }

  /** Records done more than `olderThanMs` ago whose event is still pending, handed over (younger ones are their recorder's). */
  async sweep(olderThanMs: number, shouldStop: () => boolean = () => false): Promise<number> {
    const pending = await this.deps.records.find({ 'webhook.status': 'pending', doneAt: { $lt: new Date(Date.now() - olderThanMs) } } as never).limit(50).lean() as T[];
    let handed = 0;
    for (const record of pending) {
      if (shouldStop()) break;
      const payment = await this.deps.payments.record(record.paymentId);
      if (!payment) continue;
      await this.notify(record, payment);
      handed++;
    }
    return handed;
  }
}

/** Hands the event to the webhook engine (idempotent per event id); the entry to mark on the record. */
export async function deliverRefundEvent(deliveries: DeliveryQueue, { event, eventId, payment, op }: PaymentOperationEvent): Promise<RefundWebhookEntry> {
  if (!payment.endpointId) return { status: 'skipped', eventId };
  const createdAt = (op.doneAt ?? new Date()).toISOString();
  const body: PaymentRefundedEvent | PaymentVoidedEvent = event === 'payment.refunded'
    ? { event, paymentId: payment._id, refundId: op._id, createdAt, amountUsdcRaw: op.amountRaw, reason: op.reason ?? '', txHash: op.txHash ?? '', ...op.receipt! }
    : { event, paymentId: payment._id, createdAt, amountUsdcRaw: op.amountRaw, payerAddress: payment.payerAddress, txHash: op.txHash ?? '' };
  const deliveryId = await deliveries.enqueue({ eventId, event, orgId: payment.orgId, endpointId: payment.endpointId, paymentId: payment._id, body: JSON.stringify(body) });
  return { status: 'dispatched', eventId, deliveryId };
}
