import { type AuthCaptureRequirements, type BatchSettlementRequirementsV2, type PaymentRequirementsV1, type PaymentRequirementsV2, type UptoRequirementsV2 } from 'agentgate-x402-wire';

/**
 * What the Paywall needs from whoever verifies and settles payments. The production one is the
 * backend client (backend-client.ts); tests and self-hosted facilitators implement the same thing.
 *
 * `redeem` verifies and settles at once (settle before the handler). `hold`, `capture` and `release`
 * settle after it: a hold verifies the payment and claims its authorization without moving money, so
 * the handler runs once; capture settles it when the handler succeeded, release drops it when it failed
 * (nothing is charged, the same signed payment may be presented again). A facilitator without `hold`
 * settles every route before its handler.
 */
export interface Facilitator {
  redeem(request: RedeemRequest): Promise<RedeemResult>;
  hold?(request: HoldRequest): Promise<HoldResult>;
  /** `usage`: for an `upto` hold, what the request used (at most the maximum held; absent = nothing). */
  capture?(holdId: string, usage?: CaptureUsage): Promise<RedeemResult>;
  /** Never throws for a hold that is gone or already released; a hold nobody releases expires by itself. */
  release?(holdId: string): Promise<void>;
  /**
   * A batch-settlement call: a deposit with its first voucher, or a voucher, accepted once by the backend
   * (where the channel's state is). A refusal may say where the channel stands (`channelState`,
   * `voucherState`), for the buyer to sign the right voucher.
   */
  channelPay?(request: ChannelPayRequest): Promise<ChannelPayResult>;
  /** Charges a held channel call (the handler succeeded); `usage`: a call priced by usage, charged what it used (at most its maximum). */
  channelCapture?(voucherId: string, usage?: CaptureUsage): Promise<ChannelPayResult>;
  /** Releases a held channel call (the handler failed): nothing is charged. Never throws for one that is gone. */
  channelRelease?(voucherId: string): Promise<void>;
  /**
   * Sign-In-With-X: whether the buyer's signed `SIGN-IN-WITH-X` header proves it paid for `resource` (and
   * its nonce was never used). Without it, routes with signInWithX only ask for payment.
   */
  signIn?(request: SignInRequest): Promise<SignInResult>;
}

/** A channel call; `holdSeconds`: held while the handler runs (captured or released after it), not charged before. */
export interface ChannelPayRequest extends RedeemRequest {
  readonly holdSeconds?: number;
  /** A route priced by usage (held): `amountAtomic` is its maximum, and the capture names what the call used. */
  readonly byUsage?: boolean;
}

export type ChannelPayResult =
  | { readonly ok: true; readonly paymentResponse: PaymentResponse; readonly paymentId: string }
  | { readonly ok: false; readonly reason: string; readonly message: string; readonly channelState?: Readonly<Record<string, unknown>>; readonly voucherState?: Readonly<Record<string, unknown>> };

export interface SignInRequest {
  /** The header exactly as the buyer sent it. */
  readonly header: string;
  readonly resource: string;
}

export type SignInResult =
  | { readonly ok: true; readonly payer: string; readonly paymentId: string; readonly transaction: string }
  | { readonly ok: false; readonly reason: string; readonly message: string };

export interface CaptureUsage {
  readonly amountAtomic: bigint;
}

export interface HoldRequest extends RedeemRequest {
  /** How long the handler may take before the hold expires (and is released by itself). */
  readonly holdSeconds?: number;
}

export type HoldResult =
  | { readonly ok: true; readonly holdId: string; readonly payer: string; readonly expiresAt: string }
  | { readonly ok: false; readonly reason: string; readonly message: string };

export interface RedeemRequest {
  /** The raw header value exactly as the buyer sent it (the backend re-decodes and verifies it). */
  readonly paymentHeader: string;
  readonly version: 1 | 2;
  /** `<scheme>://<host><path>` of the protected resource. */
  readonly resource: string;
  readonly amountAtomic: bigint;
  /** The requirement the buyer was asked to satisfy, in the payload's protocol version. */
  readonly requirement: PaymentRequirementsV1 | PaymentRequirementsV2 | UptoRequirementsV2 | AuthCaptureRequirements | BatchSettlementRequirementsV2;
}

export interface PaymentResponse {
  readonly success: true;
  readonly transaction: string;
  /** Either spelling (v1 name or CAIP-2); the Paywall writes each response header in its own form. */
  readonly network: string;
  readonly payer: string;
  /** upto: the atomic amount charged (the transaction is "" when it is 0). */
  readonly amount?: string;
  /** Extension data for the settlement header, e.g. `offer-receipt`'s signed receipt. */
  readonly extensions?: Readonly<Record<string, unknown>>;
  /** batch-settlement: the call's charge and the channel after it (`chargedAmount`, `channelState`). */
  readonly extra?: Readonly<Record<string, unknown>>;
}

export type RedeemResult =
  | { readonly ok: true; readonly paymentResponse: PaymentResponse; readonly paymentId: string }
  | { readonly ok: false; readonly reason: string; readonly message: string };

/**
 * The facilitator could not be asked (network error, timeout) or gave no usable answer (5xx, garbage).
 * The buyer's payment was not settled as far as we know, so the request fails with 503 / 502 and the
 * handler never runs. `redeem` throws it.
 */
export class FacilitatorUnavailable extends Error {
  override readonly name = 'FacilitatorUnavailable';
  constructor(
    message: string,
    /** 503: could not reach it. 502: reached it, but the answer was unusable. */
    readonly status: 502 | 503 = 503,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
