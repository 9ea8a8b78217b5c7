import type { Facilitator } from './facilitator.js';
import { parseCharge, parsePrice, paymentFlowOf, type Price } from 'agentgate-x402-wire';
import type { CompiledRoute } from './routes.js';
import type { PaymentRequiredOutcome, PaywallRequest, SettleMode } from './paywall-types.js';

// What a request to a paid route costs and to whom: the seller's route configuration, checked once at
// start-up into a priced route (a fixed price computed once, a usage price's bounds), and per request
// the amount and payee, asking the route's price and payee functions when it has them.

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

/** A route's Sign-In-With-X challenge (sign-in-with-x.ts). */
export interface SignInWithXOptions {
  /** Shown to the buyer in the message it signs. */
  readonly statement?: string;
  /** How long the challenge may be signed for (sets expirationTime); default 5 minutes, as the extension checks. */
  readonly expirationSeconds?: number;
}

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
  /**
   * `'auth-capture'`: the buyer's payment is authorized into escrow before the handler, captured after it
   * succeeded and voided after it failed (settled after the handler, always), and can be refunded later
   * (POST /v0/payments/{id}/refund). `'batch-settlement'`: a payment channel (the buyer deposits once and
   * signs a voucher per call, checked in milliseconds; agentgate claims many calls in one transaction).
   * Default `'exact'`; a price `{ upto }` is the upto scheme, or with `'batch-settlement'` a channel
   * charging each call what its handler reports (`payment.charge(...)`), at most `upto`.
   */
  readonly scheme?: 'exact' | 'auth-capture' | 'batch-settlement';
  /**
   * exact and batch-settlement: how the buyer's money moves. `'eip3009'` (the default): a USDC
   * transferWithAuthorization (a channel: its deposits by ReceiveWithAuthorization). `'permit2'` on an
   * exact route: a Permit2 witness transfer to the x402ExactPermit2Proxy (x402 v2 clients only); the 402
   * also offers the gas sponsoring extensions, so a buyer that never approved Permit2 pays without gas.
   * `'permit2'` on a batch-settlement route: the 402 asks for deposits through the Permit2 deposit
   * collector (`extra.assetTransferMethod`), for a buyer that approved Permit2.
   */
  readonly assetTransferMethod?: 'eip3009' | 'permit2';
  /** auth-capture: how long after the buyer may pay the capture stays possible (default 600 s). */
  readonly captureSeconds?: number;
  /** auth-capture: how long refunds stay possible (default 7 days). */
  readonly refundSeconds?: number;
  /** After-handler only: how long the handler may take before its hold expires (default 120 s, at most 900). */
  readonly holdSeconds?: number;
  readonly description?: string;
  readonly mimeType?: string;
  readonly maxTimeoutSeconds?: number;
  readonly outputSchema?: Record<string, unknown>;
  /**
   * Sign-In-With-X: a buyer who paid for this resource reaches it again by signing in with the paying
   * wallet (the 402 carries the extension's challenge; the official client's SIWX support answers it).
   */
  readonly signInWithX?: boolean | SignInWithXOptions;
  /**
   * ERC-8021 builder code of your app (1-32 of a-z 0-9 _): declared in the 402, echoed by the buyer's
   * client, appended to the settlement transaction by the facilitator.
   */
  readonly builderCode?: string;
}

/** A seller's route, priced once at start-up. */
export interface PricedRoute {
  /** The x402 scheme it is sold by: `exact` (a price, fixed or computed), `upto` (a price by usage), `auth-capture` (escrow) or `batch-settlement` (a payment channel). */
  readonly scheme: 'exact' | 'upto' | 'auth-capture' | 'batch-settlement';
  /** The price when it is fixed (computed once); undefined for a price function. */
  readonly fixedAmount: bigint | undefined;
  readonly maxAmount: bigint | undefined;
  /** A usage price: the maximum (also fixedAmount, what the 402 asks to authorize) and the charge when nothing is reported. */
  readonly usage: { readonly max: bigint; readonly unreported: bigint } | undefined;
  readonly config: RouteConfig;
  /** Its x402 v2 payment flow (payment-flow.ts): what `settle` and the facilitator make of it. */
  readonly paymentFlow: 'authorization' | 'upfront';
  /**
   * Ready 402 responses per resource URL (and, for a dynamic price or payee, per amount and payee);
   * bounded because Host, dynamic paths and prices are client-chosen.
   */
  readonly challenges: Map<string, PaymentRequiredOutcome>;
}

/** What one request costs and to whom: the route, the resource URL, the amount and the payee. */
export interface Charge {
  readonly route: CompiledRoute<PricedRoute>;
  readonly resource: string;
  readonly amountAtomic: bigint;
  readonly payTo: string;
}

/** A route's configuration checked and priced once; a bad price fails at start-up, not on a request. */
export function pricedRoute(pattern: string, config: RouteConfig, facilitator: Facilitator): PricedRoute {
  const channel = config.scheme === 'batch-settlement';
  const usage = isUsagePrice(config.price) ? usageOf(pattern, config, facilitator, channel) : undefined;
  if (config.builderCode !== undefined && !/^[a-z0-9_]{1,32}$/.test(config.builderCode)) {
    throw new TypeError(`route ${pattern}: builderCode must be 1-32 lowercase letters, digits or _ (ERC-8021)`);
  }
  if (config.assetTransferMethod !== undefined && !['eip3009', 'permit2'].includes(config.assetTransferMethod)) throw new TypeError(`route ${pattern}: assetTransferMethod is 'eip3009' or 'permit2'`);
  if (config.assetTransferMethod === 'permit2' && !channel && (usage || (config.scheme ?? 'exact') !== 'exact')) throw new TypeError(`route ${pattern}: assetTransferMethod 'permit2' is for exact routes and batch-settlement routes (an upto price always goes through Permit2)`);
  if (config.scheme === 'auth-capture') escrowOf(pattern, config, facilitator, usage !== undefined);
  if (channel) channelRouteCheck(pattern, config, facilitator);
  return {
    // A price by usage is the upto scheme, or a channel's (batch-settlement charges each call up to its voucher).
    scheme: usage && !channel ? 'upto' : config.scheme ?? 'exact',
    fixedAmount: usage ? usage.max : typeof config.price === 'function' ? undefined : parsePrice(config.price as Price),
    maxAmount: config.maxPrice === undefined ? undefined : parsePrice(config.maxPrice),
    usage,
    config,
    // A usage price is settled after the handler by a facilitator that holds (usageOf checks both).
    paymentFlow: usage ? 'authorization' : paymentFlowOf(config.settle ?? 'after-handler', Boolean(facilitator.hold)),
    challenges: new Map(),
  };
}

/** What this request costs and to whom when the route's price and payee are fixed: nothing to ask per request. */
export function fixedCharge(route: CompiledRoute<PricedRoute>, resource: string, defaultPayTo: string): Charge | undefined {
  const { fixedAmount, config } = route.value;
  if (fixedAmount === undefined || typeof config.payTo === 'function') return undefined;
  return { route, resource, amountAtomic: fixedAmount, payTo: config.payTo ?? defaultPayTo };
}

/** Runs the route's price and payee functions for this request; their answer is checked like a static one. */
export async function chargeFor(route: CompiledRoute<PricedRoute>, resource: string, request: PaywallRequest, path: string, defaultPayTo: string): Promise<Charge> {
  const { fixedAmount, maxAmount, config } = route.value;
  const pricing: PricingRequest = { ...request, path, query: new URL(request.url, 'http://x').searchParams };
  let amountAtomic = fixedAmount;
  if (amountAtomic === undefined) {
    const price = await (config.price as PriceFunction)(pricing);
    amountAtomic = parsePrice(price);
    if (amountAtomic <= 0n) throw new RangeError(`the price function of ${route.pattern} returned ${String(price)}: a price must be more than 0`);
    if (maxAmount !== undefined && amountAtomic > maxAmount) throw new RangeError(`the price function of ${route.pattern} returned ${String(price)}, above its maxPrice ${String(config.maxPrice)}`);
  }
  const payTo = typeof config.payTo === 'function' ? await config.payTo(pricing) : config.payTo ?? defaultPayTo;
  if (!/^0x[0-9a-fA-F]{40}$/.test(payTo)) throw new TypeError(`the payTo of ${route.pattern} is not an address: ${payTo}`);
  return { route, resource, amountAtomic, payTo };
}

/** A channel route, checked once: a price per call or by usage, through a facilitator that takes vouchers. */
function channelRouteCheck(pattern: string, config: RouteConfig, facilitator: Facilitator): void {
  if (!facilitator.channelPay) throw new TypeError(`route ${pattern}: a batch-settlement route needs a facilitator that takes channel payments (the agentgate backend)`);
  if (config.settle === 'after-handler' && (!facilitator.channelCapture || !facilitator.channelRelease)) throw new TypeError(`route ${pattern}: settle: 'after-handler' needs a facilitator that holds channel calls`);
}

/**
 * A usage price, checked once: a maximum above 0, a default charge within it, and a facilitator that can
 * hold (a channel route's: hold its calls' vouchers, and capture them for what they used).
 */
function usageOf(pattern: string, config: RouteConfig, facilitator: Facilitator, channel: boolean): { max: bigint; unreported: bigint } {
  const price = config.price as UsagePrice;
  const max = parseCharge(price.upto);
  if (max <= 0n) throw new RangeError(`route ${pattern}: an upto price must allow more than 0`);
  const unreported = price.unreported === undefined ? 0n : parseCharge(price.unreported);
  if (unreported > max) throw new RangeError(`route ${pattern}: its unreported charge is above its upto maximum`);
  if (config.settle === 'before-handler') throw new TypeError(`route ${pattern}: an upto price is settled after the handler (its usage is known only then); settle: 'before-handler' cannot apply`);
  if (config.maxPrice !== undefined) throw new TypeError(`route ${pattern}: an upto price is its own maximum; leave maxPrice out`);
  if (channel ? !facilitator.channelCapture || !facilitator.channelRelease : !facilitator.hold || !facilitator.capture || !facilitator.release) throw new TypeError(`route ${pattern}: an upto price needs a facilitator that holds and captures payments`);
  return { max, unreported };
}

/** An auth-capture route, checked once: a price (not a usage price), settled after the handler, a facilitator that holds. */
function escrowOf(pattern: string, config: RouteConfig, facilitator: Facilitator, byUsage: boolean): void {
  if (byUsage) throw new TypeError(`route ${pattern}: an auth-capture route has a price, not { upto }`);
  if (config.settle === 'before-handler') throw new TypeError(`route ${pattern}: an auth-capture payment is captured after the handler succeeded (and voided if it failed); settle: 'before-handler' cannot apply`);
  for (const [name, value] of [['captureSeconds', config.captureSeconds], ['refundSeconds', config.refundSeconds]] as const) {
    if (value !== undefined && (!Number.isInteger(value) || value < 60)) throw new RangeError(`route ${pattern}: ${name} must be a whole number of seconds, at least 60`);
  }
  if (!facilitator.hold || !facilitator.capture || !facilitator.release) throw new TypeError(`route ${pattern}: an auth-capture route needs a facilitator that holds and captures payments`);
}
