import type { PayRefusal } from '../../../pay-result.js';
import type { Permit2Payer } from '../../permit2-payer.js';
import type { Paid, PayCall, SchemePayer } from '../../payer.js';

/**
 * Pays an x402 `upto` offer: a Permit2 witness permit for the most the seller may charge, bound to the
 * seller and to the facilitator the offer names; the seller settles what the request used. The permit
 * flow is the one `exact` uses through Permit2 (permit2-payer.ts), with upto's proxy and witness.
 */
export class UptoPayer implements SchemePayer<'upto'> {
  constructor(private readonly permit2: Permit2Payer) {}

  pay(call: PayCall<'upto'>): Promise<Paid | PayRefusal> {
    return this.permit2.pay(call);
  }
}
