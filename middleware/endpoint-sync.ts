import { z } from 'zod';
import { backendCall, unexpectedAnswer, type BackendConnection } from './backend-http.js';
import { canonicalLoopback, formatUsdc, parsePrice, parseResource, type Price } from 'agentgate-x402-wire';
import { isUsagePrice, type RouteConfig } from './paywall.js';
import { parsePublicOrigin } from './request-origin.js';
import { compileRoute } from './routes.js';

export interface SyncEndpointsOptions extends Omit<BackendConnection, 'apiKey'> {
  /** The org's platform key: only it may register and change endpoints (a seller key cannot). */
  readonly platformKey: string;
  /**
   * The origin buyers reach the seller at, e.g. "https://api.example.com" or "http://localhost:5055":
   * the same origin the middleware puts in its challenges (its `publicOrigin`, or the request's Host).
   */
  readonly publicOrigin: string;
  /** The middleware's route table, as passed to paymentMiddleware. */
  readonly routes: Readonly<Record<string, RouteConfig>>;
  /**
   * Ask the backend not to fetch each new URL for its 402 (accepted in dev mode only). Without it the
   * seller must already be listening, because the backend checks the challenge at registration.
   */
  readonly skipUrlCheck?: boolean;
}

export interface SyncedEndpoint {
  readonly id: string;
  /** As the backend stores it (in dev, possibly another loopback spelling of the route's URL). */
  readonly url: string;
  readonly priceUsdc: string;
  readonly description: string;
  /** The route patterns this endpoint serves. */
  readonly patterns: readonly string[];
}

export interface EndpointSyncReport {
  readonly created: readonly SyncedEndpoint[];
  readonly updated: readonly SyncedEndpoint[];
  readonly unchanged: readonly SyncedEndpoint[];
  /** Patterns with parameters or wildcards: the backend registers exact URLs, so they cannot be synced. */
  readonly skipped: readonly { readonly pattern: string; readonly reason: string }[];
}

const EndpointSchema = z.looseObject({ id: z.string(), url: z.string(), priceUsdc: z.string(), pricing: z.enum(['fixed', 'dynamic']).optional(), description: z.string().nullish() });
const EndpointListSchema = z.object({ endpoints: z.array(EndpointSchema) });
type Endpoint = z.infer<typeof EndpointSchema>;

/** What a URL should be registered at: a fixed price, or (dynamic) the most a request may cost. */
interface Target { url: string; amountAtomic: bigint; dynamic: boolean; description: string | undefined; patterns: string[]; methods: Array<string | undefined> }

/**
 * Brings the backend's endpoint registry in line with the seller's route table, at start-up: a literal
 * route with no endpoint is registered with its price and description, an endpoint whose price (or
 * given description) differs is updated, and nothing else is touched. Endpoints that no route names
 * are left alone, never deleted: an org may sell other URLs from other servers, and a sync that removed
 * them would silently stop their sales. Running it again changes nothing (everything is `unchanged`).
 *
 * The library refuses nothing itself: whether a URL may be registered (private and loopback addresses
 * only in dev mode, the URL answering this seller's 402) is the backend's decision, and its refusal
 * arrives as a BackendRequestError naming the URL. `skipUrlCheck` is sent only when asked for.
 * Matching with the backend's list treats loopback hosts as one (as the backend does in dev mode; in
 * production no loopback endpoint exists), and scheme and host case-insensitively.
 */
export async function syncEndpoints(options: SyncEndpointsOptions): Promise<EndpointSyncReport> {
  const { platformKey, publicOrigin, routes, skipUrlCheck, ...connection } = options;
  const call = backendCall({ ...connection, apiKey: platformKey });
  const { targets, skipped } = targetsOf(parsePublicOrigin(publicOrigin), routes);

  const listed = await call('GET', '/v0/payments/endpoints');
  if (listed.status !== 200) unexpectedAnswer(listed.status, listed.json, 'listing endpoints');
  const list = EndpointListSchema.safeParse(listed.json);
  if (!list.success) unexpectedAnswer(listed.status, listed.json, 'listing endpoints');
  const existing = new Map(list.data.endpoints.map((e) => [matchKey(e.url), e] as const));

  const created: SyncedEndpoint[] = [];
  const updated: SyncedEndpoint[] = [];
  const unchanged: SyncedEndpoint[] = [];
  for (const target of targets) {
    const found = existing.get(matchKey(target.url));
    const priceField = target.dynamic ? 'maxPriceUsdc' : 'priceUsdc';
    if (!found) {
      const method = checkMethod(target.methods);
      const body = { url: target.url, [priceField]: formatUsdc(target.amountAtomic), ...(method !== 'GET' ? { method } : {}), ...(target.description !== undefined ? { description: target.description } : {}), ...(skipUrlCheck ? { skipUrlCheck: true } : {}) };
      created.push(synced(await send(call, 'POST', '/v0/payments/endpoints', body, 201, target.url), target));
      continue;
    }
    const change = {
      ...(priceOf(found) !== target.amountAtomic || (found.pricing === 'dynamic') !== target.dynamic ? { [priceField]: formatUsdc(target.amountAtomic) } : {}),
      ...(target.description !== undefined && target.description !== (found.description ?? '') ? { description: target.description } : {}),
    };
    if (Object.keys(change).length === 0) {
      unchanged.push(synced(found, target));
      continue;
    }
    updated.push(synced(await send(call, 'PATCH', `/v0/payments/endpoints/${encodeURIComponent(found.id)}`, change, 200, target.url), target));
  }
  return { created, updated, unchanged, skipped };
}

/**
 * The method the backend checks a URL's 402 with: GET where a route answers it (or any method), else the
 * route's own (a route that answers only POST answers GET with whatever the app does, not our 402).
 */
function checkMethod(methods: Array<string | undefined>): string {
  return methods.some((m) => m === undefined || m === 'GET') ? 'GET' : methods[0]!;
}

/** One endpoint per URL; two patterns on one path (GET and POST /x) must agree on the price, which the backend keeps per URL. */
function targetsOf(origin: string, routes: Readonly<Record<string, RouteConfig>>): { targets: Target[]; skipped: { pattern: string; reason: string }[] } {
  const byUrl = new Map<string, Target>();
  const skipped: { pattern: string; reason: string }[] = [];
  for (const [pattern, config] of Object.entries(routes)) {
    const route = compileRoute(pattern, config);
    if (!route.literal) {
      skipped.push({ pattern, reason: 'has parameters or a wildcard; register each exact URL it serves' });
      continue;
    }
    // Exactly the resource the Paywall puts in its challenge for this route.
    const url = origin + route.path;
    // A price function is registered by its cap: the backend settles what each request was asked, up to it.
    // A usage price (upto) is registered by its maximum, as a dynamic one: each request is charged what it used.
    const usage = isUsagePrice(config.price) ? config.price : undefined;
    const dynamic = typeof config.price === 'function' || usage !== undefined;
    if (typeof config.price === 'function' && config.maxPrice === undefined) {
      skipped.push({ pattern, reason: 'its price is a function: give maxPrice to register it (the most one request may cost)' });
      continue;
    }
    const amountAtomic = parsePrice(usage ? usage.upto : typeof config.price === 'function' ? config.maxPrice! : config.price as Price);
    const same = byUrl.get(matchKey(url));
    if (same && (same.amountAtomic !== amountAtomic || same.dynamic !== dynamic)) {
      throw new TypeError(`routes ${same.patterns.join(', ')} and ${pattern} share ${url} at different prices; the backend keeps one price per URL`);
    }
    if (same) { same.patterns.push(pattern); same.methods.push(route.method); }
    else byUrl.set(matchKey(url), { url, amountAtomic, dynamic, description: config.description, patterns: [pattern], methods: [route.method] });
  }
  return { targets: [...byUrl.values()], skipped };
}

async function send(call: ReturnType<typeof backendCall>, method: 'POST' | 'PATCH', path: string, body: unknown, expected: number, url: string): Promise<Endpoint> {
  const answer = await call(method, path, body);
  if (answer.status !== expected) unexpectedAnswer(answer.status, answer.json, `${method === 'POST' ? 'registering' : 'updating'} ${url}`);
  const parsed = EndpointSchema.safeParse(answer.json);
  if (!parsed.success) unexpectedAnswer(answer.status, answer.json, url);
  return parsed.data;
}

function synced(endpoint: Endpoint, target: Target): SyncedEndpoint {
  return { id: endpoint.id, url: endpoint.url, priceUsdc: endpoint.priceUsdc, description: endpoint.description ?? '', patterns: target.patterns };
}

/** An endpoint whose stored price does not parse can only be out of date: treat it as different. */
function priceOf(endpoint: Endpoint): bigint | undefined {
  try {
    return parsePrice(endpoint.priceUsdc);
  } catch {
    return undefined;
  }
}

/** How the backend compares URLs (its own normalization, shared in resource-url.ts), loopback hosts as one. */
function matchKey(url: string): string {
  const parsed = parseResource(url);
  return canonicalLoopback(parsed.ok ? parsed.resource : url);
}
