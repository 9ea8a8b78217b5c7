// A seller on `agentgate serve` in production mode, the way an operator runs it: the real CLI as its own
// process, with ALLOWED_PRIVATE_ADDRESSES=127.0.0.1 (the seller is on the operator's own network, here
// this machine) and no dev-only setting. The seller signs up over HTTP, turns acceptance on, mounts one
// Express app with our middleware offering a route of every scheme (exact by EIP-3009 and through Permit2,
// upto, batch-settlement at a fixed price and by usage, auth-capture) and registers them all with
// syncEndpoints: the backend fetches each route's 402 and checks the offer. Then the official client
// (@x402/fetch with the @x402/evm schemes) pays each route, and the seller's records list every payment.
import { randomBytes } from 'node:crypto';
import express from 'express';
import { MongoClient } from 'mongodb';
import { x402Client } from '@x402/core/client';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { toClientEvmSigner } from '@x402/evm';
import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import { BatchSettlementEvmScheme, InMemoryClientChannelStorage } from '@x402/evm/batch-settlement/client';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { paymentMiddleware, syncEndpoints } from '../../adapters/express.js';
import type { RequestPayment, RouteConfig } from '../../middleware/index.js';
import { freePort } from '../../server/platform/net.js';
import { chainConfig, permit2ApprovedBuyer, testChain } from '../support/chain.js';
import { spawnAgentgate, type AgentgateProcess } from '../support/processes.js';
import { testDbName } from '../support/server.js';
import { serve, type RunningApp } from './seller.js';

const NETWORK = 'eip155:84532';
const DATABASE = testDbName();

/** Every scheme our middleware sells, one route each; what each is registered at follows from its price. */
const ROUTES: Record<string, RouteConfig> = {
  'GET /exact': { price: '$0.01', description: 'exact, EIP-3009' },
  'GET /exact-permit2': { price: '$0.01', assetTransferMethod: 'permit2', description: 'exact through Permit2' },
  // POST only, as an LLM API is: syncEndpoints has the backend check its 402 with POST.
  'POST /upto': { price: { upto: '$0.50' }, description: 'upto, charged by usage' },
  'GET /channel': { price: '$0.001', scheme: 'batch-settlement', description: 'batch-settlement, per call' },
  'GET /channel-usage': { price: { upto: '$0.01' }, scheme: 'batch-settlement', description: 'batch-settlement, by usage' },
  'GET /auth-capture': { price: '$0.25', scheme: 'auth-capture', description: 'auth-capture, refundable' },
};
/** What the routes priced by usage report their request used. */
const USED = { '/upto': '$0.0123', '/channel-usage': '$0.002' } as Record<string, string>;

let backend: AgentgateProcess;
let shop: RunningApp;
let seller: { platformKey: string; sellerKey: string; payTo: string };

/** A JSON call to the backend, as any HTTP client of it makes one. */
async function call(method: string, path: string, key: string | undefined, body?: unknown) {
  const res = await fetch(`${backend.url}${path}`, { method, headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: res.status, body: await res.json() as any };
}

beforeAll(async () => {
  const port = await freePort();
  backend = await spawnAgentgate('serve', {
    AGENTGATE_MODE: 'production', ALLOWED_PRIVATE_ADDRESSES: '127.0.0.1',
    HOST: '127.0.0.1', PORT: String(port), BASE_URL: `http://127.0.0.1:${port}`, MAIL_DOMAIN: 'agents.test', DID_DOMAIN: `127.0.0.1%3A${port}`,
    MASTER_KEY: randomBytes(32).toString('hex'), MONGODB_URI: process.env.AGENTGATE_TEST_MONGODB_URI!, MONGODB_DB: DATABASE,
    SMTP_HOST: '127.0.0.1', SMTP_PORT: '0', LOG_LEVEL: 'info',
    ...(await chainConfig()),
  });

  // The seller's set-up, over HTTP: sign up, acceptance on, a seller key for the middleware.
  const signup = await call('POST', '/v0/agent-signup', undefined, {});
  expect(signup.status).toBe(201);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  expect((await call('PUT', '/v0/payments/acceptance', signup.body.platform_key, { enabled: true, payTo })).status).toBe(200);
  const key = await call('POST', '/v0/payments/seller-keys', signup.body.platform_key, {});
  expect(key.status).toBe(201);
  seller = { platformKey: signup.body.platform_key, sellerKey: key.body.apiKey, payTo };

  const app = express();
  app.use(paymentMiddleware({ backendUrl: backend.url!, apiKey: seller.sellerKey, routes: ROUTES }));
  for (const pattern of Object.keys(ROUTES)) {
    const [method, path] = pattern.split(' ') as ['GET' | 'POST', string];
    app[method === 'POST' ? 'post' : 'get'](path, (_req, res) => {
      const payment = res.locals.payment as RequestPayment;
      if (USED[path]) payment.charge(USED[path]);
      res.json({ path, scheme: payment.scheme, paymentId: payment.paymentId });
    });
  }
  shop = await serve(app);
}, 120_000);

afterAll(async () => {
  await shop?.close();
  await backend?.stop();
  const client = await MongoClient.connect(process.env.AGENTGATE_TEST_MONGODB_URI!);
  await client.db(DATABASE).dropDatabase().catch(() => {});
  await client.close();
});

/** The official client of `buyer`, with every @x402/evm scheme registered on the network. */
function officialClient(buyer: PrivateKeyAccount) {
  const { publicClient, usdc } = testChain();
  const signer = toClientEvmSigner(buyer, publicClient as never);
  const client = new x402Client()
    .register(NETWORK, new ExactEvmScheme(signer))
    .register(NETWORK, new UptoEvmScheme(signer))
    .register(NETWORK, new BatchSettlementEvmScheme(signer, { storage: new InMemoryClientChannelStorage() }))
    .register(NETWORK, new AuthCaptureEvmScheme(signer))
    .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: usdc, maxAmountPerPayment: '1000000' }] });
  return wrapFetchWithPayment(fetch, client);
}

/** Polls `read` until it returns something, for a record written just after the answer. */
async function eventually<T>(what: string, read: () => Promise<T | undefined>): Promise<T> {
  for (const deadline = Date.now() + 15_000; ; await new Promise((r) => setTimeout(r, 100))) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`waited 15 s for ${what}`);
  }
}

/**
 * The seller's record of a paid request: GET /v0/payments/{id} for a transfer; a channel call (its handler
 * saw the voucher's hold id) is found among its channel's calls, by the URL it paid for.
 */
async function recordOf(paid: { path: string; scheme: string; paymentId: string; settlement: { extra?: Record<string, unknown> } }) {
  if (paid.scheme === 'batch-settlement') {
    const channelId = (paid.settlement.extra!.channelState as { channelId: string }).channelId;
    return eventually(`the call to ${paid.path}`, async () => {
      const calls = await call('GET', `/v0/payments/channels/${channelId}/calls`, seller.sellerKey);
      return calls.body.calls?.find((c: any) => c.resourceUrl === `${shop.url}${paid.path}` && c.status === 'accepted');
    });
  }
  return eventually(`the record of ${paid.paymentId}`, async () => {
    const res = await call('GET', `/v0/payments/${paid.paymentId}`, seller.sellerKey);
    return res.status === 200 && res.body.status === 'settled' ? res.body : undefined;
  });
}

it('registers a route of every scheme with syncEndpoints, the official client pays each one, and the seller’s records list them', async () => {
  // Registered as docs/sellers/middleware.md shows; the backend fetched each route and read its offer.
  const report = await syncEndpoints({ backendUrl: backend.url!, platformKey: seller.platformKey, publicOrigin: shop.url, routes: ROUTES });
  expect(report.skipped).toEqual([]);
  expect(report.created.map((e) => [e.url, e.priceUsdc])).toEqual([
    [`${shop.url}/exact`, '0.01'], [`${shop.url}/exact-permit2`, '0.01'], [`${shop.url}/upto`, '0.5'],
    [`${shop.url}/channel`, '0.001'], [`${shop.url}/channel-usage`, '0.01'], [`${shop.url}/auth-capture`, '0.25'],
  ]);

  const buyer = await permit2ApprovedBuyer('5');
  const pay = officialClient(buyer);
  const paid: Array<{ path: string; scheme: string; paymentId: string; settlement: ReturnType<typeof decodePaymentResponseHeader> }> = [];
  for (const pattern of Object.keys(ROUTES)) {
    const [method, path] = pattern.split(' ') as [string, string];
    const res = await pay(`${shop.url}${path}`, { method });
    const body = await res.json() as { path: string; scheme: string; paymentId: string };
    expect([path, res.status]).toEqual([path, 200]);
    const settlement = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect([path, settlement]).toEqual([path, expect.objectContaining({ success: true, network: NETWORK, payer: buyer.address })]);
    paid.push({ ...body, settlement });
  }
  expect(paid.map((p) => [p.path, p.scheme])).toEqual([
    ['/exact', 'exact'], ['/exact-permit2', 'exact'], ['/upto', 'upto'],
    ['/channel', 'batch-settlement'], ['/channel-usage', 'batch-settlement'], ['/auth-capture', 'auth-capture'],
  ]);
  // What each settlement moved: the price, or what the route priced by usage reported.
  expect(paid.find((p) => p.path === '/upto')!.settlement).toMatchObject({ amount: '12300' });

  // Each payment is the seller's record, for the URL it registered.
  const records = Object.fromEntries(await Promise.all(paid.map(async (p) => [p.path, await recordOf(p)] as const)));
  expect(records).toEqual({
    '/exact': expect.objectContaining({ scheme: 'exact', assetTransferMethod: 'eip3009', status: 'settled', amountUsdcRaw: '10000', txHash: paid[0]!.settlement.transaction }),
    '/exact-permit2': expect.objectContaining({ scheme: 'exact', assetTransferMethod: 'permit2', status: 'settled', amountUsdcRaw: '10000', txHash: paid[1]!.settlement.transaction }),
    '/upto': expect.objectContaining({ scheme: 'upto', status: 'settled', amountUsdcRaw: '12300', maxAmountUsdcRaw: '500000' }),
    '/channel': expect.objectContaining({ scheme: 'batch-settlement', status: 'accepted', amountUsdcRaw: '1000' }),
    '/channel-usage': expect.objectContaining({ scheme: 'batch-settlement', status: 'accepted', amountUsdcRaw: '2000', maxAmountUsdcRaw: '10000' }),
    '/auth-capture': expect.objectContaining({ scheme: 'auth-capture', status: 'settled', amountUsdcRaw: '250000' }),
  });
  for (const [path, record] of Object.entries(records)) expect([path, record.resourceUrl]).toEqual([path, `${shop.url}${path}`]);

  // The lists the seller reads: payments (the transfers) and channels (their calls).
  const payments = await call('GET', '/v0/payments', seller.sellerKey);
  expect(payments.body.payments.map((p: any) => p.id).sort()).toEqual(paid.filter((p) => p.scheme !== 'batch-settlement').map((p) => p.paymentId).sort());
  const channels = await call('GET', '/v0/payments/channels', seller.sellerKey);
  expect(channels.body.channels.reduce((calls: number, c: any) => calls + c.callCount, 0)).toBe(2);
}, 180_000);
