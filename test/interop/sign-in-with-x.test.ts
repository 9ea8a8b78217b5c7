// Sign-In-With-X with the official packages: a buyer pays a route of our middleware (Express, Koa, Hono,
// Fastify) with the official @x402/fetch client, then reaches it again with the official
// `wrapFetchWithSIWx` (the extension's client: it reads our 402's challenge and signs it with the paying
// wallet), served without paying twice. A wallet that never paid, a replayed message and a message for
// another origin are refused; copies of one signed message sent at once to two backend processes sharing
// the database open the resource once (the nonce is a unique insert).
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import Router from '@koa/router';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { registerExactEvmScheme as registerClientEvm } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { createSIWxPayload, encodeSIWxHeader, wrapFetchWithSIWx } from '@x402/extensions/sign-in-with-x';
import type { PrivateKeyAccount } from 'viem/accounts';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { paymentMiddleware as koaPayments } from '../../adapters/koa.js';
import { paymentMiddleware as honoPayments, type PaymentEnv } from '../../adapters/hono.js';
import { paymentMiddleware as fastifyPayments } from '../../adapters/fastify.js';
import type { RequestPayment } from '../../middleware/index.js';
import { fundedBuyer, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from './seller.js';

const NETWORK = 'eip155:84532';
type Framework = 'Express' | 'Koa' | 'Hono' | 'Fastify';

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
const apps: Partial<Record<Framework, RunningApp>> = {};

const answer = (payment: RequestPayment) => ({ payer: payment.payer, paymentId: payment.paymentId, signedIn: payment.signedInWithX ?? false });

function app(framework: Framework, backendUrl: string) {
  const options = { backendUrl, apiKey: seller.sellerKey, routes: { 'GET /report': { price: '$0.01', signInWithX: { statement: 'Sign in to read the report again' } } } };
  switch (framework) {
    case 'Express': {
      const a = express();
      a.use(expressPayments(options));
      a.get('/report', (_req, res) => { res.json(answer(res.locals.payment)); });
      return a;
    }
    case 'Koa': {
      const a = new Koa();
      const router = new Router();
      router.get('/report', (ctx) => { ctx.body = answer(ctx.state.payment); });
      return a.use(koaPayments(options)).use(router.routes());
    }
    case 'Hono': {
      const a = new Hono<PaymentEnv>();
      a.use(honoPayments(options));
      a.get('/report', (c) => c.json(answer(c.get('payment'))));
      return a;
    }
    case 'Fastify': {
      const a = Fastify();
      void a.register(fastifyPayments(options));
      a.get('/report', async (request) => answer(request.payment));
      return a;
    }
  }
}

beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
  for (const framework of ['Express', 'Koa', 'Hono', 'Fastify'] as const) {
    apps[framework] = await serve(app(framework, server.url) as never);
    expect(await registerEndpoint(server, seller.platformKey, { url: `${apps[framework]!.url}/report`, priceUsdc: '0.01' })).toMatchObject({ status: 201 });
  }
}, 60_000);

afterAll(async () => {
  await Promise.all(Object.values(apps).map((a) => a.close()));
  await server?.close();
});

const payingFetch = (buyer: PrivateKeyAccount) => wrapFetchWithPayment(fetch, registerClientEvm(new x402Client(), { signer: buyer })
  .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] }));

/** The official client's signed answer to our 402's challenge, as a header value. */
async function signedHeader(url: string, signer: PrivateKeyAccount): Promise<string> {
  const response = await fetch(url);
  expect(response.status).toBe(402);
  const required = decodePaymentRequiredHeader(response.headers.get('PAYMENT-REQUIRED')!);
  const challenge = required.extensions!['sign-in-with-x'] as { info: Record<string, unknown>; supportedChains: Array<{ chainId: string; type: string }> };
  expect(challenge.supportedChains).toEqual([{ chainId: NETWORK, type: 'eip191' }]);
  const payload = await createSIWxPayload({ ...challenge.info, chainId: NETWORK, type: 'eip191' } as never, signer, url);
  return encodeSIWxHeader(payload);
}

describe.each(['Express', 'Koa', 'Hono', 'Fastify'] as const)('%s', (framework) => {
  test('a buyer who paid signs in with the paying wallet and is served again without paying twice', async () => {
    const url = `${apps[framework]!.url}/report`;
    const buyer = await fundedBuyer('1');
    const paid = await payingFetch(buyer)(url);
    expect(paid.status).toBe(200);
    const first = await paid.json() as { paymentId: string; signedIn: boolean };
    expect(first).toMatchObject({ payer: buyer.address, signedIn: false });
    const balance = await usdcBalance(buyer.address);

    const again = await wrapFetchWithSIWx(fetch, buyer)(url);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ payer: buyer.address, paymentId: first.paymentId, signedIn: true });
    expect(again.headers.get('PAYMENT-RESPONSE')).toBeNull();
    expect(await usdcBalance(buyer.address)).toBe(balance);
  });
});

describe('refusals', () => {
  const url = () => `${apps.Express!.url}/report`;

  test('a wallet that never paid for the resource is asked to pay', async () => {
    const stranger = privateKeyToAccount(generatePrivateKey());
    const response = await fetch(url(), { headers: { 'SIGN-IN-WITH-X': await signedHeader(url(), stranger) } });
    expect(response.status).toBe(402);
    const direct = await server.request('POST', '/v0/payments/sign-in-with-x', { key: seller.sellerKey, body: { header: await signedHeader(url(), stranger), resource: url() } });
    expect(direct).toMatchObject({ status: 200, body: { granted: false, reason: 'siwx_not_paid' } });
  });

  test('a signed message opens the resource once; a replay is asked to pay', async () => {
    const buyer = await fundedBuyer('1');
    expect((await payingFetch(buyer)(url())).status).toBe(200);
    const header = await signedHeader(url(), buyer);
    expect((await fetch(url(), { headers: { 'SIGN-IN-WITH-X': header } })).status).toBe(200);
    expect((await fetch(url(), { headers: { 'SIGN-IN-WITH-X': header } })).status).toBe(402);
    const direct = await server.request('POST', '/v0/payments/sign-in-with-x', { key: seller.sellerKey, body: { header, resource: url() } });
    expect(direct.body).toMatchObject({ granted: false, reason: 'invalid_siwx_nonce' });
  });

  test('a message signed for one origin does not open another; a forged signature is refused', async () => {
    const buyer = await fundedBuyer('1');
    expect((await payingFetch(buyer)(url())).status).toBe(200);
    const header = await signedHeader(url(), buyer);
    const other = await server.request('POST', '/v0/payments/sign-in-with-x', { key: seller.sellerKey, body: { header, resource: `${apps.Koa!.url}/report` } });
    expect(other.body).toMatchObject({ granted: false, reason: 'invalid_siwx_domain_mismatch' });
    const payload = JSON.parse(Buffer.from(header, 'base64').toString());
    const forged = Buffer.from(JSON.stringify({ ...payload, address: privateKeyToAccount(generatePrivateKey()).address })).toString('base64');
    const refused = await server.request('POST', '/v0/payments/sign-in-with-x', { key: seller.sellerKey, body: { header: forged, resource: url() } });
    expect(refused.body).toMatchObject({ granted: false, reason: 'invalid_siwx_signature' });
    const malformed = await server.request('POST', '/v0/payments/sign-in-with-x', { key: seller.sellerKey, body: { header: 42, resource: url() } });
    expect(malformed).toMatchObject({ status: 400, body: { error: 'validation_error', status: 400 } });
  });

  test('copies of one message sent at once to two backend processes on one database open the resource once', async () => {
    const second = await startTestServer({ MONGODB_DB: server.config.MONGODB_DB });
    try {
      const buyer = await fundedBuyer('1');
      expect((await payingFetch(buyer)(url())).status).toBe(200);
      const header = await signedHeader(url(), buyer);
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? server : second)
        .request('POST', '/v0/payments/sign-in-with-x', { key: seller.sellerKey, body: { header, resource: url() } })));
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
      expect(results.filter((r) => r.body.granted === true)).toHaveLength(1);
      expect(results.filter((r) => r.body.reason === 'invalid_siwx_nonce')).toHaveLength(5);
    } finally {
      await second.close();
    }
  });
});
