import type { PaymentRefundedEvent, PaymentVoidedEvent } from 'agentgate-x402-wire';
import type { DeliveryQueue } from '../webhooks/webhook-service.js';
import type { PaymentDoc, SignedReceipt } from './models.js';

// `payment.refunded` and `payment.voided`: a refund or a void, once the chain did it, writes an outbox
// entry on its own record (an auth-capture operation, schemes/auth-capture/evm/operations.ts; an exact
// refund from the seller's wallet, schemes/exact/evm/refunds.ts) and hands the event to the webhook engine
// here: one delivery per event id, to the payment's endpoint, signed with its secret, on the same retries
// as payment.received. Each record's sweep hands over again whatever a crash left pending.

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
