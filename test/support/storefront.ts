/**
 * A seller's storefront, as production needs one before it can register a URL: an Express app with our
 * payment middleware (the seller's key, this backend) listening on loopback, each route priced as it is
 * registered, and each route registered with POST /v0/payments/endpoints, which fetches the URL and checks
 * its 402 (no `skipUrlCheck`). A test that then pays or redeems against the backend directly uses the
 * storefront's resource URLs (`http://127.0.0.1:<port>/<path>`), as a buyer of that seller would.
 *
 * Every storefront is closed after the test file's tests (or earlier by `close()`).
 */
import express, { type RequestHandler } from 'express';
import { paymentMiddleware } from '../../adapters/express.js';
import { isUsagePrice, type RouteConfig } from '../../middleware/paywall.js';
import { formatUsdc, parsePrice, type Price } from 'agentgate-x402-wire';
import { serve, type RunningApp } from '../interop/seller.js';
import type { TestServer } from './server.js';

/** What a seller registers with a route besides its URL and price (the fields of POST /v0/payments/endpoints). */
export interface EndpointFields {
  /** The method the backend's URL check asks with (a route answering only POST). */
  method?: string;
  description?: string;
  webhookUrl?: string;
  discoverable?: boolean;
  inputSchema?: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
}

/** A route of the storefront: the middleware's route config, and what is registered with it. */
export type StorefrontRoute = RouteConfig & { endpoint?: EndpointFields };

export interface RegisteredEndpoint { id: string; url: string; webhookSecret?: string }

/** A storefront listening, its routes not registered yet. */
export interface RunningStorefront extends RunningApp {
  /** The URL of `path` on this storefront: the resource buyers pay for and the endpoint registered. */
  resource(path: string): string;
}

/** A storefront whose routes are registered. */
export interface Storefront extends RunningStorefront {
  /** The endpoint registered for `path` (its id, and the webhook secret shown once when a webhook was given). */
  endpoint(path: string): RegisteredEndpoint;
}

const open = new Set<RunningApp>();
// A module of the test support is loaded inside a jest test file, where afterAll is a global; bench/ loads
// some of these modules under plain Node, where it is not.
if (typeof afterAll === 'function') afterAll(async () => { await Promise.all([...open].map((s) => s.close())); });

/**
 * Starts a storefront selling `routes` (`{ 'GET /weather': { price: '$0.01' } }`, literal paths) with the
 * seller's key, without registering them: for a test that registers them itself (the console's form).
 * Every route answers `200 {"path": ...}` once paid, or what `handler` answers.
 */
export async function startStorefront(backendUrl: string, sellerKey: string, routes: Record<string, StorefrontRoute>, options: { handler?: RequestHandler } = {}): Promise<RunningStorefront> {
  const middlewareRoutes = Object.fromEntries(Object.entries(routes).map(([pattern, { endpoint: _fields, ...config }]) => [pattern, config]));
  const app = express();
  app.use(paymentMiddleware({ backendUrl, apiKey: sellerKey, routes: middlewareRoutes }));
  const handler: RequestHandler = options.handler ?? ((req, res) => { res.json({ path: req.path }); });
  for (const pattern of Object.keys(routes)) {
    const { method, path } = splitPattern(pattern);
    if (method) app[method](path, handler);
    else app.all(path, handler);
  }
  const running = await serve(app);
  open.add(running);
  return {
    url: running.url,
    resource: (path) => `${running.url}${path}`,
    async close() {
      if (open.delete(running)) await running.close();
    },
  };
}

/**
 * Starts a storefront (startStorefront) and registers each route at its price: a fixed price as
 * `priceUsdc`, a usage price (`{ upto }`) or a price function (with its `maxPrice`) as `maxPriceUsdc`,
 * with the route's `endpoint` fields. The seller key is issued here when the seller has none yet.
 */
export async function openStorefront(
  server: Pick<TestServer, 'url' | 'request'>,
  seller: { platformKey: string; sellerKey?: string },
  routes: Record<string, StorefrontRoute>,
  options: { handler?: RequestHandler } = {},
): Promise<Storefront> {
  const sellerKey = seller.sellerKey ?? await issueSellerKey(server, seller.platformKey);
  const shop = await startStorefront(server.url, sellerKey, routes, options);
  const registered = new Map<string, RegisteredEndpoint>();
  try {
    for (const [pattern, route] of Object.entries(routes)) {
      const { path } = splitPattern(pattern);
      const url = shop.resource(path);
      const res = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url, ...registeredPrice(route), ...route.endpoint } });
      if (res.status !== 201) throw new Error(`registering ${url}: ${res.status} ${res.text}`);
      registered.set(path, { id: res.body.id, url: res.body.url, ...(res.body.webhookSecret ? { webhookSecret: res.body.webhookSecret } : {}) });
    }
  } catch (err) {
    await shop.close();
    throw err;
  }
  return {
    ...shop,
    endpoint: (path) => {
      const found = registered.get(path);
      if (!found) throw new Error(`the storefront sells no route at ${path}`);
      return found;
    },
  };
}

/** `GET /weather` -> get, /weather; `/weather` (every method) -> no method. */
function splitPattern(pattern: string): { method?: 'get' | 'post' | 'put' | 'delete' | 'patch'; path: string } {
  const [first, second] = pattern.trim().split(/\s+/);
  if (second === undefined) return { path: first! };
  return { method: first!.toLowerCase() as 'get', path: second };
}

/** The price a route is registered at, as syncEndpoints registers it. */
function registeredPrice(route: RouteConfig): { priceUsdc: string } | { maxPriceUsdc: string } {
  if (isUsagePrice(route.price)) return { maxPriceUsdc: formatUsdc(parsePrice(route.price.upto)) };
  if (typeof route.price === 'function') {
    if (route.maxPrice === undefined) throw new TypeError('a route priced by a function is registered by its maxPrice');
    return { maxPriceUsdc: formatUsdc(parsePrice(route.maxPrice)) };
  }
  return { priceUsdc: formatUsdc(parsePrice(route.price as Price)) };
}

async function issueSellerKey(server: Pick<TestServer, 'request'>, platformKey: string): Promise<string> {
  const res = await server.request('POST', '/v0/payments/seller-keys', { key: platformKey, body: {} });
  if (res.status !== 201) throw new Error(`seller key: ${res.status} ${res.text}`);
  return res.body.apiKey;
}
