import { encodePaymentResponseV1, encodePaymentResponseV2, type Price, toCaip2Network, toV1Network } from 'agentgate-x402-wire';
import type { RedeemResult } from './facilitator.js';
import type { PaidOutcome, SettleMode } from './paywall-types.js';
import type { Charge } from './route-pricing.js';

// A settled payment as the buyer and the handler see it: the settlement headers of both protocol
// versions (with the receipt extension, and an upto charge's amount) that go on the paid response, and
// the payment the handler reads.

/**
 * The paid outcome of a settlement. `maxAmountAtomic` marks an upto payment: its settlement says what it
 * charged (`amount`), as the scheme's SettlementResponse does.
 */
export function paidOutcome(charge: Charge, version: 1 | 2, result: Extract<RedeemResult, { ok: true }>, settle: SettleMode, maxAmountAtomic?: bigint, scheme?: 'auth-capture' | 'batch-settlement'): PaidOutcome {
  const { paymentResponse } = result;
  const network = toV1Network(paymentResponse.network);
  // Extensions (the offer-receipt extension's signed receipt) ride in both settlement headers; an upto
  // settlement says what it charged (`amount`), as the scheme's SettlementResponse does.
  const settlement = {
    success: true, transaction: paymentResponse.transaction, payer: paymentResponse.payer,
    ...(maxAmountAtomic !== undefined ? { amount: paymentResponse.amount ?? charge.amountAtomic.toString() } : {}),
    ...(paymentResponse.extensions ? { extensions: { ...paymentResponse.extensions } } : {}),
    // A channel's call: what it was charged and where the channel stands, which the buyer's client keeps.
    ...(paymentResponse.extra ? { extra: { ...paymentResponse.extra } } : {}),
  };
  return {
    kind: 'paid',
    responseHeaders: {
      'X-Payment-Response': encodePaymentResponseV1({ ...settlement, network }),
      'PAYMENT-RESPONSE': encodePaymentResponseV2({ ...settlement, network: toCaip2Network(network) }),
      // Paid content must not be served from a shared cache to someone who did not pay.
      'Cache-Control': 'private, no-store',
      'Access-Control-Expose-Headers': 'X-Payment-Response, PAYMENT-RESPONSE',
    },
    payment: {
      version,
      scheme: scheme ?? (maxAmountAtomic === undefined ? 'exact' : 'upto'),
      ...(maxAmountAtomic === undefined ? {} : { maxAmountAtomic }),
      charge: exactCharge(charge.route.pattern),
      paymentId: result.paymentId,
      payer: paymentResponse.payer,
      transaction: paymentResponse.transaction,
      settle,
      network,
      amountAtomic: charge.amountAtomic,
      payTo: charge.payTo,
      resource: charge.resource,
      pattern: charge.route.pattern,
    },
  };
}

/** `charge` of an exact route's payment: there is nothing to report. */
export function exactCharge(pattern: string): (price: Price) => void {
  return () => { throw new TypeError(`route ${pattern} has a fixed price; charge() is for routes priced { upto: ... }`); };
}
