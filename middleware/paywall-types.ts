import { type AuthCapturePaymentRequiredResponse, type BatchSettlementPaymentRequiredResponse, type ExactSvmPaymentRequiredResponse, type PaymentRequiredResponse, type Permit2PaymentRequiredResponse, type Price, type SettleMode, type UptoPaymentRequiredResponse } from 'agentgate-x402-wire';
import { FacilitatorUnavailable } from './facilitator.js';

// What passes between a framework adapter and the Paywall: the request as every framework can describe
// it, and the outcomes the adapter acts on (pass, refuse, ask for payment, serve as paid, run the handler
// on a held payment, or fail because the facilitator could not be asked). No framework is imported here.

export type { SettleMode } from 'agentgate-x402-wire';

/** A request as every framework can describe it. Header names are lower-case (as Node gives them). */
export interface PaywallRequest {
  readonly method: string;
  /** Request target: path plus query, as received (`req.originalUrl` / `ctx.originalUrl`). */
  readonly url: string;
  readonly host: string | undefined;
  readonly protocol: 'http' | 'https';
  readonly headers: Readonly<Record<string, string | undefined>>;
}

export interface ErrorBody {
  readonly error: string;
  readonly message: string;
  readonly status: number;
}

/** The payment a handler runs for (`res.locals.payment`, `ctx.state.payment`, ...). */
export interface RequestPayment {
  readonly version: 1 | 2;
  /**
   * exact: the route's price; upto: a permit for at most maxAmountAtomic, charged what the handler reports;
   * auth-capture: the price authorized into escrow before the handler, captured after it succeeded (voided
   * after it failed), refundable afterwards; batch-settlement: a voucher of the buyer's payment channel.
   */
  readonly scheme: 'exact' | 'upto' | 'auth-capture' | 'batch-settlement';
  readonly paymentId: string;
  readonly payer: string;
  /** The settlement transaction: set when the route settles before the handler; after it, in the response headers. */
  readonly transaction?: string;
  readonly settle: SettleMode;
  /** Who is paid (the seller's payTo unless the route chose another). */
  readonly payTo: string;
  /** v1 network name. */
  readonly network: string;
  /** exact: the price. upto: the maximum (what is charged is what the handler reports, in PAYMENT-RESPONSE's amount). */
  readonly amountAtomic: bigint;
  /** A price by usage (upto, or batch-settlement priced { upto }): the most this request may be charged. */
  readonly maxAmountAtomic?: bigint;
  readonly resource: string;
  readonly pattern: string;
  /**
   * Routes priced by usage (upto, or a batch-settlement route priced { upto }): reports what this request used ("$0.0123", "0.0123", { atomic }), at most the maximum
   * (more throws a RangeError, and nothing is charged for it); the last report counts. Settled after the
   * handler. On an exact route it throws a TypeError.
   */
  charge(price: Price): void;
  /**
   * Sign-In-With-X: the buyer signed in with the wallet that paid for this resource before; nothing was
   * charged now, and `paymentId`/`transaction` are those of that earlier payment.
   */
  readonly signedInWithX?: true;
}

export interface SettledPayment extends RequestPayment {
  readonly transaction: string;
}

export type PaidOutcome = { readonly kind: 'paid'; readonly responseHeaders: Readonly<Record<string, string>>; readonly payment: SettledPayment };
export type UnavailableOutcome = { readonly kind: 'unavailable'; readonly status: 502 | 503; readonly body: ErrorBody };

/**
 * A payment verified and held while the handler runs (after-handler routes). The adapter runs the
 * handler with its response held back and then captures (a response below 400) or releases (anything
 * else, a throw, a client that went away). Both are idempotent; release never throws.
 */
export interface HeldPayment {
  readonly payment: RequestPayment;
  /** Settles it: `paid` (send the held response with these headers) or why not (send that instead). */
  capture(): Promise<PaidOutcome | PaymentRequiredOutcome | UnavailableOutcome>;
  release(): Promise<void>;
}

export type PaywallOutcome =
  | { readonly kind: 'pass' }
  | { readonly kind: 'reject'; readonly status: 400; readonly body: ErrorBody }
  | PaymentRequiredOutcome
  | PaidOutcome
  | { readonly kind: 'held'; readonly hold: HeldPayment }
  | UnavailableOutcome;

export type PaymentRequiredOutcome = { readonly kind: 'payment-required' } & (PaymentRequiredResponse | Permit2PaymentRequiredResponse | UptoPaymentRequiredResponse | AuthCapturePaymentRequiredResponse | BatchSettlementPaymentRequiredResponse | ExactSvmPaymentRequiredResponse);

export const PASS: PaywallOutcome = Object.freeze({ kind: 'pass' });

/** The facilitator could not be asked, or gave no usable answer: 503 / 502, and the handler never runs. */
export function unavailable(error: unknown): UnavailableOutcome {
  const status = error instanceof FacilitatorUnavailable ? error.status : 502;
  const message = error instanceof FacilitatorUnavailable ? error.message : 'payment facilitator failed';
  return { kind: 'unavailable', status, body: { error: 'facilitator_unavailable', message, status } };
}

/** A request target no route may be matched against safely: 400. */
export function reject(error: string, message: string): PaywallOutcome {
  return { kind: 'reject', status: 400, body: { error, message, status: 400 } };
}
