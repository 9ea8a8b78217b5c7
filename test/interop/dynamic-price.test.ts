// Prices and payees per request, on the real backend and chain: the example seller's /forecast?days=N is
// priced $0.01 a day (registered as at most $0.07); the buyer is asked, signs and pays the price of its
// request; a payment for another request's price is refused; a price function above its cap is a seller
// error (500), and the backend refuses an amount above the registered cap whatever the middleware says. A
// marketplace route pays each vendor (one of the seller's payees); a payee the seller did not list is refused.
import express from 'express';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createWeatherApp } from '../../examples/express-seller/server.js';
import { createWeatherApp as createKoaApp } from '../../examples/koa-seller/server.js';
import { createWeatherApp as createHonoApp } from '../../examples/hono-seller/server.js';
import { createWeatherApp as createFastifyApp } from '../../examples/fastify-seller/server.js';
import { WEATHER_ROUTES } from '../../examples/weather.js';
import { payWithV2 } from '../../examples/buyer/buyer.js';
import { paymentMiddleware } from '../../adapters/express.js';
import { syncEndpoints } from '../../middleware/index.js';
import type { PricingRequest } from '../../middleware/paywall.js';
import { DEV_CHAIN_ID } from '../../server/dev/chain/dev-chain.js';
import { fundedBuyer, paymentHeaderV1, sendUsdc, signAuthorization, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { serve, setUpSeller, type RunningApp } from './seller.js';

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let shop: RunningApp;

beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
  shop = await serve(createWeatherApp({ backendUrl: server.url, apiKey: seller.sellerKey }));
  // The example registers its table at start-up; /forecast goes in by its cap.
  const report = await syncEndpoints({ backendUrl: server.url, platformKey: seller.platformKey, publicOrigin: shop.url, routes: WEATHER_ROUTES });
  expect(report.created.map((e) => [e.url, e.priceUsdc])).toEqual([[`${shop.url}/weather`, '0.01'], [`${shop.url}/forecast`, '0.07']]);
}, 60_000);
afterAll(async () => {
  await shop?.close();
  await server?.close();
});

const challenge = async (url: string) => {
  const res = await fetch(url);
  expect(res.status).toBe(402);
  return (await res.json()) as { accepts: Array<{ maxAmountRequired: string; payTo: string }> };
};

it('a 402 asks each request for its own price, and the registered endpoint is dynamic up to its cap', async () => {
  expect((await challenge(`${shop.url}/forecast`)).accepts[0]!.maxAmountRequired).toBe('10000');
  expect((await challenge(`${shop.url}/forecast?days=3`)).accepts[0]!.maxAmountRequired).toBe('30000');
  expect((await challenge(`${shop.url}/forecast?days=30`)).accepts[0]!.maxAmountRequired).toBe('70000');
  const endpoints = (await server.request('GET', '/v0/payments/endpoints', { key: seller.platformKey })).body.endpoints;
  expect(endpoints.find((e: any) => e.url.endsWith('/forecast'))).toMatchObject({ pricing: 'dynamic', priceUsdc: '0.07' });
  expect(endpoints.find((e: any) => e.url.endsWith('/weather'))).toMatchObject({ pricing: 'fixed', priceUsdc: '0.01' });
});

it('the official v2 client pays the price of its request: 3 days cost $0.03', async () => {
  const key = generatePrivateKey();
  const payer = privateKeyToAccount(key);
  await sendUsdc(payer.address, 1_000_000n);
  const before = await usdcBalance(seller.payTo);
  const paid = await payWithV2(`${shop.url}/forecast?days=3&city=Oslo`, key, { chainId: DEV_CHAIN_ID, address: testChain().usdc });
  expect(paid.status).toBe(200);
  expect((paid.body as { days: unknown[] }).days).toHaveLength(3);
  expect(await usdcBalance(seller.payTo)).toBe(before + 30_000n);
  expect(await usdcBalance(payer.address)).toBe(1_000_000n - 30_000n);
});

// Every example registers the whole WEATHER_ROUTES table, /forecast included, so every one must serve it:
// a 402 for a route the app then answers 404 (Hono and Fastify once did) asks buyers to pay for nothing.
describe.each([
  ['Koa', createKoaApp],
  ['Hono', createHonoApp],
  ['Fastify', createFastifyApp],
] as const)('the %s example', (_framework, create) => {
  let app: RunningApp;
  beforeAll(async () => {
    app = await serve(create({ backendUrl: server.url, apiKey: seller.sellerKey }));
    await syncEndpoints({ backendUrl: server.url, platformKey: seller.platformKey, publicOrigin: app.url, routes: WEATHER_ROUTES });
  });
  afterAll(async () => { await app?.close(); });

  it('serves /forecast?days=3 to a buyer who paid $0.03 for it', async () => {
    const buyer = await fundedBuyer('1');
    expect((await challenge(`${app.url}/forecast?days=3`)).accepts[0]!.maxAmountRequired).toBe('30000');
    const before = await usdcBalance(seller.payTo);
    const res = await fetch(`${app.url}/forecast?days=3&city=Oslo`, { headers: { 'X-Payment': paymentHeaderV1(await signAuthorization(buyer, { to: seller.payTo, value: 30_000n })) } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ city: 'Oslo', days: [{ day: 0 }, { day: 1 }, { day: 2 }], paidBy: buyer.address });
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n - 30_000n);
    expect(await usdcBalance(seller.payTo)).toBe(before + 30_000n);
  });
});

it('a payment signed for one request\'s price does not buy a dearer request', async () => {
  const buyer = await fundedBuyer('1');
  const oneDay = paymentHeaderV1(await signAuthorization(buyer, { to: seller.payTo, value: 10_000n }));
  const res = await fetch(`${shop.url}/forecast?days=5`, { headers: { 'X-Payment': oneDay } });
  expect(res.status).toBe(402);
  expect(((await res.json()) as { error: string }).error).toMatch(/amount|value/);
  expect(await usdcBalance(buyer.address)).toBe(1_000_000n);
  // The same payment buys the one-day forecast it was signed for.
  expect((await fetch(`${shop.url}/forecast?days=1`, { headers: { 'X-Payment': oneDay } })).status).toBe(200);
  expect(await usdcBalance(buyer.address)).toBe(1_000_000n - 10_000n);
});

it('the backend settles a dynamic price up to the registered cap only, whatever the middleware asks', async () => {
  const buyer = await fundedBuyer('1');
  const tooMuch = paymentHeaderV1(await signAuthorization(buyer, { to: seller.payTo, value: 80_000n }));
  const redeem = await server.request('POST', '/v0/payments/redeem', { key: seller.sellerKey, body: { paymentHeader: tooMuch, resource: `${shop.url}/forecast`, amount: '0.08' } });
  expect(redeem.status).toBe(402);
  expect(redeem.body).toMatchObject({ error: 'amount_mismatch', message: expect.stringContaining('at most 0.07') });
  expect(await usdcBalance(buyer.address)).toBe(1_000_000n);
});

it('a price function that returns more than its maxPrice is the seller\'s error: 500, never a 402 to pay', async () => {
  const app = express();
  app.use(paymentMiddleware({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /greedy': { price: () => '$0.50', maxPrice: '$0.10' } } }));
  app.get('/greedy', (_req, res) => { res.json({ ok: true }); });
  const greedy = await serve(app);
  try {
    const res = await fetch(`${greedy.url}/greedy`);
    expect(res.status).toBe(500);
  } finally {
    await greedy.close();
  }
});

describe('payees per request', () => {
  const vendors = { a: privateKeyToAccount(generatePrivateKey()).address, b: privateKeyToAccount(generatePrivateKey()).address };
  const STRANGER = '0x000000000000000000000000000000000000dEaD';
  let market: RunningApp;
  beforeAll(async () => {
    // The seller lists the vendors it may pay besides its own payTo.
    const acceptance = await server.request('PUT', '/v0/payments/acceptance', { key: seller.platformKey, body: { enabled: true, payTo: seller.payTo, payees: [vendors.a, vendors.b] } });
    expect(acceptance.body.payees).toEqual([vendors.a, vendors.b]);
    const app = express();
    const routes = {
      'GET /item/a': { price: '$0.02', payTo: () => vendors.a },
      'GET /item/b': { price: '$0.02', payTo: () => vendors.b },
      // Misconfigured for some requests: ?batch=1 pays an address the seller never listed. The 402 the backend
      // checks at registration (no query) asks for vendor a; the backend still refuses the stranger's payment.
      'GET /item/stranger': { price: '$0.02', payTo: (req: PricingRequest) => (req.query.has('batch') ? STRANGER : vendors.a) },
    };
    app.use(paymentMiddleware({ backendUrl: server.url, apiKey: seller.sellerKey, routes }));
    app.get('/item/:id', (req, res) => { res.json({ item: req.params.id }); });
    market = await serve(app);
    for (const id of ['a', 'b', 'stranger']) {
      expect((await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${market.url}/item/${id}`, priceUsdc: '0.02' } })).status).toBe(201);
    }
  });
  afterAll(async () => { await market?.close(); });

  it('each vendor\'s item is paid to that vendor', async () => {
    for (const id of ['a', 'b'] as const) {
      const asked = await challenge(`${market.url}/item/${id}`);
      expect(asked.accepts[0]!.payTo).toBe(vendors[id]);
      const buyer = await fundedBuyer('1');
      const res = await fetch(`${market.url}/item/${id}`, { headers: { 'X-Payment': paymentHeaderV1(await signAuthorization(buyer, { to: vendors[id], value: 20_000n })) } });
      expect(res.status).toBe(200);
      expect(await usdcBalance(vendors[id])).toBe(20_000n);
    }
  });

  it('a payee the seller did not list is refused by the backend: nothing moves', async () => {
    const buyer = await fundedBuyer('1');
    expect((await challenge(`${market.url}/item/stranger?batch=1`)).accepts[0]!.payTo).toBe(STRANGER);
    const res = await fetch(`${market.url}/item/stranger?batch=1`, { headers: { 'X-Payment': paymentHeaderV1(await signAuthorization(buyer, { to: STRANGER, value: 20_000n })) } });
    expect(res.status).toBe(402);
    expect(((await res.json()) as { error: string }).error).toBe('recipient_not_allowed');
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n);
  });
});
