import { encodeCursor, type Cursor } from '../platform/pagination.js';
import { presentPayment, presentTransfer } from '../payments/present.js';
import type { MandateOwner } from './mandate-service.js';
import type { OutgoingPaymentDoc } from './outgoing-payment-model.js';
import type { PayService } from './pay-service.js';
import type { PaymentService } from '../payments/payment-service.js';

export function presentOutgoing(p: OutgoingPaymentDoc) {
  return {
    id: p._id,
    direction: 'out' as const,
    mandateId: p.mandateId,
    ...presentTransfer(p),
    // upto: amountUsdcRaw is what the seller charged, out of at most this.
    scheme: p.scheme ?? 'exact',
    maxAmountUsdcRaw: p.maxAmountUsdcRaw ?? p.amountUsdcRaw,
    requestUrl: p.requestUrl,
    // batch-settlement: the channel, the cumulative amount this call's voucher commits, and a deposit it brought.
    ...(p.channel ? { channel: { channelId: p.channel.channelId, cumulativeUsdcRaw: p.channel.cumulativeUsdcRaw, depositUsdcRaw: p.channel.depositUsdcRaw ?? '0' } } : {}),
    // The seller's signed offer-receipt from its settlement answer, so the agent can read it back later.
    offerReceipt: p.paymentResponse?.offerReceipt ?? null,
  };
}

export interface ActivityDeps {
  /** The org's seller payments (money in). */
  payments: { records: Pick<PaymentService['records'], 'list'> };
  /** The identity's own payments (money out). */
  buyer: Pick<PayService, 'listOutgoing'>;
}

/**
 * One feed of money in (the org's seller payments) and out (this identity's payments), newest first.
 * Each source is read one row past the page, so the merged page and its cursor are exact.
 */
export async function paymentActivity({ payments, buyer }: ActivityDeps, owner: MandateOwner, limit: number, cursor?: Cursor) {
  const [incoming, outgoing] = await Promise.all([
    payments.records.list(owner.orgId, limit, cursor),
    buyer.listOutgoing(owner, limit, cursor),
  ]);
  type Row = { at: Date; id: string; item: Record<string, unknown> };
  const rows: Row[] = [
    ...incoming.items.map((p) => ({ at: p.createdAt, id: p._id, item: presentPayment(p) })),
    ...outgoing.items.map((p) => ({ at: p.createdAt, id: p._id, item: presentOutgoing(p) })),
  ].sort((a, b) => b.at.getTime() - a.at.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  const page = rows.slice(0, limit);
  const more = rows.length > limit || Boolean(incoming.nextPageToken) || Boolean(outgoing.nextPageToken);
  const last = page[page.length - 1];
  return { items: page.map((r) => r.item), ...(more && last ? { nextPageToken: encodeCursor({ at: last.at, id: last.id }) } : {}) };
}
