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
 * Settled volume per time bucket (the console's volume-per-day chart): one grouped aggregation per bucket,
 * since FerretDB 1.x cannot group by a computed day. Callers keep the bucket count small (the console
 * draws at most 62 bars); a few run at a time so a long range does not flood the database.
 */
export async function settledVolume(payments: Model<PaymentDoc>, orgId: string, filter: PaymentFilter, buckets: Array<{ from: Date; until: Date }>): Promise<VolumeBucket[]> {
  if (filter.status && filter.status !== 'settled') return buckets.map((b) => ({ ...b, count: 0, volumeAtomic: 0n }));
  const one = async (bucket: { from: Date; until: Date }): Promise<VolumeBucket> => {
    // The bucket within the filter's own range: both bounds hold.
    const from = filter.from && filter.from > bucket.from ? filter.from : bucket.from;
    const until = filter.until && filter.until < bucket.until ? filter.until : bucket.until;
    if (from >= until) return { ...bucket, count: 0, volumeAtomic: 0n };
    const groups = await payments.aggregate<AmountGroup>([
      { $match: { orgId, ...filterQuery({ ...filter, status: 'settled', from, until }) } },
      { $group: { _id: { amount: '$amountUsdcRaw' }, n: { $sum: 1 } } },
    ]);
    return {
      ...bucket,
      count: groups.reduce((sum, g) => sum + g.n, 0),
      volumeAtomic: groups.reduce((sum, g) => sum + BigInt(g._id.amount) * BigInt(g.n), 0n),
    };
  };
  const out: VolumeBucket[] = [];
  const PARALLEL = 6;
  for (let i = 0; i < buckets.length; i += PARALLEL) out.push(...await Promise.all(buckets.slice(i, i + PARALLEL).map(one)));
  return out;
}
