import type { Model } from 'mongoose';
import type { PaymentDoc } from './models.js';
import { filterQuery, type PaymentFilter } from './records.js';

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

interface AmountGroup { _id: { status?: string; amount: string; network?: string }; n: number }

/**
 * Totals computed by the database: one aggregation groups the matching payments by status and amount,
 * and the (few) groups are summed here. Amounts are stored as decimal strings of atomic units, and
 * FerretDB 1.x converts nothing ($toLong, $toDecimal, date operators: not implemented), so the sum of
 * count x amount is done in BigInt over the groups; there are as many groups as distinct prices, not
 * payments.
 */
export async function paymentTotals(payments: Model<PaymentDoc>, orgId: string, filter: PaymentFilter): Promise<PaymentTotals> {
  const groups = await payments.aggregate<AmountGroup>([
    { $match: { orgId, ...filterQuery(filter) } },
    { $group: { _id: { status: '$status', amount: '$amountUsdcRaw', network: '$network' }, n: { $sum: 1 } } },
  ]);
  const totals: PaymentTotals = { count: 0, settled: 0, failed: 0, volumeAtomic: 0n, byNetwork: [] };
  const networks = new Map<string, PaymentTotals['byNetwork'][number]>();
  for (const group of groups) {
    const name = group._id.network ?? '';
    const network = networks.get(name) ?? { network: name, count: 0, settled: 0, failed: 0, volumeAtomic: 0n };
    networks.set(name, network);
    for (const sum of [totals, network]) {
      sum.count += group.n;
      if (group._id.status === 'failed') sum.failed += group.n;
      if (group._id.status === 'settled') {
        sum.settled += group.n;
        sum.volumeAtomic += BigInt(group._id.amount) * BigInt(group.n);
      }
    }
  }
  totals.byNetwork = [...networks.values()].sort((a, b) => b.count - a.count || a.network.localeCompare(b.network));
  return totals;
}

/**
 * Settled volume per time bucket (the console's volume-per-day chart), from one read of the settled
 * payments in the buckets' span (their time and amount only), summed here. It was one grouped aggregation
 * per bucket, since FerretDB 1.x cannot group by a computed day: but FerretDB answers a time range by
 * reading every payment of the org, so a 30-day chart read a year of history 30 times (9.4 of a page's
 * 10.5 s at 5,000 payments). One read costs one such pass whatever the number of bars; on MongoDB it
 * reads, through the {orgId, createdAt} index, the payments the per-bucket aggregations read.
 */
export async function settledVolume(payments: Model<PaymentDoc>, orgId: string, filter: PaymentFilter, buckets: Array<{ from: Date; until: Date }>): Promise<VolumeBucket[]> {
  const out: VolumeBucket[] = buckets.map((b) => ({ ...b, count: 0, volumeAtomic: 0n }));
  if (out.length === 0 || (filter.status && filter.status !== 'settled')) return out;
  // The buckets' span within the filter's own range: both bounds hold.
  const first = buckets[0]!.from;
  const last = buckets.at(-1)!.until;
  const from = filter.from && filter.from > first ? filter.from : first;
  const until = filter.until && filter.until < last ? filter.until : last;
  if (from >= until) return out;
  const settled = payments.find({ orgId, ...filterQuery({ ...filter, status: 'settled', from, until }) }, { _id: 0, createdAt: 1, amountUsdcRaw: 1 })
    .lean().cursor({ batchSize: 5_000 }) as AsyncIterable<Pick<PaymentDoc, 'createdAt' | 'amountUsdcRaw'>>;
  for await (const payment of settled) {
    const bucket = out[bucketOf(buckets, payment.createdAt.getTime())];
    if (!bucket || payment.createdAt >= bucket.until) continue;
    bucket.count++;
    bucket.volumeAtomic += BigInt(payment.amountUsdcRaw);
  }
  return out;
}

/** The last bucket starting at or before `at` (buckets in time order), by bisection; -1 if none does. */
function bucketOf(buckets: Array<{ from: Date }>, at: number): number {
  let low = 0;
  let high = buckets.length - 1;
  if (at < buckets[0]!.from.getTime()) return -1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (buckets[mid]!.from.getTime() <= at) low = mid; else high = mid - 1;
  }
  return low;
}
