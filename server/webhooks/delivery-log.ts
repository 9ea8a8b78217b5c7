import type { Model } from 'mongoose';
import { notFound } from '../platform/errors.js';
import { afterCursor, pageOf, type Cursor } from '../platform/pagination.js';
import { findByIds } from '../platform/find-by-ids.js';
import type { DeliveryDoc, DeliveryStatus } from './models.js';
import { deliveryStateQuery, type DeliveryState } from './state.js';

// What a seller (the API, the console) and an identity (its mail webhooks) read of the deliveries: the
// delivery log, filtered and paged, and one delivery with its attempts. Read-only.

/** What the delivery log and the console narrow a list by; every field optional. */
export interface DeliveryFilter {
  endpointId?: string;
  status?: DeliveryStatus;
  /** The console's four states (state.ts); wins over status when both are given. */
  state?: DeliveryState;
  paymentId?: string;
  /** createdAt >= from */
  from?: Date;
  /** createdAt < until */
  until?: Date;
}

function deliveryQuery(orgId: string, filter: DeliveryFilter): Record<string, unknown> {
  return {
    orgId,
    // The seller's delivery log: payment.received only; identities' mail webhooks have their own log.
    identityId: { $exists: false },
    ...(filter.endpointId ? { endpointId: filter.endpointId } : {}),
    ...(filter.status ? { status: filter.status } : {}),
    ...(filter.state ? deliveryStateQuery(filter.state) : {}),
    ...(filter.paymentId ? { paymentId: filter.paymentId } : {}),
    ...(filter.from || filter.until ? { createdAt: { ...(filter.from ? { $gte: filter.from } : {}), ...(filter.until ? { $lt: filter.until } : {}) } } : {}),
  };
}

export class DeliveryLog {
  constructor(private readonly deliveries: Model<DeliveryDoc>) {}

  async list(orgId: string, filter: DeliveryFilter, limit: number, cursor?: Cursor) {
    const rows = await this.deliveries.find({ ...deliveryQuery(orgId, filter), ...afterCursor('createdAt', cursor) }).sort({ createdAt: -1, _id: -1 }).limit(limit + 1).lean();
    return pageOf(rows, limit, (row) => ({ at: row.createdAt, id: row._id }));
  }

  /** One numbered page (the console's "26–50 of N"), without the bodies; newest first. */
  async listPage(orgId: string, filter: DeliveryFilter, offset: number, limit: number): Promise<Array<Omit<DeliveryDoc, 'body'>>> {
    return this.deliveries.find(deliveryQuery(orgId, filter), { body: 0 }).sort({ createdAt: -1, _id: -1 }).skip(offset).limit(limit).lean();
  }

  /** Counted in the database. */
  async count(orgId: string, filter: DeliveryFilter): Promise<number> {
    return this.deliveries.countDocuments(deliveryQuery(orgId, filter));
  }

  /** Status fields of the org's deliveries with these ids (a payments page's webhook column): no bodies or attempts. */
  async summaries(orgId: string, ids: string[]): Promise<Map<string, Pick<DeliveryDoc, '_id' | 'status' | 'lastError' | 'attemptCount' | 'nextAttemptAt'>>> {
    const rows = await findByIds(ids, (id) => this.deliveries.findOne({ _id: id, orgId }, { status: 1, lastError: 1, attemptCount: 1, nextAttemptAt: 1 }).lean());
    return new Map(rows.map((row) => [row._id, row]));
  }

  /** One of the seller's deliveries (an identity's mail webhook deliveries are not the seller's). */
  async get(orgId: string, id: string): Promise<DeliveryDoc> {
    const doc = await this.deliveries.findOne({ _id: id, orgId }).lean();
    if (!doc || doc.identityId) throw notFound('Webhook delivery not found');
    return doc;
  }

  /** The delivery log of one endpoint (an identity's mail webhook), newest first. */
  async listForEndpoint(endpointId: string, limit: number): Promise<DeliveryDoc[]> {
    return this.deliveries.find({ endpointId }).sort({ createdAt: -1, _id: -1 }).limit(limit).lean();
  }
}
