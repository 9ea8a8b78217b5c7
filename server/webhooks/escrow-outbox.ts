import type { PaymentRefundedEvent, PaymentVoidedEvent } from 'agentgate-x402-wire';
import type { AuthCaptureOperationDoc } from '../payments/schemes/auth-capture/evm/operations.js';
import type { PaymentDoc } from '../payments/models.js';

// `payment.refunded` and `payment.voided`: an auth-capture payment's refund or void, once the chain did it,
// writes an outbox entry on its operation (payments/schemes/auth-capture/escrow-ops.ts) and calls this; an
// exact payment's refund from the seller's wallet (payments/schemes/exact/refunds.ts) does the same;
// the delivery is made like payment.received's (unique per event id, the endpoint's signing secret, the
// same retries), and the escrow sweep calls this again for whatever a crash interrupted.

/** What this needs of the webhooks area and of the escrow operations. */
export interface AuthCaptureEventSinks {
  enqueue(input: { eventId: string; event: string; orgId: string; endpointId: string; body: string }): Promise<void>;
  markWebhook(opId: string, webhook: NonNullable<AuthCaptureOperationDoc['webhook']>): Promise<void>;
}

/** A refund or void, as either kind of refund records it. */
export interface PaymentOperationEvent {
  event: 'payment.refunded' | 'payment.voided';
  eventId: string;
  payment: PaymentDoc;
  op: Pick<AuthCaptureOperationDoc, '_id' | 'amountRaw' | 'reason' | 'txHash' | 'receipt' | 'doneAt'>;
}

export function escrowEventDispatcher(sinks: AuthCaptureEventSinks): (event: PaymentOperationEvent) => Promise<void> {
  return async ({ event, eventId, payment, op }) => {
    if (!payment.endpointId) {
      await sinks.markWebhook(op._id, { status: 'skipped', eventId });
      return;
    }
    const createdAt = (op.doneAt ?? new Date()).toISOString();
    const body: PaymentRefundedEvent | PaymentVoidedEvent = event === 'payment.refunded'
      ? { event, paymentId: payment._id, refundId: op._id, createdAt, amountUsdcRaw: op.amountRaw, reason: op.reason ?? '', txHash: op.txHash ?? '', ...op.receipt! }
      : { event, paymentId: payment._id, createdAt, amountUsdcRaw: op.amountRaw, payerAddress: payment.payerAddress, txHash: op.txHash ?? '' };
    await sinks.enqueue({ eventId, event, orgId: payment.orgId, endpointId: payment.endpointId, body: JSON.stringify(body) });
    await sinks.markWebhook(op._id, { status: 'dispatched', eventId });
  };
}
