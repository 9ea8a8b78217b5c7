/**
 * Payments that must not buy anything, against the Express and Koa example sellers with a real backend
 * and chain: replays, one header raced 50 times, tampered or badly timed authorizations, wrong signers,
 * path tricks, and a backend that is gone. For each: what the buyer gets, that the handler never
 * answered, and that no second (or any) transfer happened.
 */
import { once } from 'node:events';
import { connect } from 'node:net';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { createWeatherApp as createExpressApp } from '../../examples/express-seller/server.js';
import { createWeatherApp as createKoaApp } from '../../examples/koa-seller/server.js';
import { encodeBase64Json } from '../../middleware/index.js';
import type { Authorization } from '../../server/chain/usdc.js';
import { fundedBuyer, paymentHeaderV1, signAuthorization, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from './seller.js';

const PRICE = 10_000n;

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let buyer: PrivateKeyAccount;
const apps: Record<'Express' | 'Koa', RunningApp> = {} as never;

beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
  buyer = await fundedBuyer('5');
  const options = { backendUrl: server.url, apiKey: seller.sellerKey };
  apps.Express = await serve(createExpressApp(options));
  apps.Koa = await serve(createKoaApp(options));
  for (const app of Object.values(apps)) {
    const res = await registerEndpoint(server, seller.platformKey, { url: `${app.url}/weather`, priceUsdc: '0.01' });
    if (res.status !== 201) throw new Error(`register ${app.url}: ${res.status} ${res.text}`);
  }
});

afterAll(async () => {
  await Promise.all(Object.values(apps).map((app) => app.close()));
  await server?.close();
});

const now = () => BigInt(Math.floor(Date.now() / 1000));

/** A correctly signed v1 header paying the seller the price, with `change` applied before signing. */
async function signedV1(change: Partial<Parameters<typeof signAuthorization>[1]> = {}, domain: Parameters<typeof signAuthorization>[2] = {}, signer = buyer) {
  return signAuthorization(signer, { to: seller.payTo, value: PRICE, ...change }, domain);
}

function v2Header(signed: { authorization: Authorization; signature: Hex }, accepted: Record<string, unknown> = {}) {
  const a = signed.authorization;
  return encodeBase64Json({
    x402Version: 2,
    accepted: {
      scheme: 'exact', network: 'eip155:84532', amount: PRICE.toString(), asset: testChain().usdc, payTo: seller.payTo,
      maxTimeoutSeconds: 60, extra: { name: 'USD Coin', version: '2' }, ...accepted,
    },
    payload: {
      signature: signed.signature,
      authorization: { from: a.from, to: a.to, value: a.value.toString(), validAfter: a.validAfter.toString(), validBefore: a.validBefore.toString(), nonce: a.nonce },
    },
  });
}

async function buy(app: RunningApp, header: { name: string; value: string }) {
  const res = await fetch(`${app.url}/weather`, { headers: { [header.name]: header.value } });
  const body = (await res.json()) as Record<string, unknown>;
  return { status: res.status, body };
}
const xPayment = (value: string) => ({ name: 'X-Payment', value });
const paymentSignature = (value: string) => ({ name: 'PAYMENT-SIGNATURE', value });

/** Asks the facilitator directly, without the middleware's cheap local checks in front. */
async function redeemAtBackend(app: RunningApp, paymentHeader: string) {
  return server.request('POST', '/v0/payments/redeem', { key: seller.sellerKey, body: { paymentHeader, resource: `${app.url}/weather`, amount: '0.01' } });
}

test('a route the backend does not know: the buyer gets 402 resource_not_registered, and the seller is told once', async () => {
  // The seller of docs/sellers/middleware.md before syncEndpoints: the middleware prices /weather, the backend has no
  // endpoint at this URL. Used to print nothing at all on the seller's side.
  const warnings: string[] = [];
  const unregistered = await serve(createExpressApp({ backendUrl: server.url, apiKey: seller.sellerKey, warn: (line) => warnings.push(line) }));
  try {
    const before = await usdcBalance(seller.payTo);
    for (let i = 0; i < 3; i++) {
      const res = await buy(unregistered, xPayment(paymentHeaderV1(await signedV1())));
      expect(res).toMatchObject({ status: 402, body: { x402Version: 1, error: 'resource_not_registered' } });
    }
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`the backend refused a payment for ${unregistered.url}/weather (resource_not_registered)`);
    expect(warnings[0]).toContain('syncEndpoints');
    expect(await usdcBalance(seller.payTo)).toBe(before);
  } finally {
    await unregistered.close();
  }
});

describe.each(['Express', 'Koa'] as const)('%s example seller', (framework) => {
  test('a replayed header gets 402 nonce_already_used, and the money moved once', async () => {
    const app = apps[framework];
    const header = xPayment(paymentHeaderV1(await signedV1()));
    const before = await usdcBalance(seller.payTo);

    const first = await buy(app, header);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ paidBy: buyer.address });
    const replay = await buy(app, header);
    expect(replay).toMatchObject({ status: 402, body: { x402Version: 1, error: 'nonce_already_used', accepts: [expect.any(Object)] } });

    expect(await usdcBalance(seller.payTo)).toBe(before + PRICE);
  });

  test('one header sent 50 times at once: exactly one 200, the rest 402 nonce_already_used, one transfer', async () => {
    const app = apps[framework];
    const header = xPayment(paymentHeaderV1(await signedV1()));
    const before = await usdcBalance(seller.payTo);

    const results = await Promise.all(Array.from({ length: 50 }, () => buy(app, header)));

    const served = results.filter((r) => r.status === 200);
    expect(served).toHaveLength(1);
    expect(results.filter((r) => r.status === 402 && r.body.error === 'nonce_already_used')).toHaveLength(49);
    expect(await usdcBalance(seller.payTo)).toBe(before + PRICE);
    const list = await server.request('GET', '/v0/payments?limit=100', { key: seller.sellerKey });
    const settled = (list.body.payments as Array<{ id: string; status: string }>).filter((p) => p.id === served[0]!.body.paymentId);
    expect(settled).toEqual([expect.objectContaining({ status: 'settled' })]);
  });
});

/**
 * Each case: the reason the buyer sees from the seller (the middleware refuses what it can see locally,
 * else passes the backend's reason through) and the backend's own reason when asked directly.
 */
const stranger = privateKeyToAccount(generatePrivateKey());
const otherToken = '0x000000000000000000000000000000000000dEaD' as Address;
interface TamperCase { name: string; header: () => Promise<{ name: string; value: string }>; seller: string; backend: string }
const cases: Array<[string, TamperCase['header'], string, string]> = [
  ['amount below the price', async () => xPayment(paymentHeaderV1(await signedV1({ value: PRICE - 1n }))), 'amount_mismatch', 'amount_mismatch'],
  ['amount above the price', async () => xPayment(paymentHeaderV1(await signedV1({ value: PRICE + 1n }))), 'amount_mismatch', 'amount_mismatch'],
  ['value raised after signing', async () => {
    const signed = await signedV1();
    return xPayment(paymentHeaderV1({ ...signed, authorization: { ...signed.authorization, value: PRICE * 2n } }));
  }, 'invalid_signature', 'invalid_signature'],
  ['payee is someone else', async () => xPayment(paymentHeaderV1(await signedV1({ to: stranger.address }))), 'recipient_mismatch', 'recipient_mismatch'],
  ['network (v1 name) is another chain', async () => xPayment(paymentHeaderV1(await signedV1(), 'base')), 'network_mismatch', 'network_mismatch'],
  ['network (v2 CAIP-2) is another chain', async () => paymentSignature(v2Header(await signedV1(), { network: 'eip155:8453' })), 'network_mismatch', 'network_mismatch'],
  ['asset (v2) is another token', async () => paymentSignature(v2Header(await signedV1(), { asset: otherToken })), 'asset_mismatch', 'asset_mismatch'],
  ['signed for another token contract (v1 has no asset field)', async () => xPayment(paymentHeaderV1(await signedV1({}, { verifyingContract: otherToken }))), 'invalid_signature', 'invalid_signature'],
  ['signed for another chain id', async () => xPayment(paymentHeaderV1(await signedV1({}, { chainId: 8453 }))), 'invalid_signature', 'invalid_signature'],
  ['expired', async () => xPayment(paymentHeaderV1(await signedV1({ validAfter: now() - 600n, validBefore: now() - 10n }))), 'authorization_expired', 'authorization_expired'],
  ['expiring before it could settle', async () => xPayment(paymentHeaderV1(await signedV1({ validBefore: now() + 2n }))), 'authorization_expired', 'authorization_expired'],
  ['not valid yet', async () => xPayment(paymentHeaderV1(await signedV1({ validAfter: now() + 3600n }))), 'authorization_not_yet_valid', 'authorization_not_yet_valid'],
  ['signed by someone other than `from`', async () => {
    const signed = await signedV1({}, {}, stranger);
    return xPayment(paymentHeaderV1({ ...signed, authorization: { ...signed.authorization, from: buyer.address } }));
  }, 'invalid_signature', 'invalid_signature'],
  ['from a payer without funds', async () => xPayment(paymentHeaderV1(await signedV1({}, {}, stranger))), 'insufficient_funds', 'insufficient_funds'],
];

const tampered: TamperCase[] = cases.map(([name, header, seller, backend]) => ({ name, header, seller, backend }));

describe('tampered and mistimed authorizations', () => {
  test.each(tampered)('$name: 402 $seller from the seller ($backend at the backend), no handler, no transfer', async ({ header: makeHeader, seller: sellerReason, backend: backendReason }) => {
    const before = await usdcBalance(seller.payTo);
    for (const app of Object.values(apps)) {
      const header = await makeHeader();
      const res = await buy(app, header);
      expect({ status: res.status, error: res.body.error }).toEqual({ status: 402, error: sellerReason });
      expect(res.body.temperatureC).toBeUndefined();

      const direct = await redeemAtBackend(app, (await makeHeader()).value);
      expect({ status: direct.status, error: direct.body.error }).toEqual({ status: 402, error: backendReason });
    }
    expect(await usdcBalance(seller.payTo)).toBe(before);
  });
});

/** Request targets that some router could send to GET /weather; raw bytes, since fetch normalizes. */
const TRICKS = [
  '/WEATHER', '/Weather/', '/weather//', '//weather', '/weather?x', '/%77eather', '/./weather', '/x/../weather', '/weather/.',
  '/weather%2f', '/weather%2F', '/weather%20', '/weather;x', '/weather\\', '/weather%5c', '/weather%00', '/weather%09',
  '/%2e%2e/weather', '/weather%252f', '/;/weather', '/%2fweather', 'http://evil.example/weather', '/weather%23',
];

async function rawGet(app: RunningApp, target: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const { hostname, port } = new URL(app.url);
  const socket = connect(Number(port), hostname);
  await once(socket, 'connect');
  const lines = Object.entries({ Host: `${hostname}:${port}`, Connection: 'close', ...headers }).map(([k, v]) => `${k}: ${v}\r\n`);
  socket.write(`GET ${target} HTTP/1.1\r\n${lines.join('')}\r\n`);
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await once(socket, 'close');
  const text = Buffer.concat(chunks).toString('utf8');
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text };
}

describe.each(['Express', 'Koa'] as const)('path tricks against the %s example', (framework) => {
  test('no spelling of /weather reaches the handler unpaid', async () => {
    const outcomes: Record<string, number> = {};
    for (const target of TRICKS) {
      const res = await rawGet(apps[framework], target);
      outcomes[target] = res.status;
      expect({ target, servedForecast: res.text.includes('temperatureC') }).toEqual({ target, servedForecast: false });
      expect({ target, refused: [400, 402, 404].includes(res.status) }).toEqual({ target, refused: true });
    }
    // The protected spellings are priced, the malformed ones refused.
    expect(outcomes['/WEATHER']).toBe(402);
    expect(outcomes['/weather%2F']).toBe(400);
  });
});

describe('backend gone', () => {
  test('a paid request answers 503 without running the handler; unpaid ones still get the local 402', async () => {
    const own = await startTestServer();
    const ownSeller = await setUpSeller(own);
    const app = await serve(createExpressApp({ backendUrl: own.url, apiKey: ownSeller.sellerKey }));
    try {
      expect((await registerEndpoint(own, ownSeller.platformKey, { url: `${app.url}/weather`, priceUsdc: '0.01' })).status).toBe(201);
      await own.close();

      const signed = await signAuthorization(buyer, { to: ownSeller.payTo, value: PRICE });
      const paid = await fetch(`${app.url}/weather`, { headers: { 'X-Payment': paymentHeaderV1(signed) } });
      expect(paid.status).toBe(503);
      expect(await paid.json()).toMatchObject({ error: 'facilitator_unavailable', status: 503 });
      expect((await fetch(`${app.url}/weather`)).status).toBe(402);

      // A seller that starts while the backend is down cannot even price the route: 503, free routes work.
      const late = await serve(createKoaApp({ backendUrl: own.url, apiKey: ownSeller.sellerKey, onError: () => {} }));
      try {
        expect((await fetch(`${late.url}/weather`)).status).toBe(503);
        expect((await fetch(`${late.url}/cities`)).status).toBe(200);
      } finally {
        await late.close();
      }
      expect(await usdcBalance(ownSeller.payTo)).toBe(0n);
    } finally {
      await app.close();
    }
  });
});
