import { canonicalizePath, type PathRejection } from './canonical-path.js';
import type { Facilitator } from './facilitator.js';
import { parseSellerSettings, type SellerSettings, toV1Network } from 'agentgate-x402-wire';
import { parsePublicOrigin, resolveOrigin } from './request-origin.js';
import { RouteTable } from './routes.js';
import { PASS, reject, unavailable, type PaywallOutcome, type PaywallRequest } from './paywall-types.js';
import { chargeFor, fixedCharge, pricedRoute, type PricedRoute, type RouteConfig } from './route-pricing.js';
import { PaymentChallenges } from './payment-required.js';
import type { SellerScheme } from './schemes/seller-scheme.js';
import { ExactPayment } from './schemes/exact/evm/seller.js';
import { ExactSvmPayment } from './schemes/exact/svm/seller.js';
import { UptoPayment } from './schemes/upto/evm/seller.js';
import { SIWX_HEADER, signIn, withSignInChallenge } from './sign-in-with-x.js';
import { AuthCapturePayment } from './schemes/auth-capture/evm/seller.js';
import { BatchSettlementPayment } from './schemes/batch-settlement/evm/seller.js';

// The x402 seller core's flow, the same for every framework: the request's path made canonical, its
// route found, its price and payee worked out (route-pricing.ts), then the 402 (payment-required.ts) or
// the payment through the route's scheme (schemes/<scheme>/evm/seller.ts). An adapter turns a request
// into a PaywallRequest and acts on the PaywallOutcome (paywall-types.ts); nothing here knows a framework.

export type {
  ErrorBody,
  HeldPayment,
  PaidOutcome,
  PaymentRequiredOutcome,
  PaywallOutcome,
  PaywallRequest,
  RequestPayment,
  SettledPayment,
  SettleMode,
  UnavailableOutcome,
} from './paywall-types.js';
export { isUsagePrice } from './route-pricing.js';
export type { PayToFunction, PriceFunction, PricingRequest, RouteConfig, UsagePrice } from './route-pricing.js';

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
   * Where the paywall says what the seller must fix (default `console.warn`): once per resource URL, that
   * the backend refused a payment because the URL is not a registered endpoint (the buyer only sees a 402;
   * without this line the seller saw nothing at all); and a channel call whose capture, sent after its
   * answer, could not be written before its hold ran out (that call went uncharged).
   */
  readonly warn?: (message: string) => void;
}

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
  private readonly settings: SellerSettings;
  private readonly trustProxy: boolean;
  private readonly publicOrigin: string | undefined;
  private readonly challenges: PaymentChallenges;
  /** Each scheme's seller-side flow, by the scheme a route is sold by. */
  private readonly schemes: Readonly<Record<PricedRoute['scheme'], SellerScheme>>;
  private readonly facilitator: Facilitator;

  constructor(options: PaywallOptions) {
    this.settings = parseSellerSettings(options.settings);
    this.trustProxy = options.trustProxy ?? false;
    this.publicOrigin = options.publicOrigin === undefined ? undefined : parsePublicOrigin(options.publicOrigin);
    const warn = options.warn ?? ((message: string) => console.warn(message));
    this.challenges = new PaymentChallenges(this.settings, warn, options.now ?? Date.now);
    const deps = { facilitator: options.facilitator, challenges: this.challenges, network: toV1Network(this.settings.network), now: options.now ?? Date.now, warn };
    this.schemes = { exact: new ExactPayment(deps, this.settings.solanaNetworks?.length ? new ExactSvmPayment(deps) : undefined), upto: new UptoPayment(deps), 'auth-capture': new AuthCapturePayment(deps), 'batch-settlement': new BatchSettlementPayment(deps) };
    this.facilitator = options.facilitator;
    this.table = new RouteTable(
      Object.entries(options.routes).map(([pattern, config]) => [pattern, pricedRoute(pattern, config, options.facilitator)] as const),
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
    // A fixed price and payee cost nothing per request; a function is asked for this one.
    const charge = fixedCharge(route, resource, this.settings.payTo) ?? await chargeFor(route, resource, request, canonical.path, this.settings.payTo);

    const siwx = route.value.config.signInWithX;
    if (siwx) {
      // Signed in with the wallet that paid before: served as paid, nothing charged. Otherwise (no header,
      // or not granted) the route asks for payment as usual.
      const header = request.headers[SIWX_HEADER];
      if (header) {
        const signedIn = await signIn(this.facilitator, header, charge, this.settings.network).catch((error: unknown) => unavailable(error));
        if (signedIn) return signedIn;
      }
    }
    const paymentHeader = request.headers['payment-signature'] ?? request.headers['x-payment'];
    if (paymentHeader === undefined || paymentHeader === '') {
      const challenge = this.challenges.challengeFor(charge);
      return siwx ? withSignInChallenge(challenge, resource, this.settings.network, siwx === true ? {} : siwx) : challenge;
    }
    return this.schemes[route.value.scheme].pay(charge, paymentHeader);
  }
}

/** Re-encodes a decoded canonical path for use inside a URL, one segment at a time. */
function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}
