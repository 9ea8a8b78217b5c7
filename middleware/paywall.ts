import { canonicalizePath, type PathRejection } from './canonical-path.js';
import { buildPaymentRequired, type PaymentRequiredResponse } from './challenge.js';
import { FacilitatorUnavailable, type Facilitator } from './facilitator.js';
import { toCaip2Network, toV1Network } from './networks.js';
import { checkPaymentAgainstRequirements } from './payment-checks.js';
import { parsePrice, type Price } from './price.js';
import { decodePaymentHeader } from './protocol/payment-header.js';
import { encodePaymentResponseV1 } from './protocol/v1.js';
import { encodePaymentResponseV2 } from './protocol/v2.js';
import { parsePublicOrigin, resolveOrigin } from './request-origin.js';
import { RouteTable, type CompiledRoute } from './routes.js';
import { parseSellerSettings, type SellerSettings } from './seller-settings.js';

export interface RouteConfig {
  readonly price: Price;
  readonly description?: string;
  readonly mimeType?: string;
  readonly maxTimeoutSeconds?: number;
  readonly outputSchema?: Record<string, unknown>;
}

export interface PaywallOptions {
  /** Pattern -> price, e.g. `{ 'GET /weather': { price: '$0.01' } }`. See routes.ts for the syntax. */
  readonly routes: Readonly<Record<string, RouteConfig>>;
  readonly facilitator: Facilitator;
  readonly settings: SellerSettings;
  /** Honour X-Forwarded-Proto / X-Forwarded-Host. Only behind a proxy that overwrites them. */
  readonly trustProxy?: boolean;
  /** Fixed public origin ("https://api.example.com") for resource URLs; wins over Host and proxy headers. */
  readonly publicOrigin?: string;
  /** Clock for the local expiry check, in milliseconds. */
  readonly now?: () => number;
}

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

export interface SettledPayment {
  readonly version: 1 | 2;
  readonly paymentId: string;
  readonly payer: string;
  readonly transaction: string;
  /** v1 network name. */
  readonly network: string;
  readonly amountAtomic: bigint;
  readonly resource: string;
  readonly pattern: string;
}

export type PaywallOutcome =
  | { readonly kind: 'pass' }
  | { readonly kind: 'reject'; readonly status: 400; readonly body: ErrorBody }
  | PaymentRequiredOutcome
  | { readonly kind: 'paid'; readonly responseHeaders: Readonly<Record<string, string>>; readonly payment: SettledPayment }
  | { readonly kind: 'unavailable'; readonly status: 502 | 503; readonly body: ErrorBody };

export type PaymentRequiredOutcome = { readonly kind: 'payment-required' } & PaymentRequiredResponse;

interface PricedRoute {
  readonly amountAtomic: bigint;
  readonly config: RouteConfig;
  /** Ready 402 responses per resource URL; bounded because Host and dynamic paths are client-chosen. */
  readonly challenges: Map<string, PaymentRequiredOutcome>;
}

const CHALLENGE_CACHE_LIMIT = 64;
const PASS: PaywallOutcome = Object.freeze({ kind: 'pass' });

const PATH_MESSAGES: Record<PathRejection, string> = {
  invalid_request_target: 'request target must be a path ("/...") or an absolute http(s) URL',
  invalid_character: 'path contains whitespace, control or non-ASCII characters',
  backslash: 'path contains a backslash',
  malformed_percent_encoding: 'path contains malformed percent-encoding',
  encoded_separator: 'path contains an encoded "/", "\\" or NUL',
  double_encoding: 'path is percent-encoded more than once',
  dot_segment: 'path contains a "." or ".." segment',
};

/**
 * The x402 seller core: decides for one request whether it passes, is refused, must pay, or has paid.
 * Everything that depends only on configuration is computed in the constructor; an unpaid request
 * costs a path scan, a route lookup and a cache hit.
 */
export class Paywall {
  private readonly table: RouteTable<PricedRoute>;
  private readonly facilitator: Facilitator;
  private readonly settings: SellerSettings;
  private readonly trustProxy: boolean;
  private readonly publicOrigin: string | undefined;
  private readonly now: () => number;

  constructor(options: PaywallOptions) {
    this.settings = parseSellerSettings(options.settings);
    this.facilitator = options.facilitator;
    this.trustProxy = options.trustProxy ?? false;
    this.publicOrigin = options.publicOrigin === undefined ? undefined : parsePublicOrigin(options.publicOrigin);
    this.now = options.now ?? Date.now;
    this.table = new RouteTable(
      Object.entries(options.routes).map(([pattern, config]) => {
        const priced: PricedRoute = { amountAtomic: parsePrice(config.price), config, challenges: new Map() };
        return [pattern, priced] as const;
      }),
    );
  }

  async handle(request: PaywallRequest): Promise<PaywallOutcome> {
    const canonical = canonicalizePath(request.url);
    if (!canonical.ok) return reject(canonical.reason, PATH_MESSAGES[canonical.reason]);

    const method = request.method.toUpperCase();
    const match = this.table.match(method, canonical.key);
    if (match.kind === 'none') return PASS;
    if (match.kind === 'ambiguous') {
      return reject('ambiguous_path', 'path reads as a protected route once ";", spaces or Unicode forms are normalized');
    }

    const origin = this.publicOrigin ?? resolveOrigin(request, this.trustProxy);
    if (origin === undefined) return reject('invalid_host', 'request has no valid Host');
    const route = match.route;
    const resource = origin + (route.literal ? route.path : encodePath(canonical.path));

    const paymentHeader = request.headers['payment-signature'] ?? request.headers['x-payment'];
    if (paymentHeader === undefined || paymentHeader === '') {
      return this.challengeFor(route, resource);
    }
    return this.redeem(route, resource, paymentHeader);
  }

  private async redeem(route: CompiledRoute<PricedRoute>, resource: string, paymentHeader: string): Promise<PaywallOutcome> {
    const challenge = this.challengeFor(route, resource);
    const decoded = decodePaymentHeader(paymentHeader);
    if (!decoded.ok) return this.refuse(route, resource, decoded.reason, decoded.message);

    const checked = checkPaymentAgainstRequirements(
      decoded,
      challenge.requirementV1,
      challenge.requirementV2,
      Math.floor(this.now() / 1000),
    );
    if (!checked.ok) return this.refuse(route, resource, checked.reason, checked.message);

    let result;
    try {
      result = await this.facilitator.redeem({
        paymentHeader,
        version: decoded.version,
        resource,
        amountAtomic: route.value.amountAtomic,
        requirement: decoded.version === 1 ? challenge.requirementV1 : challenge.requirementV2,
      });
    } catch (error) {
      const status = error instanceof FacilitatorUnavailable ? error.status : 502;
      const message = error instanceof FacilitatorUnavailable ? error.message : 'payment facilitator failed';
      return { kind: 'unavailable', status, body: { error: 'facilitator_unavailable', message, status } };
    }
    if (!result.ok) return this.refuse(route, resource, result.reason, result.message);

    const { paymentResponse } = result;
    const network = toV1Network(paymentResponse.network);
    // Extensions (the offer-receipt extension's signed receipt) ride in both settlement headers.
    const settlement = {
      success: true, transaction: paymentResponse.transaction, payer: paymentResponse.payer,
      ...(paymentResponse.extensions ? { extensions: { ...paymentResponse.extensions } } : {}),
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
        version: decoded.version,
        paymentId: result.paymentId,
        payer: paymentResponse.payer,
        transaction: paymentResponse.transaction,
        network,
        amountAtomic: route.value.amountAtomic,
        resource,
        pattern: route.pattern,
      },
    };
  }

  private challengeFor(route: CompiledRoute<PricedRoute>, resource: string): PaymentRequiredOutcome {
    const cache = route.value.challenges;
    let challenge = cache.get(resource);
    if (challenge === undefined) {
      challenge = Object.freeze({ kind: 'payment-required', ...buildPaymentRequired(this.settings, this.offer(route, resource)) });
      if (cache.size >= CHALLENGE_CACHE_LIMIT) cache.clear();
      cache.set(resource, challenge);
    }
    return challenge;
  }

  private refuse(route: CompiledRoute<PricedRoute>, resource: string, reason: string, message: string): PaywallOutcome {
    return { kind: 'payment-required', ...buildPaymentRequired(this.settings, this.offer(route, resource), { reason, message }) };
  }

  private offer(route: CompiledRoute<PricedRoute>, resource: string) {
    const { config, amountAtomic } = route.value;
    return {
      amountAtomic,
      resource,
      description: config.description,
      mimeType: config.mimeType,
      maxTimeoutSeconds: config.maxTimeoutSeconds,
      outputSchema: config.outputSchema,
    };
  }
}

/** Re-encodes a decoded canonical path for use inside a URL, one segment at a time. */
function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

function reject(error: string, message: string): PaywallOutcome {
  return { kind: 'reject', status: 400, body: { error, message, status: 400 } };
}
