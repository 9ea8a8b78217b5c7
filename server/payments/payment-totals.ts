import type { Connection, Model } from 'mongoose';
import { DayGroups, dayRangeOf, isWholeDays, type HistoryBuckets } from '../platform/history-buckets.js';
import type { PaymentDoc } from './models.js';
import { filterQuery, isSearch, OPEN, PAYMENTS_KIND, type PaymentFilter } from './records.js';

/** What an operator reads above a filtered payment list. Volume counts settled payments only: money that moved. */
export interface PaymentTotals {
  count: number;
  settled: number;
  failed: number;
  volumeAtomic: bigint;
  /** The same per network (v1 name), the busiest first. */
  byNetwork: Array<{ network: string; count: number; settled: number; failed: number; volumeAtomic: bigint }>;
}

export interface VolumeBucket { from: Date; until: Date; count: number; volumeAtomic: bigint }

/** Payments of one status, amount, network and endpoint, counted. */
interface AmountGroup { status: string; amount: string; network: string; endpointId: string | null; n: number }

/** What the database groups payments by. */
const GROUP_BY = { _id: { status: '$status', amount: '$amountUsdcRaw', network: '$network', endpointId: '$endpointId' }, n: { $sum: 1 } };

/**
 * The totals and the volume chart above a seller's payments list, in time that grows with the days shown,
 * not with the payments stored.
 *
 * Each day's payments are counted by status, amount, network and endpoint (as many groups as distinct
 * prices), read live by the hour until the day is closed and none of its payments is open (`verified` or
 * `held`: the only states a payment leaves), then written once (platform/history-buckets.ts DayGroups).
 * A payment's later refund changes no group. Amounts are stored as decimal strings of atomic units, and
 * FerretDB 1.x converts nothing ($toLong, $toDecimal: not implemented), so sums are BigInt over the groups.
 *
 * A search (one payment, transaction or payer) and undated payments (written before payments carried
 * their hour) are counted the old way: one grouping over the seller's matching payments.
 */
export class PaymentDayTotals {
  readonly days: DayGroups<AmountGroup>;

  constructor(private readonly payments: Model<PaymentDoc>, conn: Connection, history: HistoryBuckets) {
    this.days = new DayGroups<AmountGroup>(conn, history, PAYMENTS_KIND, {
      hour: (orgId, hour) => this.grouped({ orgId, hour }),
      key: (g) => JSON.stringify([g.status, g.amount, g.network, g.endpointId]),
      final: (g) => !(OPEN as string[]).includes(g.status),
    });
  }

  /** The filter's totals, and the settled volume in each of `buckets` (time order, day-aligned). */
  async of(orgId: string, filter: PaymentFilter, buckets: Array<{ from: Date; until: Date }>, now = new Date()): Promise<{ totals: PaymentTotals; volume: VolumeBucket[] }> {
    const volume: VolumeBucket[] = buckets.map((b) => ({ ...b, count: 0, volumeAtomic: 0n }));
    // A time range that is not whole days (the console's are) cannot be read from days' groups.
    if (isSearch(filter) || !isWholeDays(filter)) {
      const groups = await this.grouped({ orgId, ...filterQuery(filter) });
      await this.addSettledOldWay(orgId, filter, volume, {});
      return { totals: totalsOf(groups), volume };
    }
    const matches = (g: AmountGroup) => (!filter.status || g.status === filter.status) && (!filter.network || g.network === filter.network) && (!filter.endpointId || g.endpointId === filter.endpointId);
    const byDay = await this.days.byDay(orgId, dayRangeOf(filter), now);
    const all: AmountGroup[] = [];
    for (const [day, groups] of byDay.days) {
      const shown = groups.filter(matches);
      all.push(...shown);
      const at = Date.parse(`${day}T00:00:00.000Z`);
      const bucket = volume.find((b) => b.from.getTime() <= at && at < b.until.getTime());
      if (!bucket) continue;
      for (const g of shown) {
        if (g.status !== 'settled') continue;
        bucket.count += g.n;
        bucket.volumeAtomic += BigInt(g.amount) * BigInt(g.n);
      }
    }
    if (byDay.undated) {
      all.push(...await this.grouped({ orgId, hour: null, ...filterQuery(filter) }));
      await this.addSettledOldWay(orgId, filter, volume, { hour: null });
    }
    return { totals: totalsOf(all), volume };
  }

  /** One grouping of the payments a query matches. */
  private async grouped(match: Record<string, unknown>): Promise<AmountGroup[]> {
    const rows = await this.payments.aggregate<{ _id: Omit<AmountGroup, 'n'>; n: number }>([{ $match: match }, { $group: GROUP_BY }]);
    return rows.map((r) => ({ status: r._id.status, amount: r._id.amount, network: r._id.network ?? '', endpointId: r._id.endpointId ?? null, n: r.n }));
  }

  /**
   * Settled volume the old way, into the buckets: one read of the settled payments in the buckets' span
   * (their time and amount only), summed here (a search, or undated payments).
   */
  private async addSettledOldWay(orgId: string, filter: PaymentFilter, out: VolumeBucket[], extra: Record<string, unknown>): Promise<void> {
    if (out.length === 0 || (filter.status && filter.status !== 'settled')) return;
    const first = out[0]!.from;
    const last = out.at(-1)!.until;
    const from = filter.from && filter.from > first ? filter.from : first;
    const until = filter.until && filter.until < last ? filter.until : last;
    if (from >= until) return;
    const settled = this.payments.find({ orgId, ...filterQuery({ ...filter, status: 'settled', from, until }), ...extra }, { _id: 0, createdAt: 1, amountUsdcRaw: 1 })
      .lean().cursor({ batchSize: 5_000 }) as AsyncIterable<Pick<PaymentDoc, 'createdAt' | 'amountUsdcRaw'>>;
    for await (const payment of settled) {
      const bucket = out.find((b) => b.from <= payment.createdAt && payment.createdAt < b.until);
      if (!bucket) continue;
      bucket.count++;
      bucket.volumeAtomic += BigInt(payment.amountUsdcRaw);
    }
  }
}

function totalsOf(groups: AmountGroup[]): PaymentTotals {
  const totals: PaymentTotals = { count: 0, settled: 0, failed: 0, volumeAtomic: 0n, byNetwork: [] };
  const networks = new Map<string, PaymentTotals['byNetwork'][number]>();
  for (const group of groups) {
    const network = networks.get(group.network) ?? { network: group.network, count: 0, settled: 0, failed: 0, volumeAtomic: 0n };
    networks.set(group.network, network);
    for (const sum of [totals, network]) {
      sum.count += group.n;
      if (group.status === 'failed') sum.failed += group.n;
      if (group.status === 'settled') {
        sum.settled += group.n;
        sum.volumeAtomic += BigInt(group.amount) * BigInt(group.n);
      }
    }
  }
  totals.byNetwork = [...networks.values()].sort((a, b) => b.count - a.count || a.network.localeCompare(b.network));
  return totals;
}
