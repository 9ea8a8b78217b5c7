/**
 * The Express, Koa, Hono (on @hono/node-server) and Fastify adapters over real HTTP, with the same
 * expectations for all: what a buyer sees (status, body, headers) and whether the seller's handler ran.
 * The facilitator is our test double (or a fake backend behind `fetch`); the real backend and chain are
 * in test/interop.
 */
import { createAdaptorServer } from '@hono/node-server';
import Router from '@koa/router';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { streamSSE } from 'hono/streaming';
import Koa from 'koa';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { paymentMiddleware as fastifyPayments } from '../../adapters/fastify.js';
import { paymentMiddleware as honoPayments, type PaymentEnv } from '../../adapters/hono.js';
import { paymentMiddleware as koaPayments } from '../../adapters/koa.js';
import type { PaymentMiddlewareOptions } from '../../adapters/paywall-source.js';
import { FacilitatorUnavailable, type HoldRequest, type HoldResult, type RedeemResult, type SettledPayment } from '../../middleware/index.js';
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

async function honoSeller(options: PaymentMiddlewareOptions): Promise<Seller> {
  const runs: Seller['runs'] = [];
  const app = new Hono<PaymentEnv>();
  app.use(honoPayments(options));
  app.get('/weather', (c) => {
    runs.push({ path: '/weather', payment: c.get('payment') as SettledPayment });
    return c.json({ temperature: 21 });
  });
  app.get('/free', (c) => {
    runs.push({ path: '/free', payment: c.get('payment') as SettledPayment | undefined });
    return c.json({ free: true });
  });
  const server = createAdaptorServer({ fetch: app.fetch }) as Server;
  const url = await listen(server);
  return { url, runs, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

async function fastifySeller(options: PaymentMiddlewareOptions): Promise<Seller> {
  const runs: Seller['runs'] = [];
  const app = Fastify();
  app.register(fastifyPayments(options));
  app.get('/weather', async (request) => {
    runs.push({ path: '/weather', payment: request.payment as SettledPayment });
    return { temperature: 21 };
  });
  app.get('/free', async (request) => {
    runs.push({ path: '/free', payment: request.payment as SettledPayment | undefined });
    return { free: true };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, runs, close: () => app.close() };
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
    // The FakeFacilitator cannot hold: its routes settle before the handler, and their 402 says upfront.
    accepted: { scheme: 'exact', network: 'eip155:31337', amount: '10000', asset: LOCAL_TOKEN, payTo: PAY_TO, maxTimeoutSeconds: 60, extra: { name: 'USD Coin', version: '2', paymentFlow: 'upfront' } },
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

const PATH_TRICKS = ['/weather%2F', '/weather%252f', '/weather%5c', '/%2e%2e/weather', '/x/../weather', '/./weather', '/weather\\'];

/**
 * What happens to a path trick before the app sees it. @hono/node-server hands Hono a parsed URL: dot
 * segments are resolved (the request is for /weather, and is charged as such) and a raw backslash gets
 * the server's own 400. The paywall reads the path Hono routes on, so the two never disagree.
 */
const SERVER_READS: Record<string, Record<string, '/weather' | 'refused'>> = {
  Hono: { '/%2e%2e/weather': '/weather', '/x/../weather': '/weather', '/./weather': '/weather', '/weather\\': 'refused' },
};

describe.each([
  ['Express', expressSeller],
  ['Koa', koaSeller],
  ['Hono', honoSeller],
  ['Fastify', fastifySeller],
])('%s adapter', (name, makeSeller) => {
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

  const serverReads = SERVER_READS[name] ?? {};
  test.each(PATH_TRICKS.filter((path) => !(path in serverReads)))('path trick %s: 400 with a reason, never the handler', async (path) => {
    const facilitator = new FakeFacilitator();
    seller = await makeSeller({ routes: ROUTES, facilitator, settings: anvilSettings });
    const res = await rawRequest(seller.url, `GET ${path}`, { 'X-Payment': v1Header() });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ error: expect.any(String), status: 400 });
    expect(seller.runs).toEqual([]);
    expect(facilitator.calls).toHaveLength(0);
  });

  const resolved = Object.entries(serverReads).filter(([, read]) => read !== 'refused');
  if (resolved.length > 0) {
    test.each(resolved)('path trick %s, resolved by the server to %s: charged as that path (402 unpaid), never free', async (path, target) => {
      const facilitator = new FakeFacilitator();
      seller = await makeSeller({ routes: ROUTES, facilitator, settings: anvilSettings });
      const unpaid = await rawRequest(seller.url, `GET ${path}`);
      expect(unpaid.status).toBe(402);
      expect(JSON.parse(unpaid.body)).toMatchObject({ accepts: [{ resource: `${seller.url}${target}` }] });
      expect(seller.runs).toEqual([]);
      const paid = await rawRequest(seller.url, `GET ${path}`, { 'X-Payment': v1Header() });
      expect(paid.status).toBe(200);
      expect(facilitator.calls).toEqual([expect.objectContaining({ resource: `${seller.url}${target}` })]);
      expect(seller.runs).toEqual([{ path: target, payment: expect.objectContaining({ paymentId: 'pay_123' }) }]);
    });
  }

  const refused = Object.entries(serverReads).filter(([, read]) => read === 'refused').map(([path]) => path);
  if (refused.length > 0) {
    test.each(refused)('path trick %s: refused by the server with 400 before the app, never the handler', async (path) => {
      const facilitator = new FakeFacilitator();
      seller = await makeSeller({ routes: ROUTES, facilitator, settings: anvilSettings });
      const res = await rawRequest(seller.url, `GET ${path}`, { 'X-Payment': v1Header() });
      expect(res.status).toBe(400);
      expect(seller.runs).toEqual([]);
      expect(facilitator.calls).toHaveLength(0);
    });
  }

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

    test('an auth-capture route asked before the settings arrive waits for them: every first request gets the escrow offer, none a 500', async () => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const operator = '0x3333333333333333333333333333333333333333';
      const backend = fakeBackend(async () => {
        await gate;
        return Response.json({ ...anvilSettings, authCaptureOperator: operator });
      });
      const routes = { 'GET /weather': { price: '$0.01', scheme: 'auth-capture' as const } };
      seller = await makeSeller({ backendUrl: 'http://backend.test', apiKey: SELLER_KEY, routes, fetch: backend.fetch });
      const pending = Array.from({ length: 5 }, () => fetch(`${seller!.url}/weather`));
      setTimeout(release, 50);
      const answers = await Promise.all(pending);
      expect(answers.map((r) => r.status)).toEqual(Array(5).fill(402));
      for (const answer of answers) {
        expect((fromB64(answer.headers.get('payment-required')!) as { accepts: unknown[] }).accepts[0]).toMatchObject({ scheme: 'auth-capture', extra: { captureAuthorizer: operator } });
      }
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

/** Holds payments, and captures when the test lets it (`gate`), with the answer the test sets. */
class HoldingFacilitator extends FakeFacilitator {
  readonly decisions: Array<'capture' | 'release'> = [];
  gate: Promise<void> = Promise.resolve();
  captureAnswer: () => RedeemResult = okAnswer;
  async hold(request: HoldRequest): Promise<HoldResult> {
    this.calls.push(request);
    return { ok: true, holdId: 'pay_held1', payer: '0x2222222222222222222222222222222222222222', expiresAt: new Date(Date.now() + 60_000).toISOString() };
  }
  async capture(): Promise<RedeemResult> {
    this.decisions.push('capture');
    await this.gate;
    return this.captureAnswer();
  }
  async release(): Promise<void> {
    this.decisions.push('release');
  }
  reset(): () => void {
    let letGo!: () => void;
    this.gate = new Promise<void>((resolve) => (letGo = resolve));
    this.captureAnswer = okAnswer;
    this.decisions.length = 0;
    this.calls.length = 0;
    return letGo;
  }
}

const SECRET = 'the-paid-content-5c1e';
const STYLE_ROUTES = { 'GET /styles/*': { price: '$0.01' } };
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * However a route answers, the after-handler hold keeps all of it back until the payment is captured
 * (nothing reaches the buyer while the capture waits), then sends it whole with the settlement headers
 * (which win over the handler's own Cache-Control); a refused capture sends none of it, only the 402.
 */
async function expectHeldUntilSettled(url: string, facilitator: HoldingFacilitator) {
  const letGo = facilitator.reset();
  const pending = fetch(url, { headers: { 'X-Payment': v1Header(), Connection: 'close' } });
  for (let waited = 0; !facilitator.decisions.includes('capture'); waited += 5) {
    if (waited > 30_000) throw new Error(`no capture after 30 s (facilitator saw: ${facilitator.calls.length} holds, ${facilitator.decisions.join(', ') || 'no decisions'})`);
    await sleep(5);
  }
  expect(await Promise.race([pending.then(() => 'answered'), sleep(150).then(() => 'nothing yet')])).toBe('nothing yet');
  letGo();
  const paid = await pending;
  expect(paid.status).toBe(200);
  expect(await paid.text()).toContain(SECRET);
  expect(paid.headers.get('x-payment-response')).toBeTruthy();
  expect(paid.headers.get('cache-control')).toBe('private, no-store');
  expect(facilitator.decisions).toEqual(['capture']);

  facilitator.reset()();
  facilitator.captureAnswer = () => ({ ok: false, reason: 'insufficient_funds', message: 'the buyer spent it meanwhile' });
  const refused = await fetch(url, { headers: { 'X-Payment': v1Header(), Connection: 'close' } });
  const text = await refused.text();
  expect(refused.status).toBe(402);
  expect(text).not.toContain(SECRET);
  expect(JSON.parse(text)).toMatchObject({ error: 'insufficient_funds', accepts: [{ maxAmountRequired: '10000' }] });
  expect(refused.headers.get('x-payment-response')).toBeNull();
  expect(refused.headers.get('set-cookie')).toBeNull();
}

async function expectReleased(url: string, facilitator: HoldingFacilitator, status: number) {
  facilitator.reset()();
  const res = await fetch(url, { headers: { 'X-Payment': v1Header(), Connection: 'close' } });
  expect(res.status).toBe(status);
  expect(res.headers.get('x-payment-response')).toBeNull();
  expect(facilitator.decisions).toEqual(['release']);
}

describe('Fastify: every way a route answers goes through the hold', () => {
  const facilitator = new HoldingFacilitator();
  const app = Fastify();
  let url: string;
  beforeAll(async () => {
    app.register(fastifyPayments({ routes: STYLE_ROUTES, facilitator, settings: anvilSettings }));
    app.get('/styles/object', async () => ({ secret: SECRET }));
    app.get('/styles/string', async () => SECRET);
    // Fastify's docs ask for `return reply` here; without it, Fastify sends again unless the reply reads as sent.
    app.get('/styles/send-without-return', async (_request, reply) => { reply.send({ secret: SECRET }); });
    app.get('/styles/return-send', async (_request, reply) => reply.send({ secret: SECRET }));
    app.get('/styles/callback', (_request, reply) => { reply.header('set-cookie', 'session=1').send({ secret: SECRET }); });
    app.get('/styles/stream', async (_request, reply) => reply.type('text/plain').send(Readable.from([SECRET, '-more'])));
    app.get('/styles/web-response', async () => new Response(SECRET, { headers: { 'content-type': 'text/plain' } }));
    app.get('/styles/hijack', async (_request, reply) => {
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'text/event-stream', 'set-cookie': 'session=1' });
      reply.raw.write(`data: ${SECRET}\n\n`);
      reply.raw.end();
    });
    app.get('/styles/own-cache-control', async (_request, reply) => reply.header('cache-control', 'public, max-age=600').send({ secret: SECRET }));
    app.get('/styles/status-500', async (_request, reply) => reply.code(500).send({ error: 'upstream_down' }));
    app.get('/styles/throw', async () => { throw new Error('handler blew up'); });
    await app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });
  afterAll(() => app.close());

  test.each(['object', 'string', 'send-without-return', 'return-send', 'callback', 'stream', 'web-response', 'hijack', 'own-cache-control'])(
    '%s: held until settled, then sent whole with the settlement headers; a refused settlement sends none of it',
    (style) => expectHeldUntilSettled(`${url}/styles/${style}`, facilitator),
  );

  test.each([['status-500', 500], ['throw', 500], ['missing', 404]] as const)('%s: released, nothing charged, the answer goes out as it was', (style, status) =>
    expectReleased(`${url}/styles/${style}`, facilitator, status),
  );
});

describe('Hono: every way a route answers goes through the hold', () => {
  const facilitator = new HoldingFacilitator();
  const app = new Hono<PaymentEnv>();
  // Hono's default, without logging the throws these tests expect.
  app.onError((error, c) => (error instanceof HTTPException ? error.getResponse() : c.text('handler failed', 500)));
  const server = createAdaptorServer({ fetch: app.fetch }) as Server;
  let url: string;
  let cancelled!: () => void;
  const endlessCancelled = new Promise<void>((resolve) => (cancelled = resolve));
  beforeAll(async () => {
    app.use(honoPayments({ routes: STYLE_ROUTES, facilitator, settings: anvilSettings }));
    app.get('/upstream', (c) => c.text(SECRET));
    app.get('/styles/json', (c) => c.json({ secret: SECRET, payer: c.get('payment').payer }));
    app.get('/styles/own-response', () => new Response(SECRET, { headers: { 'set-cookie': 'session=1' } }));
    // A fetched Response has immutable headers: the settlement headers go on a copy.
    app.get('/styles/proxied', () => fetch(`${url}/upstream`));
    app.get('/styles/sse', (c) => streamSSE(c, async (stream) => {
      await stream.writeSSE({ data: SECRET });
      await stream.writeSSE({ data: 'more' });
    }));
    app.get('/styles/stream', (c) => c.body(new ReadableStream({ start(controller) { controller.enqueue(new TextEncoder().encode(SECRET)); controller.close(); } })));
    app.get('/styles/own-cache-control', (c) => c.json({ secret: SECRET }, 200, { 'cache-control': 'public, max-age=600' }));
    app.get('/styles/status-500', (c) => c.json({ error: 'upstream_down' }, 500));
    app.get('/styles/throw', () => { throw new Error('handler blew up'); });
    app.get('/styles/http-exception', () => { throw new HTTPException(401, { message: 'no' }); });
    app.get('/styles/endless', (c) => c.body(new ReadableStream({
      async pull(controller) {
        await sleep(10);
        controller.enqueue(new TextEncoder().encode(SECRET));
      },
      cancel: () => cancelled(),
    })));
    url = await listen(server);
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test.each(['json', 'own-response', 'proxied', 'sse', 'stream', 'own-cache-control'])(
    '%s: held until settled, then sent whole with the settlement headers; a refused settlement sends none of it',
    (style) => expectHeldUntilSettled(`${url}/styles/${style}`, facilitator),
  );

  test.each([['status-500', 500], ['throw', 500], ['http-exception', 401], ['missing', 404]] as const)('%s: released, nothing charged, the answer goes out as it was', (style, status) =>
    expectReleased(`${url}/styles/${style}`, facilitator, status),
  );

  test('a streaming handler whose settlement is refused sees its stream cancelled, unread', async () => {
    facilitator.reset()();
    facilitator.captureAnswer = () => ({ ok: false, reason: 'insufficient_funds', message: 'spent' });
    const res = await fetch(`${url}/styles/endless`, { headers: { 'X-Payment': v1Header(), Connection: 'close' } });
    expect(res.status).toBe(402);
    expect(await res.text()).not.toContain(SECRET);
    await endlessCancelled;
  });
});

describe('Fastify: a parameter matching an empty segment', () => {
  // find-my-way runs "/city/:name" for "GET /city/" with name "", where the paywall reads "/city".
  const facilitator = new FakeFacilitator();
  const app = Fastify();
  const runs: string[] = [];
  let url: string;
  beforeAll(async () => {
    app.register(fastifyPayments({ routes: { 'GET /city/:name': { price: '$0.01' } }, facilitator, settings: anvilSettings }));
    app.get('/city/:name', async (request) => { runs.push(request.url); return { secret: SECRET }; });
    app.get('/user/:id', async (request) => { runs.push(request.url); return { free: true }; });
    await app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });
  afterAll(() => app.close());

  test('on a priced route: 400, never the handler, even with a payment', async () => {
    const res = await fetch(`${url}/city/`, { headers: { 'X-Payment': v1Header() } });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'empty_path_parameter', message: expect.any(String), status: 400 });
    expect(runs).toEqual([]);
    expect(facilitator.calls).toHaveLength(0);
    expect((await fetch(`${url}/city/oslo`)).status).toBe(402);
  });

  test('on a free route: passes untouched', async () => {
    const res = await fetch(`${url}/user/`);
    expect(res.status).toBe(200);
    expect(runs).toEqual(['/user/']);
  });
});

describe('Hono without Node', () => {
  // Workers (without nodejs_compat) have no Buffer. Node's own fetch (undici) needs it for every body, so
  // it cannot simply be deleted here: it is replaced by a getter that notes each read made from our code
  // (middleware/, adapters/), and the whole paid request is served through Hono's own fetch (app.request,
  // no Node server). Only reads from Hono or Node itself are allowed.
  test('unpaid 402 with both challenge forms, then paid after the handler, our code reading no Buffer', async () => {
    const script = `
      const { Hono } = await import('hono');
      const { paymentMiddleware } = await import('./adapters/hono.ts');
      const NodeBuffer = globalThis.Buffer;
      const ours = [];
      Object.defineProperty(globalThis, 'Buffer', { configurable: true, get() {
        const caller = (new Error().stack ?? '').split('\\n')[2] ?? '';
        if (/[\\/](middleware|adapters)[\\/]/.test(caller)) ours.push(caller.trim());
        return NodeBuffer;
      } });
      const settings = ${JSON.stringify(anvilSettings)};
      const ok = { ok: true, paymentId: 'pay_1', paymentResponse: { success: true, transaction: '0x' + 'ab'.repeat(32), network: 'anvil', payer: '0x2222222222222222222222222222222222222222' } };
      const facilitator = {
        redeem: async () => ok,
        hold: async () => ({ ok: true, holdId: 'pay_1', payer: ok.paymentResponse.payer, expiresAt: new Date(Date.now() + 60000).toISOString() }),
        capture: async () => ok,
        release: async () => {},
      };
      const app = new Hono();
      app.use(paymentMiddleware({ routes: { 'GET /weather': { price: '$0.01' } }, facilitator, settings }));
      app.get('/weather', (c) => c.json({ temperature: 21, payer: c.get('payment').payer }));
      const unpaid = await app.request('https://shop.example/weather');
      const challenge = JSON.parse(atob(unpaid.headers.get('payment-required')));
      const header = btoa(JSON.stringify(${JSON.stringify({ x402Version: 1, scheme: 'exact', network: 'anvil', payload: { signature, authorization: authorization() } })}));
      const paid = await app.request('https://shop.example/weather', { headers: { 'X-Payment': header } });
      console.log(JSON.stringify({
        buffer: ours, unpaid: unpaid.status, resource: challenge.resource.url, body: (await unpaid.json()).error,
        paid: paid.status, content: await paid.json(), settlement: JSON.parse(atob(paid.headers.get('x-payment-response'))).transaction,
      }));
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: process.cwd() });
    expect(JSON.parse(stdout)).toEqual({
      buffer: [], unpaid: 402, resource: 'https://shop.example/weather', body: 'payment_required',
      paid: 200, content: { temperature: 21, payer: '0x2222222222222222222222222222222222222222' }, settlement: '0x' + 'ab'.repeat(32),
    });
  });
});
