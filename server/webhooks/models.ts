import { Schema } from 'mongoose';

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/** One POST to the receiver, kept for the seller's delivery log. */
export interface DeliveryAttempt {
  at: Date;
  url: string;
  /** The receiver's HTTP status, when it answered. */
  statusCode?: number;
  /** Why there was no usable answer (timeout, connection refused, blocked address, ...). */
  error?: string;
  durationMs: number;
}

/**
 * One event for one endpoint. The body is fixed when the event is created, so every retry sends the same
 * bytes under the same idempotency key (the event id); only the signature follows secret rotation.
 */
export interface DeliveryDoc {
  _id: string;
  /** Unique: creating the delivery for an event twice (outbox sweep racing the settle hook) is a no-op. */
  eventId: string;
  /** payment.received (to a seller endpoint), or a mail event (to an identity's webhook, `mwh_` endpoint id). */
  event: string;
  orgId: string;
  endpointId: string;
  /** Set on payment.received deliveries. */
  paymentId?: string;
  /** Set on mail event deliveries: whose webhook, and the message the event is about. */
  identityId?: string;
  subjectId?: string;
  body: string;
  status: DeliveryStatus;
  attempts: DeliveryAttempt[];
  attemptCount: number;
  /** Bumped by a manual retry; a job carries the round it belongs to, so a stale job cannot send. */
  round: number;
  /** Attempts made before the current round (set by a manual retry; absent means 0). */
  roundBase?: number;
  nextAttemptAt?: Date | null;
  lastError?: string | null;
  createdAt: Date;
  /** The UTC hour of createdAt, which the delivery log's pages find it by (platform/history-buckets.ts); absent on older ones. */
  hour?: string;
  updatedAt: Date;
  deliveredAt?: Date | null;
  failedAt?: Date | null;
}

const attemptSchema = new Schema<DeliveryAttempt>({
  at: { type: Date, required: true },
  url: { type: String, required: true },
  statusCode: Number,
  error: String,
  durationMs: { type: Number, required: true },
}, { _id: false, versionKey: false });

export const deliverySchema = new Schema<DeliveryDoc>({
  _id: String,
  eventId: { type: String, required: true, unique: true },
  event: { type: String, required: true },
  orgId: { type: String, required: true },
  endpointId: { type: String, required: true },
  paymentId: String,
  identityId: String,
  subjectId: String,
  body: { type: String, required: true },
  status: { type: String, required: true },
  attempts: { type: [attemptSchema], default: [] },
  attemptCount: { type: Number, default: 0 },
  round: { type: Number, default: 0 },
  roundBase: Number,
  nextAttemptAt: Date,
  lastError: String,
  createdAt: { type: Date, required: true },
  hour: String,
  updatedAt: { type: Date, required: true },
  deliveredAt: Date,
  failedAt: Date,
}, { versionKey: false });
deliverySchema.index({ orgId: 1, createdAt: -1, _id: -1 });
// An org's deliveries of one hour (the delivery log's pages and counts), and its undated ones (hour: null).
deliverySchema.index({ orgId: 1, hour: 1 });
deliverySchema.index({ orgId: 1, endpointId: 1, status: 1, createdAt: -1 });
deliverySchema.index({ endpointId: 1, createdAt: -1 });
// The pending deliveries that are due (/ready's and /metrics' oldest due delivery at every probe and scrape,
// the stalled-delivery sweep of every worker): without it MongoDB scans a year of delivered ones at each.
// (FerretDB answers the status equality from its GIN index on the document either way.)
deliverySchema.index({ status: 1, nextAttemptAt: 1 });
