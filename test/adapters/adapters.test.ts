/**
 * The Express and Koa adapters over real HTTP, with the same expectations for both: what a buyer sees
 * (status, body, headers) and whether the seller's handler ran. The facilitator is our test double
 * (or a fake backend behind `fetch`); the real backend and chain are in test/interop.
 */
import Router from '@koa/router';
import express from 'express';
import Koa from 'koa';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { paymentMiddleware as koaPayments } from '../../adapters/koa.js';
import type { PaymentMiddlewareOptions } from '../../adapters/paywall-source.js';
import { FacilitatorUnavailable, type SettledPayment } from '../../middleware/index.js';
import { anvilSettings, b64, FakeFacilitator, fromB64, LOCAL_TOKEN, okAnswer, PAY_TO } from '../middleware/fixtures.js';

type Challenge = { accepts: Array<{ resource: string }> };
const ROUTES = { 'GET /weather': { price: '$0.01', description: 'Weather now' } };
const SELLER_KEY = 'loid-test-key';

interface Seller {
  url: string;
  /** Every handler run, with the payment the adapter handed to it. */
  runs: Array<{ path: string; payment: SettledPayment | undefined }>;
  close(): Promise<void>;
}

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function expressSeller(options: PaymentMiddlewareOptions): Promise<Seller> {
  const runs: Seller['runs'] = [];
  const app = express();
  app.use(expressPayments(options));
  app.get('/weather', (_req, res) => {
    runs.push({ path: '/weather', payment: res.locals.payment });
    res.json({ temperature: 21 });
  });
  app.get('/free', (_req, res) => {
    runs.push({ path: '/free', payment: res.locals.payment });
    res.json({ free: true });
  });
  const server = createServer(app);
  const url = await listen(server);
  return { url, runs, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

async function koaSeller(options: PaymentMiddlewareOptions): Promise<Seller> {
  const runs: Seller['runs'] = [];
  const app = new Koa();
  const router = new Router();
  router.get('/weather', (ctx) => {
    runs.push({ path: '/weather', payment: ctx.state.payment });
    ctx.body = { temperature: 21 };
  });
  router.get('/free', (ctx) => {
    runs.push({ path: '/free', payment: ctx.state.payment });
    ctx.body = { free: true };
  });
  app.use(koaPayments(options));
  app.use(router.routes());
  const server = createServer(app.callback());
  const url = await listen(server);
  return { url, runs, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const authorization = () => ({
  from: '0x2222222222222222222222222222222222222222',
  to: PAY_TO,
  value: '10000',
  validAfter: '0',
  validBefore: String(Math.floor(Date.now() / 1000) + 60),
  nonce: '0x' + '11'.repeat(32),
});
const signature = '0x' + 'cd'.repeat(65);
const v1Header = () => b64({ x402Version: 1, scheme: 'exact', network: 'anvil', payload: { signature, authorization: authorization() } });
const v2Header = () =>
  b64({
    x402Version: 2,
    accepted: { scheme: 'exact', network: 'eip155:31337', amount: '10000', asset: LOCAL_TOKEN, payTo: PAY_TO, maxTimeoutSeconds: 60, extra: { name: 'USD Coin', version: '2' } },
    payload: { signature, authorization: authorization() },
  });

/** Sends the request line byte for byte (fetch would normalize dot segments before sending). */
async function rawRequest(base: string, requestLine: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(base);
  const socket = connect(Number(port), hostname);
  await once(socket, 'connect');
  const head = Object.entries({ Host: `${hostname}:${port}`, Connection: 'close', ...headers }).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  socket.write(`${requestLine} HTTP/1.1\r\n${head}\r\n`);
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await once(socket, 'close');
  const text = Buffer.concat(chunks).toString('utf8');
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), body: text.slice(text.indexOf('\r\n\r\n') + 4) };
}

/** A stand-in for the backend's HTTP API, reached through the client's `fetch` option. */
function fakeBackend(answerSettings: () => Response | Promise<Response>) {
  const calls: string[] = [];
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const path = new URL(String(input)).pathname;
    calls.push(`${init?.method ?? 'GET'} ${path}`);
    if (path === '/v0/payments/settings') return answerSettings();
    if (path === '/v0/payments/redeem') return Response.json(okAnswer());
    if (path === '/v0/payments/holds') return Response.json({ ok: true, holdId: 'pay_held1', payer: '0x2222222222222222222222222222222222222222', expiresAt: new Date(Date.now() + 60_000).toISOString() }, { status: 201 });
    if (path === '/v0/payments/holds/pay_held1/capture') return Response.json(okAnswer());
    return Response.json({ error: 'not_found', message: 'no', status: 404 }, { status: 404 });
  };
  return { calls, fetch };
}
const settingsResponse = () => Response.json(anvilSettings);
const backendDown = (): Response => {
  throw new TypeError('fetch failed: connect ECONNREFUSED');
};
const quiet = { onError: () => {} };

describe.each([
  ['Express', expressSeller],
  ['Koa', koaSeller],
])('%s adapter', (_name, makeSeller) => {
  let seller: Seller | undefined;
  afterEach(async () => {
    await seller?.close();
    seller = undefined;
  });

  test('free route passes untouched and the facilitator is not asked', async () => {
    const facilitator = new FakeFacilitator();
    seller = await makeSeller({ routes: ROUTES, facilitator, settings: anvilSettings });
    const res = await fetch(`${seller.url}/free`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ free: true });
    expect(res.headers.get('payment-required')).toBeNull();
    expect(seller.runs).toEqual([{ path: '/free', payment: undefined }]);
    expect(facilitator.calls).toHaveLength(0);
  });

  test('unpaid: 402 with the v1 body and the v2 PAYMENT-REQUIRED header; the handler does not run', async () => {
    const facilitator = new FakeFacilitator();
    seller = await makeSeller({ routes: ROUTES, facilitator, settings: anvilSettings });
    const res = await fetch(`${seller.url}/weather`);
    expect(res.status).toBe(402);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = await res.json();
    expect(body).toMatchObject({
      x402Version: 1,
      error: 'payment_required',
      accepts: [{ scheme: 'exact', network: 'anvil', maxAmountRequired: '10000', resource: `${seller.url}/weather`, payTo: PAY_TO, description: 'Weather now' }],
    });
    expect(fromB64(res.headers.get('payment-required')!)).toMatchObject({
      x402Version: 2,
      resource: { url: `${seller.url}/weather` },
      accepts: [{ network: 'eip155:31337', amount: '10000' }],
    });
    expect(seller.runs).toEqual([]);
    expect(facilitator.calls).toHaveLength(0);
  });

  test.each([['X-Payment', v1Header, 1], ['PAYMENT-SIGNATURE', v2Header, 2]] as const)(
    'paid with %s: the handler runs with the payment and the response carries both response headers',
    async (header, makeHeader, version) => {
      const facilitator = new FakeFacilitator();
      seller = await makeSeller({ routes: ROUTES, facilitator, settings: anvilSettings });
      const paymentHeader = makeHeader();
      const res = await fetch(`${seller.url}/weather`, { headers: { [header]: paymentHeader } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ temperature: 21 });
      expect(fromB64(res.headers.get('x-payment-response')!)).toMatchObject({ success: true, network: 'anvil', transaction: '0x' + 'ab'.repeat(32) });
      expect(fromB64(res.headers.get('payment-response')!)).toMatchObject({ success: true, network: 'eip155:31337' });
      expect(res.headers.get('cache-control')).toBe('private, no-store');
      expect(facilitator.calls).toEqual([expect.objectContaining({ paymentHeader, version, resource: `${seller.url}/weather`, amountAtomic: 10000n })]);
      expect(seller.runs).toEqual([{ path: '/weather', payment: expect.objectContaining({ paymentId: 'pay_123', version, amountAtomic: 10000n }) }]);
    },
  );

  test('payment refused by the facilitator: 402 with the reason; the handler does not run', async () => {
    const facilitator = new FakeFacilitator(() => ({ ok: false, reason: 'nonce_already_used', message: 'used' }));
    seller = await makeSeller({ routes: ROUTES, facilitator, settings: anvilSettings });
    const res = await fetch(`${seller.url}/weather`, { headers: { 'X-Payment': v1Header() } });
    expect(res.status).toBe(402);
    expect(await res.json()).toMatchObject({ x402Version: 1, error: 'nonce_already_used', accepts: [{ maxAmountRequired: '10000' }] });
    expect(res.headers.get('x-payment-response')).toBeNull();
    expect(seller.runs).toEqual([]);
  });

  test('garbage payment header: 402 invalid_base64 without asking the facilitator', async () => {
    const facilitator = new FakeFacilitator();
    seller = await makeSeller({ routes: ROUTES, facilitator, settings: anvilSettings });
    const res = await fetch(`${seller.url}/weather`, { headers: { 'X-Payment': '%%%not-base64' } });
    expect(res.status).toBe(402);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_base64');
    expect(facilitator.calls).toHaveLength(0);
    expect(seller.runs).toEqual([]);
  });

  test.each([
    [503, new FacilitatorUnavailable('payment backend unreachable', 503)],
    [502, new FacilitatorUnavailable('payment backend answered 500', 502)],
    [502, new Error('socket hang up')],
  ])('facilitator failure: %i JSON error; the handler does not run', async (status, error) => {
    const facilitator = new FakeFacilitator(() => Promise.reject(error));
    seller = await makeSeller({ routes: ROUTES, facilitator, settings: anvilSettings });
    const res = await fetch(`${seller.url}/weather`, { headers: { 'X-Payment': v1Header() } });
    expect(res.status).toBe(status);
    expect(await res.json()).toEqual({ error: 'facilitator_unavailable', message: expect.any(String), status });
    expect(seller.runs).toEqual([]);
  });

  test.each(['/weather%2F', '/weather%252f', '/weather%5c', '/%2e%2e/weather', '/x/../weather', '/./weather', '/weather\\'])('path trick %s: 400 with a reason, never the handler', async (path) => {
    const facilitator = new FakeFacilitator();
    seller = await makeSeller({ routes: ROUTES, facilitator, settings: anvilSettings });
    const res = await rawRequest(seller.url, `GET ${path}`, { 'X-Payment': v1Header() });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ error: expect.any(String), status: 400 });
    expect(seller.runs).toEqual([]);
    expect(facilitator.calls).toHaveLength(0);
  });

  test('trustProxy: the resource URL uses X-Forwarded-Proto/Host; without it they are ignored', async () => {
    const forwarded = { 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'api.example.com' };
    seller = await makeSeller({ routes: ROUTES, facilitator: new FakeFacilitator(), settings: anvilSettings, trustProxy: true });
    const trusted = (await (await fetch(`${seller.url}/weather`, { headers: forwarded })).json()) as Challenge;
    expect(trusted.accepts[0].resource).toBe('https://api.example.com/weather');
    await seller.close();

    seller = await makeSeller({ routes: ROUTES, facilitator: new FakeFacilitator(), settings: anvilSettings });
    const ignored = (await (await fetch(`${seller.url}/weather`, { headers: forwarded })).json()) as Challenge;
    expect(ignored.accepts[0].resource).toBe(`${seller.url}/weather`);
  });

  test('publicOrigin wins over Host', async () => {
    seller = await makeSeller({ routes: ROUTES, facilitator: new FakeFacilitator(), settings: anvilSettings, publicOrigin: 'https://weather.example' });
    const body = (await (await fetch(`${seller.url}/weather`)).json()) as Challenge;
    expect(body.accepts[0].resource).toBe('https://weather.example/weather');
  });

  describe('backend wiring ({backendUrl, apiKey})', () => {
    test('settings are fetched once at start-up, never per request; a payment is held, then captured after the handler', async () => {
      const backend = fakeBackend(settingsResponse);
      seller = await makeSeller({ backendUrl: 'http://backend.test', apiKey: SELLER_KEY, routes: ROUTES, fetch: backend.fetch });
      for (let i = 0; i < 5; i += 1) expect((await fetch(`${seller.url}/weather`)).status).toBe(402);
      const paid = await fetch(`${seller.url}/weather`, { headers: { 'X-Payment': v1Header() } });
      expect(paid.status).toBe(200);
      expect(backend.calls).toEqual(['GET /v0/payments/settings', 'POST /v0/payments/holds', 'POST /v0/payments/holds/pay_held1/capture']);
      expect(seller.runs).toHaveLength(1);
    });

    test('settle: before-handler redeems at once, before the handler runs', async () => {
      const backend = fakeBackend(settingsResponse);
      const routes = { 'GET /weather': { ...ROUTES['GET /weather'], settle: 'before-handler' as const } };
      seller = await makeSeller({ backendUrl: 'http://backend.test', apiKey: SELLER_KEY, routes, fetch: backend.fetch });
      const paid = await fetch(`${seller.url}/weather`, { headers: { 'X-Payment': v1Header() } });
      expect(paid.status).toBe(200);
      expect(backend.calls).toEqual(['GET /v0/payments/settings', 'POST /v0/payments/redeem']);
      expect(seller.runs).toHaveLength(1);
    });

    test('concurrent first requests share one settings fetch', async () => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const backend = fakeBackend(async () => {
        await gate;
        return settingsResponse();
      });
      seller = await makeSeller({ backendUrl: 'http://backend.test', apiKey: SELLER_KEY, routes: ROUTES, fetch: backend.fetch });
      const pending = Array.from({ length: 10 }, () => fetch(`${seller!.url}/weather`));
      setTimeout(release, 50);
      const statuses = (await Promise.all(pending)).map((r) => r.status);
      expect(statuses).toEqual(Array(10).fill(402));
      expect(backend.calls).toEqual(['GET /v0/payments/settings']);
    });

    test('backend down at start-up: free routes pass, paid routes 503 without the handler, and a later request retries', async () => {
      let up = false;
      const backend = fakeBackend(() => (up ? settingsResponse() : backendDown()));
      seller = await makeSeller({ backendUrl: 'http://backend.test', apiKey: SELLER_KEY, routes: ROUTES, fetch: backend.fetch, ...quiet });

      expect((await fetch(`${seller.url}/free`)).status).toBe(200);
      const down = await fetch(`${seller.url}/weather`, { headers: { 'X-Payment': v1Header() } });
      expect(down.status).toBe(503);
      expect(await down.json()).toMatchObject({ error: 'facilitator_unavailable', status: 503 });
      expect((await fetch(`${seller.url}/weather%2F`)).status).toBe(400);
      expect(seller.runs.map((r) => r.path)).toEqual(['/free']);

      up = true;
      expect((await fetch(`${seller.url}/weather`)).status).toBe(402);
      expect(backend.calls.filter((c) => c.endsWith('/settings')).length).toBeGreaterThanOrEqual(3);
    });

    test('wrong seller key (backend answers 401): 502, the handler never runs', async () => {
      const backend = fakeBackend(() => Response.json({ error: 'unauthorized', message: 'bad key', status: 401 }, { status: 401 }));
      seller = await makeSeller({ backendUrl: 'http://backend.test', apiKey: SELLER_KEY, routes: ROUTES, fetch: backend.fetch, ...quiet });
      const res = await fetch(`${seller.url}/weather`, { headers: { 'X-Payment': v1Header() } });
      expect(res.status).toBe(502);
      expect(seller.runs).toEqual([]);
    });

    test('misconfiguration fails when the middleware is built, not on the first buyer', async () => {
      await expect(makeSeller({ backendUrl: 'http://backend.test', apiKey: 'sk-not-a-seller-key', routes: ROUTES })).rejects.toThrow(/loid-/);
      await expect(makeSeller({ backendUrl: 'http://backend.test', apiKey: SELLER_KEY, routes: { 'GET /weather': { price: 'ten dollars' } }, ...quiet })).rejects.toThrow();
    });
  });
});
