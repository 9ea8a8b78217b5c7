import type { Model } from 'mongoose';
import { networkByChainId } from 'agentgate-x402-wire';
import type { SettledPaymentDoc } from '../payments/settled-payments.js';
import type { ChannelActionDoc } from '../payments/schemes/batch-settlement/evm/settle.js';
import { monthRange, type Month } from './months.js';

export interface SettlementCount { scheme: string; network: string; count: number }

/**
 * Settlements of an org in a month, by scheme and network, counted from the records themselves rather
 * than as they happen: a payment is settled once however many processes took part, so this count is
 * exact by construction and costs the paid path nothing.
 * - `exact` (EIP-3009, Permit2, Solana), `upto` and `auth-capture` captures: the settlement entries
 *   (payment_settlements), each written by a unique insert before the buyer's answer goes out (the
 *   payment record itself is brought up to date a moment later);
 * - `batch-settlement`: each channel transaction the facilitator sent for the org in the month (deposits,
 *   claims, settlements, refunds) that succeeded.
 */
export class SettlementCounts {
  constructor(private readonly settled: Model<SettledPaymentDoc>, private readonly channelActions: Model<ChannelActionDoc>) {}

  async of(orgId: string, month: Month): Promise<SettlementCount[]> {
    const { from, until } = monthRange(month);
    const [payments, actions] = await Promise.all([
      this.settled.aggregate<{ _id: { scheme?: string; network?: string }; n: number }>([
        // An upto call charged nothing has an entry but no transaction: nothing was settled.
        { $match: { orgId, settledAt: { $gte: from, $lt: until }, txHash: { $ne: '' } } },
        { $group: { _id: { scheme: '$scheme', network: '$network' }, n: { $sum: 1 } } },
      ]),
      this.channelActions.aggregate<{ _id: { chainId: number }; n: number }>([
        { $match: { orgId, status: 'succeeded', updatedAt: { $gte: from, $lt: until } } },
        { $group: { _id: { chainId: '$chainId' }, n: { $sum: 1 } } },
      ]),
    ]);
    const rows = new Map<string, SettlementCount>();
    const add = (scheme: string, network: string, n: number) => {
      const row = rows.get(`${scheme}|${network}`) ?? { scheme, network, count: 0 };
      row.count += n;
      rows.set(`${scheme}|${network}`, row);
    };
    // Entries written before they named their scheme and network: `unknown`.
    for (const g of payments) add(g._id.scheme ?? 'unknown', g._id.network ?? 'unknown', g.n);
    for (const g of actions) add('batch-settlement', networkByChainId(g._id.chainId)?.name ?? `eip155:${g._id.chainId}`, g.n);
    return [...rows.values()].sort((a, b) => b.count - a.count || a.scheme.localeCompare(b.scheme) || a.network.localeCompare(b.network));
  }
}
