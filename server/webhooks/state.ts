import type { DeliveryDoc } from './models.js';

/**
 * What an operator calls a delivery: the stored status, with "pending" split in two. A pending delivery
 * whose last attempt failed is "failing" (it waits for its next scheduled attempt); one that has not been
 * tried yet in this round (new, or just retried by hand) is "pending". A retry round clears lastError, so
 * the split holds per round.
 */
export const DELIVERY_STATES = ['pending', 'failing', 'failed', 'delivered'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

export function deliveryState(delivery: Pick<DeliveryDoc, 'status' | 'lastError'>): DeliveryState {
  if (delivery.status === 'pending') return delivery.lastError ? 'failing' : 'pending';
  return delivery.status;
}

/** The same split as a query (no $expr: FerretDB 1.x has none; `null` matches a missing field too). */
export function deliveryStateQuery(state: DeliveryState): Record<string, unknown> {
  if (state === 'pending') return { status: 'pending', lastError: null };
  if (state === 'failing') return { status: 'pending', lastError: { $ne: null } };
  return { status: state };
}
