// What a channel's voucher charged. A voucher is signed for the channel's charged total plus the call's
// price (its maximum, for a route priced by usage); a call priced by usage is charged what its handler
// reported, at most that, so the channel's charged total after it (`charged`) may stay below what the
// voucher allows (`cumulative`). A fixed-price call charges its price: `charged` is `cumulative`, and a
// voucher written before usage pricing existed has no `charged`, which reads the same. (Fields of
// records.ts's VoucherDoc, named here by shape.)

interface VoucherAmounts {
  /** The voucher's maxClaimableAmount as signed. */
  cumulative: string;
  /** The call's price (its maximum, priced by usage). */
  price: string;
  charged?: string;
  amount?: string;
}

/** What the channel has charged after this voucher's call: the base of the next voucher, what a claim takes. */
export const chargedCumulativeOf = (v: Pick<VoucherAmounts, 'cumulative' | 'charged'>): bigint => BigInt(v.charged ?? v.cumulative);

/** What this voucher's call was charged (a held usage call: its maximum, until its capture says). */
export const callChargeOf = (v: Pick<VoucherAmounts, 'price' | 'amount'>): bigint => BigInt(v.amount ?? v.price);

/** What the channel had charged before this voucher's call (the voucher is that plus the call's price). */
export const chargedBeforeOf = (v: Pick<VoucherAmounts, 'cumulative' | 'price'>): bigint => BigInt(v.cumulative) - BigInt(v.price);
