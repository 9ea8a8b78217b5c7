import { z } from 'zod';
import { FacilitatorUnavailable, type Facilitator, type RedeemRequest, type RedeemResult } from './facilitator.js';
import { formatUsdc } from './price.js';
import { parseSellerSettings, type SellerSettings } from './seller-settings.js';
import { JwsReceiptSchema } from './offer-receipt.js';

/**
 * HTTP client for the agentgate backend, authenticated with the seller API key (`loid-...`). It is
 * the production Facilitator: `redeem` asks the backend to verify and settle one payment.
 * Routes: POST /v0/payments/redeem, GET /v0/payments/settings, GET /v0/payments, GET /v0/payments/{id}.
 */

export interface BackendClientOptions {
  /** e.g. "https://api.agentgate.dev" (no trailing path). */
  readonly backendUrl: string;
  /** Seller API key, prefix `loid-`. */
  readonly apiKey: string;
  readonly fetch?: typeof globalThis.fetch;
  /** Per request. Redeem waits for on-chain settlement, so this is generous. Default 30 s. */
  readonly timeoutMs?: number;
}

export const SELLER_KEY_PREFIX = 'loid-';
const DEFAULT_TIMEOUT_MS = 30_000;

const PaymentResponseSchema = z.object({
  success: z.literal(true),
  transaction: z.string().min(1),
  network: z.string().min(1),
  payer: z.string().min(1),
  extensions: z.record(z.string(), z.unknown()).optional(),
});

const RedeemOkSchema = z.object({ ok: z.literal(true), paymentResponse: PaymentResponseSchema, paymentId: z.string().min(1) });
const RedeemRefusedSchema = z.object({
  ok: z.literal(false),
  error: z.string().min(1),
  message: z.string(),
  requirement: z.unknown().optional(),
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
  status: z.enum(['settled', 'verified', 'failed']),
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

/** The backend answered, but not with success: wrong key (401/403), unknown payment (404), bad input (400). */
export class BackendRequestError extends Error {
  override readonly name = 'BackendRequestError';
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
  ) {
    super(message);
  }
}

export interface BackendClient extends Facilitator {
  /** The Facilitator view: amounts in atomic units, failures as reasons. */
  redeem(request: RedeemRequest): Promise<RedeemResult>;
  /** The wire call as the SDK exposes it: amount is a decimal USDC string. */
  redeemPayment(input: { paymentHeader: string; resource: string; amount: string }): Promise<BackendRedeemResponse>;
  /** Call once at start-up and cache; never per request. */
  fetchSellerSettings(): Promise<SellerSettings>;
  listPayments(input?: { limit?: number; pageToken?: string }): Promise<PaymentList>;
  getPayment(paymentId: string): Promise<PaymentRecord>;
}

export function createBackendClient(options: BackendClientOptions): BackendClient {
  if (!options.apiKey.startsWith(SELLER_KEY_PREFIX)) {
    throw new TypeError(`apiKey must be a seller API key (prefix "${SELLER_KEY_PREFIX}")`);
  }
  const base = new URL(options.backendUrl).toString().replace(/\/+$/, '');
  const doFetch = options.fetch ?? globalThis.fetch;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;

  async function call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
    let response: Response;
    try {
      response = await doFetch(base + path, {
        method,
        headers: {
          authorization: `Bearer ${options.apiKey}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw new FacilitatorUnavailable(`payment backend unreachable: ${describeError(error)}`, 503, { cause: error });
    }
    if (response.status >= 500) {
      await response.body?.cancel();
      throw new FacilitatorUnavailable(`payment backend answered ${response.status}`, 502);
    }
    let json: unknown;
    try {
      json = await response.json();
    } catch (error) {
      throw new FacilitatorUnavailable(`payment backend answered ${response.status} without JSON`, 502, { cause: error });
    }
    return { status: response.status, json };
  }

  function unexpected(status: number, json: unknown): never {
    const parsed = z.object({ error: z.string(), message: z.string() }).safeParse(json);
    if (parsed.success) throw new BackendRequestError(status, parsed.data.error, parsed.data.message);
    throw new BackendRequestError(status, 'unexpected_response', `payment backend answered ${status} with an unexpected body`);
  }

  async function redeemPayment(input: { paymentHeader: string; resource: string; amount: string }): Promise<BackendRedeemResponse> {
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

  return {
    redeemPayment,

    async redeem(request) {
      const answer = await redeemPayment({
        paymentHeader: request.paymentHeader,
        resource: request.resource,
        amount: formatUsdc(request.amountAtomic),
      });
      if (answer.ok) return { ok: true, paymentResponse: answer.paymentResponse, paymentId: answer.paymentId };
      return { ok: false, reason: answer.error, message: answer.message };
    },

    async fetchSellerSettings() {
      const { status, json } = await call('GET', '/v0/payments/settings');
      if (status !== 200) unexpected(status, json);
      return parseSellerSettings(json);
    },

    async listPayments(input = {}) {
      const query = new URLSearchParams();
      if (input.limit !== undefined) query.set('limit', String(input.limit));
      if (input.pageToken !== undefined) query.set('pageToken', input.pageToken);
      const suffix = query.size > 0 ? `?${query}` : '';
      const { status, json } = await call('GET', `/v0/payments${suffix}`);
      if (status !== 200) unexpected(status, json);
      const parsed = PaymentListSchema.safeParse(json);
      if (!parsed.success) unexpected(status, json);
      return parsed.data;
    },

    async getPayment(paymentId) {
      const { status, json } = await call('GET', `/v0/payments/${encodeURIComponent(paymentId)}`);
      if (status !== 200) unexpected(status, json);
      const parsed = PaymentRecordSchema.safeParse(json);
      if (!parsed.success) unexpected(status, json);
      return parsed.data;
    },
  };
}

function describeError(error: unknown): string {
  // Duck-typed: the abort DOMException may come from another realm, where instanceof Error fails.
  const { name, message } = (typeof error === 'object' && error !== null ? error : {}) as { name?: unknown; message?: unknown };
  if (name === 'TimeoutError') return 'timed out';
  return typeof message === 'string' ? message : String(error);
}
