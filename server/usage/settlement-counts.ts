import type { Model } from 'mongoose';
import { networkByChainId } from 'agentgate-x402-wire';
import type { PaymentDoc } from '../payments/models.js';
import type { ChannelActionDoc } from '../payments/schemes/batch-settlement/evm/settle.js';
import { monthRange, type Month } from './months.js';

export interface SettlementCount { scheme: string; network: string; count: number }

/**
 * How far back a payment settled this month may have been created: an auth-capture hold is captured
 * later than it was authorized (days at most). Bounding createdAt lets the count walk the payments'
 * (orgId, createdAt) index over about a month instead of every payment the org ever had.
 */
const SETTLED_AFTER_CREATED_MS = 35 * 86_400_000;

/**
 * Settlements of an org in a month, by scheme and network, counted from the records themselves rather
 * than as they happen: a payment is settled once however many processes took part, so this count is
 * exact by construction and costs the paid path nothing.
 * - `exact` (EIP-3009, Permit2, Solana), `upto` and `auth-capture` captures: the org's payments settled
 *   in the month;
 * - `batch-settlement`: each channel transaction the facilitator sent for the org in the month (deposits,
 *   claims, settlements, refunds) that succeeded.
 */
export class SettlementCounts {
  constructor(private readonly payments: Model<PaymentDoc>, private readonly channelActions: Model<ChannelActionDoc>) {}

  async of(orgId: string, month: Month): Promise<SettlementCount[]> {
    const { from, until } = monthRange(month);
    const [payments, actions] = await Promise.all([
      this.payments.aggregate<{ _id: { scheme?: string; network: string }; n: number }>([
        { $match: { orgId, createdAt: { $gte: new Date(from.getTime() - SETTLED_AFTER_CREATED_MS), $lt: until }, status: 'settled', settledAt: { $gte: from, $lt: until } } },
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
    for (const g of payments) add(g._id.scheme ?? 'exact', g._id.network, g.n);
    for (const g of actions) add('batch-settlement', networkByChainId(g._id.chainId)?.name ?? `eip155:${g._id.chainId}`, g.n);
    return [...rows.values()].sort((a, b) => b.count - a.count || a.scheme.localeCompare(b.scheme) || a.network.localeCompare(b.network));
  }
}
