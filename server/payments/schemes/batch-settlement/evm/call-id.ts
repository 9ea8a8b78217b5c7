import { createHash } from 'node:crypto';

/**
 * A channel call's record id: `chc_` and 32 hex digits of the voucher id's SHA-256. The same voucher is the
 * same call (one voucher is accepted once; a released hold's is deleted before the amount is signed again).
 */
export const callIdOf = (voucherDocId: string) => `chc_${createHash('sha256').update(voucherDocId).digest('hex').slice(0, 32)}`;
