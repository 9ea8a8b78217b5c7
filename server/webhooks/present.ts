import type { DeliveryDoc } from './models.js';

export function presentDelivery(d: DeliveryDoc) {
  return {
    id: d._id,
    event: d.event,
    eventId: d.eventId,
    endpointId: d.endpointId,
    ...(d.paymentId ? { paymentId: d.paymentId } : {}),
    ...(d.subjectId ? { messageId: d.subjectId } : {}),
    status: d.status,
    attemptCount: d.attemptCount,
    attempts: d.attempts.map((a) => ({
      at: a.at.toISOString(),
      url: a.url,
      statusCode: a.statusCode ?? null,
      error: a.error ?? null,
      durationMs: a.durationMs,
    })),
    nextAttemptAt: d.status === 'pending' ? d.nextAttemptAt?.toISOString() ?? null : null,
    lastError: d.lastError ?? null,
    createdAt: d.createdAt.toISOString(),
    updatedAt: d.updatedAt.toISOString(),
    deliveredAt: d.deliveredAt?.toISOString() ?? null,
    failedAt: d.failedAt?.toISOString() ?? null,
  };
}
