/**
 * Issue 14: an example seller started on any port, and called by either loopback spelling, issues only
 * challenges the backend redeems. The Koa example runs as its own process (`PORT=<free port>`, as
 * `PORT=5055 npm run example:koa-seller` would), registers its routes at start-up with syncEndpoints,
 * and the example buyer pays it at http://127.0.0.1:<port>/weather and http://localhost:<port>/weather.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { payWithV1, payWithV2 } from '../../examples/buyer/buyer.js';
import { WEATHER_ROUTES } from '../../examples/weather.js';
import { BackendRequestError, syncEndpoints } from '../../middleware/index.js';
import { freePort } from '../../server/platform/net.js';
import { sendUsdc, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { setUpSeller } from './seller.js';
import { backendUrlFromEnv } from '../../examples/dev-seller.js';

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let port: number;
let example: { child: ChildProcess; output: () => string } | undefined;
let stateDir: string;

/** Starts the Koa example with the given dev-seller file and waits for its start-up sync to report (/forecast comes last). */
function startKoaExample(devSellerFile: string, env: Record<string, string>): Promise<{ child: ChildProcess; output: () => string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'examples/koa-seller/server.ts'], {
      env: { ...process.env, AGENTGATE_DEV_SELLER_FILE: devSellerFile, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let text = '';
    const output = () => text;
    const timer = setTimeout(() => reject(new Error(`the Koa example did not register its routes in time:\n${text}`)), 45_000);
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      if (/registered http\S*\/forecast|could not register|not registering/.test(text)) {
        clearTimeout(timer);
        resolve({ child, output });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the Koa example exited (${code}):\n${text}`));
    });
  });
}

beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
  port = await freePort();
  stateDir = mkdtempSync(join(tmpdir(), 'agentgate-any-port-'));
  const file = join(stateDir, 'dev-seller.json');
  // What `agentgate dev` writes; no endpoint for this port is registered beforehand.
  // The backend URL from AGENTGATE_URL, the name the agentgate command reads too (not from the file).
  writeFileSync(file, JSON.stringify({ platformKey: seller.platformKey, sellerKey: seller.sellerKey }));
  example = await startKoaExample(file, { PORT: String(port), AGENTGATE_URL: server.url });
}, 60_000);

afterAll(async () => {
  if (example && example.child.exitCode === null) {
    const exited = new Promise((resolve) => example!.child.once('exit', resolve));
    example.child.kill('SIGTERM');
    await exited;
  }
  if (stateDir) rmSync(stateDir, { recursive: true, force: true });
  await server?.close();
});

const endpoints = async () => (await server.request('GET', '/v0/payments/endpoints', { key: seller.platformKey })).body.endpoints as Array<{ id: string; url: string; priceUsdc: string; description: string }>;

describe('the Koa example on an arbitrary port', () => {
  test('registered its paid routes at start-up, under the origin it listens on', async () => {
    expect(example!.output()).toContain(`registered http://localhost:${port}/weather at 0.01 USDC`);
    // Priced per request, registered by its cap: the line says so, as the backend's own does.
    expect(example!.output()).toContain(`registered http://localhost:${port}/forecast at up to 0.07 USDC`);
    expect(await endpoints()).toEqual(expect.arrayContaining([
      expect.objectContaining({ url: `http://localhost:${port}/weather`, priceUsdc: '0.01', description: 'Current weather for a city' }),
      expect.objectContaining({ url: `http://localhost:${port}/forecast`, priceUsdc: '0.07', pricing: 'dynamic' }),
    ]));
    expect(await endpoints()).toHaveLength(2);
  });

  const pays: Array<[string, (url: string, key: Hex) => ReturnType<typeof payWithV1>]> = [
    ['x402 v1', (url, key) => payWithV1(url, key)],
    ['x402 v2', (url, key) => payWithV2(url, key, { chainId: 84532, address: testChain().usdc })],
  ];
  test.each(['127.0.0.1', 'localhost'])('is paid at http://%s:<port>/weather by the example buyer (v1 and v2): 200 and settled', async (host) => {
    for (const [name, pay] of pays) {
      const key = generatePrivateKey();
      const buyer = privateKeyToAccount(key);
      await sendUsdc(buyer.address, 100_000n);
      const before = await usdcBalance(seller.payTo);
      const result = await pay(`http://${host}:${port}/weather?city=Lima`, key);
      expect({ name, status: result.status }).toEqual({ name, status: 200 });
      expect(result.body).toMatchObject({ city: 'Lima', paidBy: buyer.address });
      expect(result.settlement).toMatchObject({ success: true, payer: buyer.address });
      const paymentId = (result.body as { paymentId: string }).paymentId;
      const record = await server.request('GET', `/v0/payments/${paymentId}`, { key: seller.sellerKey });
      // The record keeps the spelling the buyer paid for; the endpoint matched is the registered one.
      expect(record.body).toMatchObject({ status: 'settled', resourceUrl: `http://${host}:${port}/weather`, endpointId: (await endpoints()).find((e) => e.url.endsWith('/weather'))!.id });
      expect(await usdcBalance(seller.payTo)).toBe(before + 10_000n);
    }
  });
});

test('in dev mode another loopback spelling of a registered URL is the same endpoint: 409 endpoint_exists', async () => {
  // Each spelling reaches the running example and passes the URL check; it is the endpoint registered already.
  for (const url of [`http://127.0.0.1:${port}/weather`, `http://[::1]:${port}/weather/`]) {
    const again = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url, priceUsdc: '0.01' } });
    expect(again).toMatchObject({ status: 409, body: { error: 'endpoint_exists', status: 409 } });
  }
});

describe('syncEndpoints', () => {
  const sync = (routes: Parameters<typeof syncEndpoints>[0]['routes'], publicOrigin = `http://127.0.0.1:${port}`) =>
    syncEndpoints({ backendUrl: server.url, platformKey: seller.platformKey, publicOrigin, routes });

  test('is idempotent: a second run with the same table changes nothing, whichever loopback spelling it uses', async () => {
    const before = await endpoints();
    const again = await sync(WEATHER_ROUTES);
    expect(again).toMatchObject({ created: [], updated: [], skipped: [] });
    expect(again.unchanged).toEqual([
      expect.objectContaining({ url: `http://localhost:${port}/weather`, patterns: ['GET /weather'] }),
      // The dynamically priced route, registered by its cap.
      expect.objectContaining({ url: `http://localhost:${port}/forecast`, priceUsdc: '0.07', patterns: ['GET /forecast'] }),
    ]);
    expect(await endpoints()).toEqual(before);
  });

  test('updates a changed price, leaves endpoints outside the table alone, and reports patterns it cannot register', async () => {
    const other = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: 'mcp://tool/forecast', priceUsdc: '0.05' } });
    expect(other.status).toBe(201);
    // The middleware would now charge $0.02; the backend must agree before any buyer is challenged.
    const changed = await sync({ 'GET /weather': { price: '$0.02', description: 'Current weather for a city' }, 'GET /forecast/:city': { price: '$0.01' } });
    expect(changed.updated).toEqual([expect.objectContaining({ url: `http://localhost:${port}/weather`, priceUsdc: '0.02' })]);
    expect(changed.skipped).toEqual([{ pattern: 'GET /forecast/:city', reason: expect.stringContaining('exact URL') }]);
    const after = await endpoints();
    expect(after.find((e) => e.url.endsWith('/weather'))).toMatchObject({ priceUsdc: '0.02' });
    expect(after.find((e) => e.url === 'mcp://tool/forecast')).toMatchObject({ id: other.body.id, priceUsdc: '0.05' });
    // Back to the example's table: updated once, then unchanged.
    expect((await sync(WEATHER_ROUTES)).updated).toHaveLength(1);
    expect((await sync(WEATHER_ROUTES)).unchanged).toHaveLength(2);
    expect((await endpoints()).find((e) => e.url.endsWith('/weather'))).toMatchObject({ priceUsdc: '0.01' });
  });

  test('refuses two patterns on one URL at different prices before calling the backend', async () => {
    // An unreachable backend: had the table been sent, this would fail as FacilitatorUnavailable instead.
    const attempt = syncEndpoints({ backendUrl: 'http://127.0.0.1:1', platformKey: seller.platformKey, publicOrigin: `http://localhost:${port}`, routes: { 'GET /weather': { price: '$0.01' }, 'POST /weather': { price: '$0.02' } } });
    await expect(attempt).rejects.toThrow(/one price per URL/);
  });
});

describe('syncEndpoints against a production-mode backend', () => {
  let prod: TestServer;
  let platformKey: string;
  beforeAll(async () => {
    prod = await startTestServer({ AGENTGATE_MODE: 'production', TRUST_PROXY: 'true' });
    platformKey = (await setUpSeller(prod)).platformKey;
  });
  afterAll(async () => { await prod?.close(); });

  test('the library sends the loopback URL and surfaces the backend refusal, naming the URL', async () => {
    const attempt = syncEndpoints({ backendUrl: prod.url, platformKey, publicOrigin: `http://127.0.0.1:${port}`, routes: WEATHER_ROUTES });
    await expect(attempt).rejects.toBeInstanceOf(BackendRequestError);
    await expect(attempt).rejects.toMatchObject({ status: 400, error: 'endpoint_check_failed', message: expect.stringContaining(`registering http://127.0.0.1:${port}/weather`) });
    expect((await prod.request('GET', '/v0/payments/endpoints', { key: platformKey })).body.endpoints).toEqual([]);
  });

  // The one test of the dev-only flag: every other test registers a URL that answers its 402.
  test('skipUrlCheck, when asked for: a dev backend registers a URL nothing serves yet; production refuses the flag and registers nothing', async () => {
    const routes = { 'GET /later': { price: '$0.01' } };
    const nothingThere = `http://127.0.0.1:${await freePort()}`;
    const devSeller = await setUpSeller(server);
    const devSync = (skipUrlCheck?: boolean) => syncEndpoints({ backendUrl: server.url, platformKey: devSeller.platformKey, publicOrigin: nothingThere, routes, ...(skipUrlCheck ? { skipUrlCheck } : {}) });
    // Not sent unless asked for: the backend fetches the URL, and nothing answers there.
    await expect(devSync()).rejects.toMatchObject({ status: 400, error: 'endpoint_check_failed', message: expect.stringContaining('could not be fetched') });
    expect((await devSync(true)).created).toEqual([expect.objectContaining({ url: `${nothingThere}/later`, priceUsdc: '0.01' })]);

    const attempt = syncEndpoints({ backendUrl: prod.url, platformKey, publicOrigin: 'https://api.example.com', routes, skipUrlCheck: true });
    await expect(attempt).rejects.toMatchObject({ status: 400, error: 'validation_error', message: expect.stringContaining('skipUrlCheck') });
    expect((await prod.request('GET', '/v0/payments/endpoints', { key: platformKey })).body.endpoints).toEqual([]);
  });
});

test('the examples take the backend from AGENTGATE_URL; the old AGENTGATE_BACKEND_URL still works and says it is deprecated', () => {
  const warnings: unknown[] = [];
  const original = console.warn;
  console.warn = (line: unknown) => { warnings.push(line); };
  try {
    expect(backendUrlFromEnv({ AGENTGATE_URL: 'http://a.test', AGENTGATE_BACKEND_URL: 'http://b.test' })).toBe('http://a.test');
    expect(warnings).toEqual([]);
    expect(backendUrlFromEnv({ AGENTGATE_BACKEND_URL: 'http://b.test' })).toBe('http://b.test');
    expect(warnings).toEqual(['AGENTGATE_BACKEND_URL is deprecated: set AGENTGATE_URL (the name the agentgate command reads too)']);
    expect(backendUrlFromEnv({})).toBeUndefined();
  } finally {
    console.warn = original;
  }
});
