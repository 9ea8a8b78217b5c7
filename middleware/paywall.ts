import { canonicalizePath, type PathRejection } from './canonical-path.js';
import { buildPaymentRequired, buildUptoPaymentRequired, type PaymentRequiredResponse, type UptoPaymentRequiredResponse } from './challenge.js';
import { FacilitatorUnavailable, type Facilitator, type RedeemRequest, type RedeemResult } from './facilitator.js';
import { toCaip2Network, toV1Network } from './networks.js';
import { checkPaymentAgainstRequirements } from './payment-checks.js';
import { parseCharge, parsePrice, type Price } from './price.js';
import { decodePaymentHeader } from './protocol/payment-header.js';
import { decodeUptoPaymentHeader } from './protocol/upto-evm.js';
import { encodePaymentResponseV1 } from './protocol/v1.js';
import { encodePaymentResponseV2, type PaymentRequirementsV2 } from './protocol/v2.js';
import { parsePublicOrigin, resolveOrigin } from './request-origin.js';
import { RouteTable, type CompiledRoute } from './routes.js';
import { parseSellerSettings, type SellerSettings } from './seller-settings.js';

/**
 * When a paid route's payment is settled:
 * - `after-handler` (the default): the payment is verified and held, the handler runs with its response
 *   held back, and the payment is settled only if the handler answers below 400; otherwise nothing is
 *   charged. The buyer receives nothing of the response before the settlement succeeded.
 * - `before-handler` (the x402 spec's order): settled first, then the handler runs. For handlers that must
 *   not run unpaid at all (side effects that cannot be undone).
 */
export type SettleMode = 'after-handler' | 'before-handler';

/** What a price or payee function sees of the request. */
export interface PricingRequest extends PaywallRequest {
  /** The decoded, canonical path ("/forecast"). */
  readonly path: string;
  readonly query: URLSearchParams;
}

export type PriceFunction = (request: PricingRequest) => Price | Promise<Price>;

/**
 * A price by usage (the x402 `upto` scheme): the buyer signs for at most `upto`, the handler reports what
 * the request used (`payment.charge(...)`), and that is settled after the handler. A handler that reports
 * nothing is charged `unreported`: by default 0, so nothing moves (a request that used nothing costs
 * nothing, and a forgotten report never bills the buyer the whole maximum).
 */
export interface UsagePrice {
  readonly upto: Price;
  readonly unreported?: Price;
}

export const isUsagePrice = (price: unknown): price is UsagePrice => typeof price === 'object' && price !== null && 'upto' in price;
export type PayToFunction = (request: PricingRequest) => string | Promise<string>;

export interface RouteConfig {
  /**
   * Per call: "$0.01", "0.01", atomic units as a bigint, or a function of the request (a price by query
   * parameter, by size...). The buyer signs the price computed for its request, and the backend settles
   * that amount, at most the endpoint's registered maxPriceUsdc.
   */
  readonly price: Price | PriceFunction | UsagePrice;
  /** A dynamic price never exceeds this (a price function that returns more is a seller error: 500). */
  readonly maxPrice?: Price;
  /**
   * Who is paid: default the seller's payTo; another address of the seller's `payees`, or a function of
   * the request choosing one (a marketplace paying each vendor).
   */
  readonly payTo?: string | PayToFunction;
  readonly settle?: SettleMode;
  /** After-handler only: how long the handler may take before its hold expires (default 120 s, at most 900). */
  readonly holdSeconds?: number;
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
  /**
   * Where the paywall says what the seller must fix (default `console.warn`): today, once per resource
   * URL, that the backend refused a payment because the URL is not a registered endpoint. The buyer only
   * sees a 402; without this line the seller saw nothing at all.
   */
  readonly warn?: (message: string) => void;
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

/** The payment a handler runs for (`res.locals.payment`, `ctx.state.payment`, ...). */
export interface RequestPayment {
  readonly version: 1 | 2;
  /** exact: the route's price; upto: a permit for at most maxAmountAtomic, charged what the handler reports. */
  readonly scheme: 'exact' | 'upto';
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
  /** upto: the most this request may be charged. */
  readonly maxAmountAtomic?: bigint;
  readonly resource: string;
  readonly pattern: string;
  /**
   * upto routes: reports what this request used ("$0.0123", "0.0123", { atomic }), at most the maximum
   * (more throws a RangeError, and nothing is charged for it); the last report counts. Settled after the
   * handler. On an exact route it throws a TypeError.
   */
  charge(price: Price): void;
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

export type PaymentRequiredOutcome = { readonly kind: 'payment-required' } & (PaymentRequiredResponse | UptoPaymentRequiredResponse);

interface PricedRoute {
  /** The price when it is fixed (computed once); undefined for a price function. */
  readonly fixedAmount: bigint | undefined;
  readonly maxAmount: bigint | undefined;
  /** A usage price: the maximum (also fixedAmount, what the 402 asks to authorize) and the charge when nothing is reported. */
  readonly usage: { readonly max: bigint; readonly unreported: bigint } | undefined;
  readonly config: RouteConfig;
  /**
   * Ready 402 responses per resource URL (and, for a dynamic price or payee, per amount and payee);
   * bounded because Host, dynamic paths and prices are client-chosen.
   */
  readonly challenges: Map<string, PaymentRequiredOutcome>;
}

/** What one request costs and to whom: the route, the resource URL, the amount and the payee. */
interface Charge {
  readonly route: CompiledRoute<PricedRoute>;
  readonly resource: string;
  readonly amountAtomic: bigint;
  readonly payTo: string;
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
  private readonly warn: (message: string) => void;
  /** Resource URLs already warned about, so a busy unregistered route logs once (bounded: URLs are client-chosen). */
  private readonly warnedUnregistered = new Set<string>();

  constructor(options: PaywallOptions) {
    this.settings = parseSellerSettings(options.settings);
    this.facilitator = options.facilitator;
    this.trustProxy = options.trustProxy ?? false;
    this.publicOrigin = options.publicOrigin === undefined ? undefined : parsePublicOrigin(options.publicOrigin);
    this.now = options.now ?? Date.now;
    this.warn = options.warn ?? ((message) => console.warn(message));
    this.table = new RouteTable(
      Object.entries(options.routes).map(([pattern, config]) => {
        const usage = isUsagePrice(config.price) ? usageOf(pattern, config, options.facilitator) : undefined;
        const priced: PricedRoute = {
          fixedAmount: usage ? usage.max : typeof config.price === 'function' ? undefined : parsePrice(config.price as Price),
          maxAmount: config.maxPrice === undefined ? undefined : parsePrice(config.maxPrice),
          usage,
          config,
          challenges: new Map(),
        };
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
    const { fixedAmount, config } = route.value;
    // A fixed price and payee cost nothing per request; a function is asked for this one.
    const charge = fixedAmount !== undefined && typeof config.payTo !== 'function'
      ? { route, resource, amountAtomic: fixedAmount, payTo: config.payTo ?? this.settings.payTo }
      : await this.chargeFor(route, resource, request, canonical.path);

    const paymentHeader = request.headers['payment-signature'] ?? request.headers['x-payment'];
    if (paymentHeader === undefined || paymentHeader === '') {
      return this.challengeFor(charge);
    }
    return this.redeem(charge, paymentHeader);
  }

  /** Runs the route's price and payee functions for this request; their answer is checked like a static one. */
  private async chargeFor(route: CompiledRoute<PricedRoute>, resource: string, request: PaywallRequest, path: string): Promise<Charge> {
    const { fixedAmount, maxAmount, config } = route.value;
    const pricing: PricingRequest = { ...request, path, query: new URL(request.url, 'http://x').searchParams };
    let amountAtomic = fixedAmount;
    if (amountAtomic === undefined) {
      const price = await (config.price as PriceFunction)(pricing);
      amountAtomic = parsePrice(price);
      if (amountAtomic <= 0n) throw new RangeError(`the price function of ${route.pattern} returned ${String(price)}: a price must be more than 0`);
      if (maxAmount !== undefined && amountAtomic > maxAmount) throw new RangeError(`the price function of ${route.pattern} returned ${String(price)}, above its maxPrice ${String(config.maxPrice)}`);
    }
    const payTo = typeof config.payTo === 'function' ? await config.payTo(pricing) : config.payTo ?? this.settings.payTo;
    if (!/^0x[0-9a-fA-F]{40}$/.test(payTo)) throw new TypeError(`the payTo of ${route.pattern} is not an address: ${payTo}`);
    return { route, resource, amountAtomic, payTo };
  }

  private async redeem(charge: Charge, paymentHeader: string): Promise<PaywallOutcome> {
    if (charge.route.value.usage) return this.holdUsage(charge, paymentHeader);
    const checked = this.checkLocally(charge, paymentHeader);
    if (checked.kind === 'payment-required') return checked;
    const { version, request } = checked;
    const settle = charge.route.value.config.settle ?? 'after-handler';
    if (settle === 'after-handler' && this.facilitator.hold) return this.hold(charge, version, request);

    let result;
    try {
      result = await this.facilitator.redeem(request);
    } catch (error) {
      return unavailable(error);
    }
    if (!result.ok) return this.refuse(charge, result.reason, result.message);
    return this.paid(charge, version, result, 'before-handler');
  }

  /** The cheap checks before asking the facilitator: the header decodes and matches what was asked. */
  private checkLocally(charge: Charge, paymentHeader: string): PaymentRequiredOutcome | { kind: 'checked'; version: 1 | 2; request: RedeemRequest } {
    const challenge = this.challengeFor(charge);
    const decoded = decodePaymentHeader(paymentHeader);
    if (!decoded.ok) return this.refuse(charge, decoded.reason, decoded.message);
    const checked = checkPaymentAgainstRequirements(
      decoded,
      challenge.requirementV1!,
      challenge.requirementV2 as PaymentRequirementsV2,
      Math.floor(this.now() / 1000),
    );
    if (!checked.ok) return this.refuse(charge, checked.reason, checked.message);
    return {
      kind: 'checked',
      version: decoded.version,
      request: {
        paymentHeader,
        version: decoded.version,
        resource: charge.resource,
        amountAtomic: charge.amountAtomic,
        requirement: decoded.version === 1 ? challenge.requirementV1! : challenge.requirementV2,
      },
    };
  }

  /**
   * An upto route: the cheap checks of the permit against the 402 (the backend verifies the rest), then a
   * hold for the maximum while the handler runs; capture charges what the handler reported.
   */
  private async holdUsage(charge: Charge, paymentHeader: string): Promise<PaywallOutcome> {
    const challenge = this.challengeFor(charge) as UptoPaymentRequiredResponse & { kind: 'payment-required' };
    const requirement = challenge.requirementV2;
    const decoded = decodeUptoPaymentHeader(paymentHeader);
    if (!decoded.ok) return this.refuse(charge, decoded.reason, decoded.message);
    const { accepted, payload } = decoded.payload;
    const permit = payload.permit2Authorization;
    const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
    if (accepted.network !== requirement.network) return this.refuse(charge, 'network_mismatch', `payment is for network "${accepted.network}", expected "${requirement.network}"`);
    if (!same(accepted.asset, requirement.asset) || !same(permit.permitted.token, requirement.asset)) return this.refuse(charge, 'asset_mismatch', 'payment is for another asset');
    if (!same(accepted.payTo, requirement.payTo) || !same(permit.witness.to, requirement.payTo)) return this.refuse(charge, 'recipient_mismatch', 'payment is to another recipient');
    if (accepted.amount !== requirement.amount || permit.permitted.amount !== requirement.amount) {
      return this.refuse(charge, 'amount_mismatch', `the permit allows ${permit.permitted.amount}; this route asks to authorize exactly ${requirement.amount}`);
    }
    if (BigInt(permit.deadline) <= BigInt(Math.floor(this.now() / 1000))) return this.refuse(charge, 'authorization_expired', 'the permit\'s deadline is in the past');
    const facilitator = this.facilitator as Required<Facilitator>;
    let held;
    try {
      held = await facilitator.hold({ paymentHeader, version: 2, resource: charge.resource, amountAtomic: charge.amountAtomic, requirement, holdSeconds: charge.route.value.config.holdSeconds });
    } catch (error) {
      return unavailable(error);
    }
    if (!held.ok) return this.refuse(charge, held.reason, held.message);
    const { holdId, payer } = held;
    const { max, unreported } = charge.route.value.usage!;
    let reported: bigint | undefined;
    let capturing: Promise<PaidOutcome | PaymentRequiredOutcome | UnavailableOutcome> | undefined;
    let releasing: Promise<void> | undefined;
    const hold: HeldPayment = {
      payment: {
        version: 2, scheme: 'upto', paymentId: holdId, payer, settle: 'after-handler', network: toV1Network(this.settings.network),
        amountAtomic: max, maxAmountAtomic: max, payTo: charge.payTo, resource: charge.resource, pattern: charge.route.pattern,
        charge: (price: Price) => {
          if (capturing) throw new Error('this payment is already being settled: report usage before the response is sent');
          const amount = parseCharge(price);
          if (amount > max) throw new RangeError(`charge ${String(price)} is above this route's maximum of ${max} atomic units: the buyer did not allow it`);
          reported = amount;
        },
      },
      capture: () => (capturing ??= (async () => {
        const amountAtomic = reported ?? unreported;
        let result;
        try {
          result = await facilitator.capture(holdId, { amountAtomic });
        } catch (error) {
          return unavailable(error);
        }
        if (!result.ok) return this.refuse(charge, result.reason, result.message);
        return this.paid({ ...charge, amountAtomic }, 2, result, 'after-handler', max);
      })()),
      release: () => (releasing ??= facilitator.release(holdId).catch(() => {})),
    };
    return { kind: 'held', hold };
  }

  private async hold(charge: Charge, version: 1 | 2, request: RedeemRequest): Promise<PaywallOutcome> {
    const facilitator = this.facilitator as Required<Facilitator>;
    let held;
    try {
      held = await facilitator.hold({ ...request, holdSeconds: charge.route.value.config.holdSeconds });
    } catch (error) {
      return unavailable(error);
    }
    if (!held.ok) return this.refuse(charge, held.reason, held.message);
    const { holdId, payer } = held;
    let capturing: Promise<PaidOutcome | PaymentRequiredOutcome | UnavailableOutcome> | undefined;
    let releasing: Promise<void> | undefined;
    const hold: HeldPayment = {
      payment: {
        version, scheme: 'exact', paymentId: holdId, payer, settle: 'after-handler', network: toV1Network(this.settings.network),
        amountAtomic: charge.amountAtomic, payTo: charge.payTo, resource: charge.resource, pattern: charge.route.pattern, charge: exactCharge(charge.route.pattern),
      },
      capture: () => (capturing ??= (async () => {
        let result;
        try {
          result = await facilitator.capture(holdId);
        } catch (error) {
          return unavailable(error);
        }
        if (!result.ok) return this.refuse(charge, result.reason, result.message);
        return this.paid(charge, version, result, 'after-handler');
      })()),
      // A release that cannot reach the facilitator is not the buyer's problem: the hold expires by itself.
      release: () => (releasing ??= facilitator.release(holdId).catch(() => {})),
    };
    return { kind: 'held', hold };
  }

  private paid(charge: Charge, version: 1 | 2, result: Extract<RedeemResult, { ok: true }>, settle: SettleMode, maxAmountAtomic?: bigint): PaidOutcome {
    const { paymentResponse } = result;
    const network = toV1Network(paymentResponse.network);
    // Extensions (the offer-receipt extension's signed receipt) ride in both settlement headers; an upto
    // settlement says what it charged (`amount`), as the scheme's SettlementResponse does.
    const settlement = {
      success: true, transaction: paymentResponse.transaction, payer: paymentResponse.payer,
      ...(maxAmountAtomic !== undefined ? { amount: paymentResponse.amount ?? charge.amountAtomic.toString() } : {}),
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
        version,
        scheme: maxAmountAtomic === undefined ? 'exact' : 'upto',
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

  private challengeFor(charge: Charge): PaymentRequiredOutcome {
    const { route, resource } = charge;
    const cache = route.value.challenges;
    // A fixed price and payee: one challenge per resource. Otherwise per amount and payee too.
    const key = route.value.fixedAmount !== undefined && typeof route.value.config.payTo !== 'function' ? resource : `${resource}\n${charge.amountAtomic}\n${charge.payTo}`;
    let challenge = cache.get(key);
    if (challenge === undefined) {
      const build = route.value.usage ? buildUptoPaymentRequired : buildPaymentRequired;
      challenge = Object.freeze({ kind: 'payment-required' as const, ...build(this.settingsFor(charge), this.offer(charge)) });
      if (cache.size >= CHALLENGE_CACHE_LIMIT) cache.clear();
      cache.set(key, challenge);
    }
    return challenge;
  }

  private refuse(charge: Charge, reason: string, message: string): PaymentRequiredOutcome {
    if (reason === 'resource_not_registered' && !this.warnedUnregistered.has(charge.resource) && this.warnedUnregistered.size < CHALLENGE_CACHE_LIMIT) {
      this.warnedUnregistered.add(charge.resource);
      this.warn(`agentgate-x402: the backend refused a payment for ${charge.resource} (resource_not_registered): no endpoint of this seller is registered at that URL, so every buyer gets 402. Register it with syncEndpoints({ backendUrl, platformKey, publicOrigin, routes }) at start-up, or POST /v0/payments/endpoints with this exact URL (publicOrigin sets the origin buyers use).`);
    }
    const build = charge.route.value.usage ? buildUptoPaymentRequired : buildPaymentRequired;
    // An upto refusal names the maximum to authorize again, whatever was being charged.
    const offer = charge.route.value.usage ? { ...this.offer(charge), amountAtomic: charge.route.value.usage.max } : this.offer(charge);
    return { kind: 'payment-required', ...build(this.settingsFor(charge), offer, { reason, message }) };
  }

  private settingsFor(charge: Charge): SellerSettings {
    return charge.payTo === this.settings.payTo ? this.settings : { ...this.settings, payTo: charge.payTo };
  }

  private offer(charge: Charge) {
    const { config } = charge.route.value;
    return {
      amountAtomic: charge.amountAtomic,
      resource: charge.resource,
      description: config.description,
      mimeType: config.mimeType,
      maxTimeoutSeconds: config.maxTimeoutSeconds,
      outputSchema: config.outputSchema,
    };
  }
}

/** A usage price, checked once: a maximum above 0, a default charge within it, and a facilitator that can hold. */
function usageOf(pattern: string, config: RouteConfig, facilitator: Facilitator): { max: bigint; unreported: bigint } {
  const price = config.price as UsagePrice;
  const max = parseCharge(price.upto);
  if (max <= 0n) throw new RangeError(`route ${pattern}: an upto price must allow more than 0`);
  const unreported = price.unreported === undefined ? 0n : parseCharge(price.unreported);
  if (unreported > max) throw new RangeError(`route ${pattern}: its unreported charge is above its upto maximum`);
  if (config.settle === 'before-handler') throw new TypeError(`route ${pattern}: an upto price is settled after the handler (its usage is known only then); settle: 'before-handler' cannot apply`);
  if (config.maxPrice !== undefined) throw new TypeError(`route ${pattern}: an upto price is its own maximum; leave maxPrice out`);
  if (!facilitator.hold || !facilitator.capture || !facilitator.release) throw new TypeError(`route ${pattern}: an upto price needs a facilitator that holds and captures payments`);
  return { max, unreported };
}

/** `charge` of an exact route's payment: there is nothing to report. */
function exactCharge(pattern: string): (price: Price) => void {
  return () => { throw new TypeError(`route ${pattern} has a fixed price; charge() is for routes priced { upto: ... }`); };
}

/** Re-encodes a decoded canonical path for use inside a URL, one segment at a time. */
function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

function unavailable(error: unknown): UnavailableOutcome {
  const status = error instanceof FacilitatorUnavailable ? error.status : 502;
  const message = error instanceof FacilitatorUnavailable ? error.message : 'payment facilitator failed';
  return { kind: 'unavailable', status, body: { error: 'facilitator_unavailable', message, status } };
}

function reject(error: string, message: string): PaywallOutcome {
  return { kind: 'reject', status: 400, body: { error, message, status: 400 } };
}
