import type { Connection, Model } from 'mongoose';
import { notFound } from '../platform/errors.js';
import { afterCursor, pageOf, type Cursor } from '../platform/pagination.js';
import { findByIds } from '../platform/find-by-ids.js';
import { dayOf, dayRangeOf, DayGroups, hourOf, isWholeDays, pageFrom, scopeOf, type HistoryBuckets } from '../platform/history-buckets.js';
import type { DeliveryDoc, DeliveryStatus } from './models.js';
import { DELIVERY_STATES, deliveryState, deliveryStateQuery, type DeliveryState } from './state.js';

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

/** An org's deliveries in the history buckets (platform/history-buckets.ts): its sellers' and its identities'. */
export const DELIVERIES_KIND = 'deliveries';
export const deliveriesScope = (orgId: string) => scopeOf(DELIVERIES_KIND, orgId);

/** A record with a webhook delivery (a payment): its delivery's id, and when it was settled and made. */
export interface DeliveredRecord { webhook?: { deliveryId?: string | null } | null; settledAt?: Date | null; createdAt: Date }

/** What a payments page shows of a payment's webhook delivery. */
export type DeliverySummary = Pick<DeliveryDoc, '_id' | 'status' | 'lastError' | 'attemptCount' | 'nextAttemptAt'>;

/** A day's deliveries of one state to one endpoint, counted (the console's tabs). */
export interface StateGroup { state: DeliveryState; endpointId: string; n: number }

/**
 * Lists read the old way, in one query sorted by time: one payment's deliveries, and the states a
 * delivery leaves (pending, failing, failed), which a few of a year's deliveries are in. The rest is
 * read hour by hour (history-buckets.ts).
 */
const readsOldWay = (filter: DeliveryFilter) => Boolean(filter.paymentId || (filter.state && filter.state !== 'delivered') || (filter.status && filter.status !== 'delivered'));

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
  /** Each closed day's count per state and endpoint, written once the day has no pending delivery. */
  readonly days: DayGroups<StateGroup>;

  constructor(
    private readonly deliveries: Model<DeliveryDoc>,
    /** The hours and days each org's deliveries are filed under (the enqueue notes them). */
    private readonly history: HistoryBuckets,
    conn: Connection,
  ) {
    this.days = new DayGroups<StateGroup>(conn, history, DELIVERIES_KIND, {
      hour: async (orgId, hour) => {
        const rows = await this.deliveries.find({ orgId, hour, identityId: { $exists: false } }, { status: 1, lastError: 1, endpointId: 1 }).lean();
        return rows.map((row) => ({ state: deliveryState(row), endpointId: row.endpointId, n: 1 }));
      },
      key: (g) => `${g.state}|${g.endpointId}`,
      final: (g) => g.state === 'delivered' || g.state === 'failed',
    });
  }

  /**
   * The seller's deliveries the filter matches, newest first, strictly after `before` (records without
   * bodies when `withoutBody`): hour by hour, then the undated ones; some filters the old way (readsOldWay).
   */
  private newestFirst(orgId: string, filter: DeliveryFilter, before?: Cursor, withoutBody = false): AsyncIterable<DeliveryDoc> {
    const query = deliveryQuery(orgId, filter);
    const projection = withoutBody ? { body: 0 } : {};
    const sorted = (extra: Record<string, unknown>) => this.deliveries.find({ ...query, ...extra, ...afterCursor('createdAt', before) }, projection)
      .sort({ createdAt: -1, _id: -1 }).lean().cursor({ batchSize: 200 }) as AsyncIterable<DeliveryDoc>;
    if (readsOldWay(filter)) return sorted({});
    return this.history.newestFirst(deliveriesScope(orgId), {
      hour: (hour) => this.deliveries.find({ ...query, hour }, projection).lean() as unknown as Promise<DeliveryDoc[]>,
      undated: () => sorted({ hour: null }),
    }, { ...dayRangeOf(filter), ...(before ? { before } : {}) });
  }

  async list(orgId: string, filter: DeliveryFilter, limit: number, cursor?: Cursor) {
    const rows = await pageFrom(this.newestFirst(orgId, filter, cursor), 0, limit + 1);
    return pageOf(rows, limit, (row) => ({ at: row.createdAt, id: row._id }));
  }

  /** One numbered page (the console's "26–50 of N"), without the bodies; newest first. */
  async listPage(orgId: string, filter: DeliveryFilter, offset: number, limit: number): Promise<Array<Omit<DeliveryDoc, 'body'>>> {
    return pageFrom(this.newestFirst(orgId, filter, undefined, true), offset, limit);
  }

  /**
   * How many of the seller's deliveries the filter (its state aside) matches in each state: by day
   * (DayGroups: a day's counts are written once it is closed and none of its deliveries is pending),
   * the undated ones and one payment's the old way.
   */
  async countByState(orgId: string, filter: Omit<DeliveryFilter, 'state' | 'status'>, now = new Date()): Promise<Record<DeliveryState, number>> {
    const counts = Object.fromEntries(DELIVERY_STATES.map((state) => [state, 0])) as Record<DeliveryState, number>;
    const countOldWay = async (extra: Record<string, unknown>) => {
      await Promise.all(DELIVERY_STATES.map(async (state) => {
        counts[state] += await this.deliveries.countDocuments({ ...deliveryQuery(orgId, { ...filter, state }), ...extra });
      }));
    };
    if (filter.paymentId || !isWholeDays(filter)) {
      await countOldWay({});
      return counts;
    }
    const byDay = await this.days.byDay(orgId, dayRangeOf(filter), now);
    for (const groups of byDay.days.values()) {
      for (const g of groups) if (!filter.endpointId || g.endpointId === filter.endpointId) counts[g.state] += g.n;
    }
    if (byDay.undated) await countOldWay({ hour: null });
    return counts;
  }

  /** Lists the orgs whose deliveries include some written without their hour (HistoryBuckets.scanUndated). */
  markUndated(): Promise<number> {
    return this.history.scanUndated('deliveries', this.deliveries, deliveriesScope);
  }

  /** A delivery of this day changed state by hand (a retry): its day's written counts no longer hold. */
  async changedByHand(delivery: Pick<DeliveryDoc, 'orgId' | 'createdAt'>): Promise<void> {
    await this.days.forget(delivery.orgId, dayOf(delivery.createdAt));
  }

  /**
   * A reader of the webhook column of a run of payments (a console page, a CSV export): each payment's
   * delivery's status fields, no bodies or attempts. A delivery is created when its payment settles, so
   * the deliveries of the hours the payments settled in are read, one equality per hour (each hour once
   * per reader: an export walks its hours in order), and those not found there (an hour's edge, a
   * delivery made again later) by id. One lookup per payment was 200 commands per 200 rows of a CSV.
   */
  summaryReader(orgId: string): (records: DeliveredRecord[]) => Promise<Map<string, DeliverySummary>> {
    const byHour = new Map<string, Map<string, DeliverySummary>>();
    const projection = { status: 1, lastError: 1, attemptCount: 1, nextAttemptAt: 1 };
    return async (records) => {
      const wanted = records.flatMap((p) => (p.webhook?.deliveryId ? [{ id: p.webhook.deliveryId, hour: hourOf(p.settledAt ?? p.createdAt) }] : []));
      // An export walks its hours newest first: those of earlier batches are done with.
      if (byHour.size > 48) byHour.clear();
      const hours = [...new Set(wanted.map((w) => w.hour))].filter((hour) => !byHour.has(hour));
      await Promise.all(hours.map(async (hour) => {
        const rows = await this.deliveries.find({ orgId, hour }, projection).lean() as DeliverySummary[];
        byHour.set(hour, new Map(rows.map((row) => [row._id, row])));
      }));
      const out = new Map<string, DeliverySummary>();
      const missing: string[] = [];
      for (const { id, hour } of wanted) {
        const found = byHour.get(hour)?.get(id);
        if (found) out.set(id, found);
        else missing.push(id);
      }
      const rows = await findByIds(missing, (id) => this.deliveries.findOne({ _id: id, orgId }, projection).lean() as Promise<DeliverySummary | null>);
      for (const row of rows) out.set(row._id, row);
      return out;
    };
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
