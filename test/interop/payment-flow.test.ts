// x402 v2 `paymentFlow` (accepts[].extra.paymentFlow; absent = authorization; the official core 2.27 reads
// and writes it the same way): our settle modes written
// as the spec names them in every adapter's 402 (after-handler = authorization, not written;
// before-handler = upfront), read back from the buyer's `accepted`, taken by the facilitator API from an
// official seller that asks for `upfront`, refused for a flow a scheme has not, and preferred by our buyer.
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import Router from '@koa/router';
import { createServer } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { x402Client } from '@x402/core/client';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { registerExactEvmScheme as registerClientEvm } from '@x402/evm/exact/client';
import { registerExactEvmScheme as registerServerEvm } from '@x402/evm/exact/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import type { PrivateKeyAccount } from 'viem/accounts';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { paymentMiddleware as koaPayments } from '../../adapters/koa.js';
import { paymentMiddleware as honoPayments } from '../../adapters/hono.js';
import { paymentMiddleware as fastifyPayments } from '../../adapters/fastify.js';
import { decodeBase64Json, encodeBase64Json, type RouteConfig } from '../../middleware/index.js';
import { chooseOffer, readChallenge } from '../../server/buyer/challenge.js';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { fundedBuyer, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from './seller.js';

const NETWORK = 'eip155:84532';
const PRICE = 10_000n;

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
}, 60_000);
afterAll(async () => { await server?.close(); });

const ROUTES: Record<string, RouteConfig> = {
  'GET /after': { price: '$0.01' },
  'GET /before': { price: '$0.01', settle: 'before-handler' },
};
type Framework = 'Express' | 'Koa' | 'Hono' | 'Fastify';
const options = () => ({ backendUrl: server.url, apiKey: seller.sellerKey, routes: ROUTES });
const APPS: Record<Framework, () => Parameters<typeof serve>[0]> = {
  Express: () => {
    const app = express();
    app.use(expressPayments(options()));
    app.get(['/after', '/before'], (_req, res) => { res.json({ ok: true }); });
    return app;
  },
  Koa: () => {
    const app = new Koa();
    const router = new Router();
    router.get(['/after', '/before'], (ctx) => { ctx.body = { ok: true }; });
    app.use(koaPayments(options()));
    app.use(router.routes());
    return app;
  },
  Hono: () => {
    const app = new Hono();
    app.use(honoPayments(options()));
    app.get('/after', (c) => c.json({ ok: true }));
    app.get('/before', (c) => c.json({ ok: true }));
    return app;
  },
  Fastify: () => {
    const app = Fastify();
    app.register(fastifyPayments(options()));
    app.get('/after', async () => ({ ok: true }));
    app.get('/before', async () => ({ ok: true }));
    return app;
  },
};

async function sellerApp(framework: Framework): Promise<RunningApp> {
  const running = await serve(APPS[framework]());
  for (const path of ['/after', '/before']) {
    const registered = await registerEndpoint(server, seller.platformKey, { url: `${running.url}${path}`, priceUsdc: '0.01' });
    if (registered.status !== 201) throw new Error(`register: ${registered.status} ${registered.text}`);
  }
  return running;
}

/** The v2 402 of a URL, decoded from PAYMENT-REQUIRED. */
async function challengeOf(url: string) {
  const res = await fetch(url);
  expect(res.status).toBe(402);
  const decoded = decodeBase64Json(res.headers.get('payment-required')!);
  if (!decoded.ok) throw new Error('no PAYMENT-REQUIRED');
  return decoded.value as { accepts: Array<{ extra: Record<string, unknown> }> };
}

const officialFetch = (buyer: PrivateKeyAccount) => wrapFetchWithPayment(fetch, registerClientEvm(new x402Client(), { signer: buyer })
  .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] }));

describe.each<Framework>(['Express', 'Koa', 'Hono', 'Fastify'])('%s seller', (framework) => {
  it('writes after-handler as the default authorization flow (no paymentFlow) and before-handler as upfront; the official client pays both', async () => {
    const app = await sellerApp(framework);
    try {
      const after = await challengeOf(`${app.url}/after`);
      expect(after.accepts[0]!.extra).toEqual({ name: DEV_USDC_NAME, version: '2' });
      const before = await challengeOf(`${app.url}/before`);
      expect(before.accepts[0]!.extra).toEqual({ name: DEV_USDC_NAME, version: '2', paymentFlow: 'upfront' });

      const buyer = await fundedBuyer('1');
      for (const path of ['/after', '/before']) expect((await officialFetch(buyer)(`${app.url}${path}`)).status).toBe(200);
      expect(await usdcBalance(buyer.address)).toBe(1_000_000n - 2n * PRICE);
    } finally {
      await app.close();
    }
  });
});

it('reads the flow back from the payment: an accepted requirement that names another flow is refused, nothing charged', async () => {
  const app = await sellerApp('Express');
  try {
    const buyer = await fundedBuyer('1');
    // The official client signs for /before's 402; the header is then edited to claim the authorization flow.
    let header: string | undefined;
    const capture: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      const sent = request.headers.get('payment-signature');
      if (sent) { header = sent; return new Response('{}', { status: 400 }); }
      return fetch(request);
    };
    await wrapFetchWithPayment(capture, registerClientEvm(new x402Client(), { signer: buyer })
      .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] }))(`${app.url}/before`);
    const payment = decodeBase64Json(header!);
    if (!payment.ok) throw new Error('no payment');
    const value = payment.value as { accepted: { extra: Record<string, unknown> } };
    expect(value.accepted.extra.paymentFlow).toBe('upfront');
    const { paymentFlow: _upfront, ...authorization } = value.accepted.extra;
    const edited = encodeBase64Json({ ...value, accepted: { ...value.accepted, extra: authorization } });
    const refused = await fetch(`${app.url}/before`, { headers: { 'payment-signature': edited } });
    expect(refused.status).toBe(402);
    expect(await refused.json()).toMatchObject({ error: 'payment_flow_mismatch' });
    // The unedited payment goes through.
    expect((await fetch(`${app.url}/before`, { headers: { 'payment-signature': header! } })).status).toBe(200);
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
  } finally {
    await app.close();
  }
});

describe('the facilitator API and an official seller that names its flow', () => {
  const facilitator = () => new HTTPFacilitatorClient({
    url: `${server.url}/v0/x402`,
    createAuthHeaders: async () => { const h = { Authorization: `Bearer ${seller.sellerKey}` }; return { verify: h, settle: h, supported: h }; },
  });

  async function officialSeller(paymentFlow: string) {
    const resourceServer = registerServerEvm(new x402ResourceServer(facilitator()), { networks: [NETWORK] });
    const app = express();
    app.use(officialPaymentMiddleware({
      'GET /report': {
        accepts: { scheme: 'exact', network: NETWORK, payTo: seller.payTo, price: { asset: testChain().usdc, amount: String(PRICE), extra: { name: DEV_USDC_NAME, version: '2', paymentFlow } } },
        description: 'Report', mimeType: 'application/json',
      },
    }, resourceServer));
    app.get('/report', (_req, res) => { res.json({ report: 'done' }); });
    const http = createServer(app);
    http.listen(0, '127.0.0.1');
    await once(http, 'listening');
    return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, close: () => { http.closeAllConnections(); http.close(); } };
  }

  it('settles an upfront payment for an @x402/express seller, and refuses a flow exact does not have', async () => {
    const upfront = await officialSeller('upfront');
    try {
      const buyer = await fundedBuyer('1');
      const res = await officialFetch(buyer)(`${upfront.url}/report`);
      expect(res.status).toBe(200);
      expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
    } finally {
      upfront.close();
    }
    // A flow exact has not: the official seller refuses to build it at all (its ExactEvmScheme supports
    // authorization and upfront), so ask the facilitator directly, as another SDK's seller could.
    const buyer = await fundedBuyer('1');
    const requirements = { scheme: 'exact', network: NETWORK, amount: String(PRICE), asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 60, extra: { name: DEV_USDC_NAME, version: '2', paymentFlow: 'escrow' } };
    const payload = { x402Version: 2, accepted: requirements, payload: { signature: '0x00', authorization: { from: buyer.address, to: seller.payTo, value: String(PRICE), validAfter: '0', validBefore: '9999999999', nonce: `0x${'11'.repeat(32)}` } } };
    for (const call of ['verify', 'settle'] as const) {
      const answer = await facilitator()[call](payload as never, requirements as never).catch((err: unknown) => err);
      expect(answer).toMatchObject(call === 'verify'
        ? { invalidReason: 'invalid_payment_requirements', invalidMessage: 'exact settles with paymentFlow authorization or upfront, not escrow' }
        : { errorReason: 'invalid_payment_requirements', errorMessage: 'exact settles with paymentFlow authorization or upfront, not escrow' });
    }
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n);
  });
});

it('our buyer (payments_pay) prefers the authorization flow when a seller offers both, and never picks one it cannot pay by', () => {
  const chain = testChain();
  const accept = (extra: Record<string, unknown>, amount: string) => ({ scheme: 'exact', network: NETWORK, amount, asset: chain.usdc, payTo: seller.payTo, maxTimeoutSeconds: 60, extra: { name: DEV_USDC_NAME, version: '2', ...extra } });
  const challengeWith = (accepts: unknown[]) => readChallenge({
    status: 402, bodyText: '{}',
    headers: { 'payment-required': encodeBase64Json({ x402Version: 2, resource: { url: 'https://shop.example/x' }, accepts }) },
  } as never)!;
  const ours = { network: 'base-sepolia', caip2: NETWORK, usdc: chain.usdc };
  const both = chooseOffer(challengeWith([accept({ paymentFlow: 'upfront' }, '1'), accept({}, '2')]), ours);
  expect(both).toMatchObject({ ok: true, amount: 2n });
  const upfrontOnly = chooseOffer(challengeWith([accept({ paymentFlow: 'escrow' }, '3'), accept({ paymentFlow: 'upfront' }, '1')]), ours);
  expect(upfrontOnly).toMatchObject({ ok: true, amount: 1n });
  expect(chooseOffer(challengeWith([accept({ paymentFlow: 'escrow' }, '3')]), ours)).toMatchObject({ ok: false });
});
