import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { TestServer } from './server.js';
import { signUp } from './agents.js';
import { openStorefront } from './storefront.js';

export interface TestSeller { platformKey: string; sellerKey: string; payTo: Address; resource: string }

/**
 * A seller that accepts payments to a fresh address and has `resource` registered at `priceUsdc` (or, sold
 * by usage, at most `maxPriceUsdc`). An HTTP resource is the seller's storefront (`GET /batched` behind our
 * middleware, test/support/storefront.ts), registered as production registers it: the backend fetches its
 * 402. An MCP tool (`resource: 'mcp://tool/<name>'`) is registered as it is, since there is no URL to fetch.
 */
export async function setUpSeller(server: Pick<TestServer, 'url' | 'request'>, options: { resource?: `mcp://tool/${string}`; priceUsdc?: string; maxPriceUsdc?: string; webhookUrl?: string } = {}): Promise<TestSeller> {
  const agent = await signUp(server as TestServer);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  const ok = (res: { status: number; text: string }, status: number) => { if (res.status !== status) throw new Error(`seller set-up: ${res.status} ${res.text}`); };
  ok(await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } }), 200);
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} });
  ok(key, 201);
  const seller = { platformKey: agent.platform_key, sellerKey: key.body.apiKey as string, payTo };
  const webhook = options.webhookUrl ? { webhookUrl: options.webhookUrl } : {};
  if (options.resource) {
    const price = options.maxPriceUsdc ? { maxPriceUsdc: options.maxPriceUsdc } : { priceUsdc: options.priceUsdc ?? '0.01' };
    ok(await server.request('POST', '/v0/payments/endpoints', { key: agent.platform_key, body: { url: options.resource, ...price, ...webhook } }), 201);
    return { ...seller, resource: options.resource };
  }
  const price = options.maxPriceUsdc ? { upto: options.maxPriceUsdc } : options.priceUsdc ?? '0.01';
  const shop = await openStorefront(server, seller, { 'GET /batched': { price, endpoint: webhook } });
  return { ...seller, resource: shop.resource('/batched') };
}

/** POST /v0/payments/redeem as the seller's middleware does. */
export async function redeem(url: string, seller: TestSeller, paymentHeader: string, init: { signal?: AbortSignal; amount?: string } = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(`${url}/v0/payments/redeem`, {
    method: 'POST', signal: init.signal,
    headers: { authorization: `Bearer ${seller.sellerKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ paymentHeader, resource: seller.resource, amount: init.amount ?? '0.01' }),
  });
  return { status: res.status, body: await res.json() as any };
}
