import { z } from 'zod';
import { FacilitatorUnavailable, type Facilitator, type HoldRequest, type HoldResult, type RedeemRequest, type RedeemResult } from './facilitator.js';
import { formatUsdc, JwsReceiptSchema, parseSellerSettings, type SellerSettings } from 'agentgate-x402-wire';
import { backendCall, unexpectedAnswer, type BackendConnection } from './backend-http.js';

export { BackendRequestError } from './backend-http.js';

/**
 * HTTP client for the agentgate backend, authenticated with the seller API key (`loid-...`). It is
 * the production Facilitator: `redeem` asks the backend to verify and settle one payment; `hold`,
 * `capture` and `release` settle one after the seller's handler.
 * Routes: POST /v0/payments/redeem, POST /v0/payments/holds, POST /v0/payments/holds/{id}/capture|release,
 * GET /v0/payments/settings, GET /v0/payments, GET /v0/payments/{id}.
 */

export interface BackendClientOptions extends BackendConnection {
  /** Seller API key, prefix `loid-`. */
  readonly apiKey: string;
}

export const SELLER_KEY_PREFIX = 'loid-';

const PaymentResponseSchema = z.object({
  success: z.literal(true),
  transaction: z.string(),
  network: z.string().min(1),
  payer: z.string().min(1),
  amount: z.string().regex(/^\d+$/).optional(),
  extensions: z.record(z.string(), z.unknown()).optional(),
  extra: z.record(z.string(), z.unknown()).optional(),
  // Empty only for an upto charge of 0, which sends no transaction, or a channel's voucher (nothing is sent
  // per call): anything else served as paid has one.
}).refine((r) => r.transaction !== '' || r.amount === '0' || r.extra?.chargedAmount !== undefined, { message: 'a settlement without a transaction must be an upto charge of 0 or a channel voucher' });

const SignInAnswerSchema = z.discriminatedUnion('granted', [
  z.object({ granted: z.literal(true), payer: z.string(), paymentId: z.string(), transaction: z.string() }),
  z.object({ granted: z.literal(false), reason: z.string(), message: z.string() }),
]);
const RedeemOkSchema = z.object({ ok: z.literal(true), paymentResponse: PaymentResponseSchema, paymentId: z.string().min(1) });
const HeldSchema = z.object({ ok: z.literal(true), holdId: z.string().min(1), payer: z.string().min(1), expiresAt: z.string() });
const RedeemRefusedSchema = z.object({
  ok: z.literal(false),
  error: z.string().min(1),
  message: z.string(),
  requirement: z.unknown().optional(),
});

const ChannelRefusedSchema = z.object({
  ok: z.literal(false),
  error: z.string().min(1),
  message: z.string(),
  channelState: z.record(z.string(), z.unknown()).optional(),
  voucherState: z.record(z.string(), z.unknown()).optional(),
});

export const SignedReceiptSchema = z.object({
  body: z.record(z.string(), z.unknown()),
  signature: z.string(),
  publicKey: z.string(),
  did: z.string(),
});
export type SignedReceipt = z.infer<typeof SignedReceiptSchema>;

export const PaymentRecordSchema = z.looseObject({
  id: z.string(),
  endpointId: z.string().nullish(),
  network: z.string(),
  payerAddress: z.string(),
  recipientAddress: z.string(),
  amountUsdcRaw: z.string(),
  txHash: z.string().nullish(),
  status: z.enum(['settled', 'held', 'verified', 'failed']),
  resourceUrl: z.string(),
  failureReason: z.string().nullish(),
  createdAt: z.string(),
  settledAt: z.string().nullish(),
  authorizationNonce: z.string().optional(),
  signedReceipt: SignedReceiptSchema.nullish(),
  /** The same receipt in the x402 offer-receipt extension's JWS form. */
  offerReceipt: JwsReceiptSchema.nullish(),
});
export type PaymentRecord = z.infer<typeof PaymentRecordSchema>;

const PaymentListSchema = z.object({ payments: z.array(PaymentRecordSchema), nextPageToken: z.string().optional() });
export type PaymentList = z.infer<typeof PaymentListSchema>;

export type BackendRedeemResponse =
  | z.infer<typeof RedeemOkSchema>
  | { ok: false; error: string; message: string; requirement: unknown };

export interface BackendClient extends Required<Facilitator> {
  /** The Facilitator view: amounts in atomic units, failures as reasons. */
  redeem(request: RedeemRequest): Promise<RedeemResult>;
  /** The wire call as the SDK exposes it: amount is a decimal USDC string. */
  redeemPayment(input: { paymentHeader: string; resource: string; amount: string; payTo?: string }): Promise<BackendRedeemResponse>;
  /** Call once at start-up and cache; never per request. */
  fetchSellerSettings(): Promise<SellerSettings>;
  listPayments(input?: { limit?: number; pageToken?: string }): Promise<PaymentList>;
  getPayment(paymentId: string): Promise<PaymentRecord>;
}

export function createBackendClient(options: BackendClientOptions): BackendClient {
  if (!options.apiKey.startsWith(SELLER_KEY_PREFIX)) {
    throw new TypeError(`apiKey must be a seller API key (prefix "${SELLER_KEY_PREFIX}")`);
  }
  const call = backendCall(options);

  async function redeemPayment(input: { paymentHeader: string; resource: string; amount: string; payTo?: string }): Promise<BackendRedeemResponse> {
    const { status, json } = await call('POST', '/v0/payments/redeem', input);
    if (status === 200) {
      const ok = RedeemOkSchema.safeParse(json);
      if (ok.success) return ok.data;
      throw new FacilitatorUnavailable('payment backend answered 200 with an unexpected body', 502);
    }
    if (status === 402) {
      const refused = RedeemRefusedSchema.safeParse(json);
      if (refused.success) return { ...refused.data, requirement: refused.data.requirement ?? null };
      throw new FacilitatorUnavailable('payment backend answered 402 with an unexpected body', 502);
    }
    // 401/403 here means the seller's own key is wrong: the buyer is not at fault, so it is a 502.
    const problem = z.object({ error: z.string(), message: z.string() }).safeParse(json);
    throw new FacilitatorUnavailable(
      `payment backend refused the redeem call (${status}${problem.success ? ` ${problem.data.error}: ${problem.data.message}` : ''})`,
      502,
    );
  }

  /** 200/201 with the expected body, or 402 (and 409 for a decided hold) with a refusal; anything else is the backend's fault. */
  async function paymentCall<T>(path: string, body: unknown, ok: z.ZodType<T>, okStatus: number): Promise<T | { ok: false; reason: string; message: string }> {
    const { status, json } = await call('POST', path, body);
    if (status === okStatus) {
      const parsed = ok.safeParse(json);
      if (parsed.success) return parsed.data;
      throw new FacilitatorUnavailable(`payment backend answered ${status} with an unexpected body`, 502);
    }
    const problem = z.object({ error: z.string(), message: z.string() }).safeParse(json);
    if ((status === 402 || status === 409) && problem.success) return { ok: false, reason: problem.data.error, message: problem.data.message };
    // An upto charge above the permit: the seller's mistake, refused with nothing charged.
    if (status === 400 && problem.success && problem.data.error === 'settlement_exceeds_amount') return { ok: false, reason: problem.data.error, message: problem.data.message };
    throw new FacilitatorUnavailable(
      `payment backend refused ${path} (${status}${problem.success ? ` ${problem.data.error}: ${problem.data.message}` : ''})`,
      status === 503 || status === 504 ? 503 : 502,
    );
  }

  return {
    redeemPayment,

    async hold(request: HoldRequest): Promise<HoldResult> {
      return paymentCall('/v0/payments/holds', {
        paymentHeader: request.paymentHeader, resource: request.resource, amount: formatUsdc(request.amountAtomic), payTo: request.requirement.payTo,
        ...(request.holdSeconds !== undefined ? { holdSeconds: request.holdSeconds } : {}),
      }, HeldSchema, 201);
    },

    async capture(holdId, usage) {
      const body = usage === undefined ? undefined : { amount: formatUsdc(usage.amountAtomic) };
      const answer = await paymentCall(`/v0/payments/holds/${encodeURIComponent(holdId)}/capture`, body, RedeemOkSchema, 200);
      return answer.ok ? { ok: true, paymentResponse: answer.paymentResponse, paymentId: answer.paymentId } : answer;
    },

    async release(holdId) {
      // Released, or already decided (409): either way nothing more to do here.
      await paymentCall(`/v0/payments/holds/${encodeURIComponent(holdId)}/release`, undefined, z.unknown(), 200);
    },

    async channelCapture(voucherId, usage) {
      const body = usage === undefined ? undefined : { amount: formatUsdc(usage.amountAtomic) };
      const answer = await paymentCall(`/v0/payments/channels/vouchers/${encodeURIComponent(voucherId)}/capture`, body, RedeemOkSchema, 200);
      return answer.ok ? { ok: true, paymentResponse: answer.paymentResponse, paymentId: answer.paymentId } : answer;
    },

    async channelRelease(voucherId) {
      await paymentCall(`/v0/payments/channels/vouchers/${encodeURIComponent(voucherId)}/release`, undefined, z.unknown(), 200);
    },

    async channelPay(request) {
      const { status, json } = await call('POST', '/v0/payments/channels/pay', {
        paymentHeader: request.paymentHeader, resource: request.resource, amount: formatUsdc(request.amountAtomic), payTo: request.requirement.payTo,
        ...(request.holdSeconds !== undefined ? { hold: true, holdSeconds: request.holdSeconds } : {}),
        ...(request.byUsage ? { byUsage: true } : {}),
      });
      if (status === 200) {
        const ok = RedeemOkSchema.safeParse(json);
        if (ok.success) return { ok: true, paymentResponse: ok.data.paymentResponse, paymentId: ok.data.paymentId };
        throw new FacilitatorUnavailable('payment backend answered 200 with an unexpected body', 502);
      }
      const refused = ChannelRefusedSchema.safeParse(json);
      if (status === 402 && refused.success) {
        const { error, message, channelState, voucherState } = refused.data;
        return { ok: false, reason: error, message, ...(channelState ? { channelState } : {}), ...(voucherState ? { voucherState } : {}) };
      }
      const problem = z.object({ error: z.string(), message: z.string() }).safeParse(json);
      throw new FacilitatorUnavailable(`payment backend refused the channel call (${status}${problem.success ? ` ${problem.data.error}: ${problem.data.message}` : ''})`, status === 503 || status === 504 ? 503 : 502);
    },

    async signIn(request) {
      const { status, json } = await call('POST', '/v0/payments/sign-in-with-x', { header: request.header, resource: request.resource });
      const answer = SignInAnswerSchema.safeParse(json);
      if (status !== 200 || !answer.success) {
        // A malformed header is the buyer's (400): not signed in. Anything else is the backend's.
        if (status === 400) return { ok: false, reason: 'invalid_siwx_payload', message: 'the backend refused the sign-in-with-x header' };
        throw new FacilitatorUnavailable(`payment backend answered ${status} to sign-in-with-x`, status === 503 ? 503 : 502);
      }
      const a = answer.data;
      return a.granted ? { ok: true, payer: a.payer, paymentId: a.paymentId, transaction: a.transaction } : { ok: false, reason: a.reason, message: a.message };
    },

    async redeem(request) {
      const answer = await redeemPayment({
        paymentHeader: request.paymentHeader,
        resource: request.resource,
        amount: formatUsdc(request.amountAtomic),
        // A Solana payment's payee is the seller's address there, which the backend keeps (payToByNetwork).
        ...(typeof request.requirement.payTo === 'string' && !request.requirement.payTo.startsWith('0x') ? {} : { payTo: request.requirement.payTo }),
      });
      if (answer.ok) return { ok: true, paymentResponse: answer.paymentResponse, paymentId: answer.paymentId };
      return { ok: false, reason: answer.error, message: answer.message };
    },

    async fetchSellerSettings() {
      const { status, json } = await call('GET', '/v0/payments/settings');
      if (status !== 200) unexpectedAnswer(status, json);
      return parseSellerSettings(json);
    },

    async listPayments(input = {}) {
      const query = new URLSearchParams();
      if (input.limit !== undefined) query.set('limit', String(input.limit));
      if (input.pageToken !== undefined) query.set('pageToken', input.pageToken);
      const suffix = query.size > 0 ? `?${query}` : '';
      const { status, json } = await call('GET', `/v0/payments${suffix}`);
      if (status !== 200) unexpectedAnswer(status, json);
      const parsed = PaymentListSchema.safeParse(json);
      if (!parsed.success) unexpectedAnswer(status, json);
      return parsed.data;
    },

    async getPayment(paymentId) {
      const { status, json } = await call('GET', `/v0/payments/${encodeURIComponent(paymentId)}`);
      if (status !== 200) unexpectedAnswer(status, json);
      const parsed = PaymentRecordSchema.safeParse(json);
      if (!parsed.success) unexpectedAnswer(status, json);
      return parsed.data;
    },
  };
}
