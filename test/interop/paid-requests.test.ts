/**
 * The whole paid request with nothing faked: the official buyer clients (x402-fetch v1, @x402/fetch +
 * @x402/evm v2) pay the Express, Koa, Hono and Fastify example sellers, whose middleware redeems at a real backend that
 * settles on the test chain. What a seller would check afterwards: the handler's output, the payment
 * record, the money on chain, and the signed receipt.
 */
import type { Hex } from 'viem';
import { verifyReceiptSignatureJWS, type JWSSignedReceipt } from '@x402/extensions/offer-receipt';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { payWithV1, payWithV2, type PaidResponse } from '../../examples/buyer/buyer.js';
import { createWeatherApp as createExpressApp } from '../../examples/express-seller/server.js';
import { createWeatherApp as createKoaApp } from '../../examples/koa-seller/server.js';
import { createWeatherApp as createHonoApp } from '../../examples/hono-seller/server.js';
import { createWeatherApp as createFastifyApp } from '../../examples/fastify-seller/server.js';
import { verifyReceipt, type PaymentRecord } from '../../middleware/index.js';
import type { DidDocument } from 'agentgate-x402-wire';
import { sendUsdc, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from './seller.js';

const PRICE_ATOMIC = 10_000n; // the examples' $0.01

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
type Framework = 'Express' | 'Koa' | 'Hono' | 'Fastify';
const apps: Record<Framework, RunningApp> = {} as never;
const registered: Record<Framework, { status: number; body: any }> = {} as never;

beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
  const options = { backendUrl: server.url, apiKey: seller.sellerKey };
  apps.Express = await serve(createExpressApp(options));
  apps.Koa = await serve(createKoaApp(options));
  apps.Hono = await serve(createHonoApp(options));
  apps.Fastify = await serve(createFastifyApp(options));
  // The backend fetches each running example's /weather and checks our 402.
  registered.Express = await registerEndpoint(server, seller.platformKey, { url: `${apps.Express.url}/weather`, priceUsdc: '0.01' });
  registered.Koa = await registerEndpoint(server, seller.platformKey, { url: `${apps.Koa.url}/weather`, priceUsdc: '0.01' });
  registered.Hono = await registerEndpoint(server, seller.platformKey, { url: `${apps.Hono.url}/weather`, priceUsdc: '0.01' });
  registered.Fastify = await registerEndpoint(server, seller.platformKey, { url: `${apps.Fastify.url}/weather`, priceUsdc: '0.01' });
});

afterAll(async () => {
  await Promise.all(Object.values(apps).map((app) => app.close()));
  await server?.close();
});

describe('endpoint registration', () => {
  test('passes the URL check against each running example seller', () => {
    for (const framework of ['Express', 'Koa', 'Hono', 'Fastify'] as const) {
      expect(registered[framework]).toMatchObject({ status: 201, body: { url: `${apps[framework].url}/weather`, priceUsdc: '0.01' } });
    }
  });

  test('the URL check refuses a wrong price and a free route', async () => {
    const wrongPrice = await registerEndpoint(server, seller.platformKey, { url: `${apps.Express.url}/weather/`, priceUsdc: '0.02' });
    expect(wrongPrice).toMatchObject({ status: 400, body: { error: 'endpoint_check_failed' } });
    const free = await registerEndpoint(server, seller.platformKey, { url: `${apps.Express.url}/cities`, priceUsdc: '0.01' });
    expect(free).toMatchObject({ status: 400, body: { error: 'endpoint_check_failed' } });
  });
});

type Pay = (url: string, key: Hex) => Promise<PaidResponse>;
const clients: Array<[string, Pay]> = [
  ['x402-fetch (v1)', (url, key) => payWithV1(url, key)],
  ['@x402/fetch + @x402/evm (v2)', (url, key) => payWithV2(url, key, { chainId: 84532, address: testChain().usdc })],
];

describe.each(['Express', 'Koa', 'Hono', 'Fastify'] as const)('%s example seller', (framework) => {
  test.each(clients)('paid by %s: 200 with the handler output, a settled record, the price on chain, a valid receipt', async (_client, pay) => {
    const key = generatePrivateKey();
    const buyer = privateKeyToAccount(key);
    await sendUsdc(buyer.address, 1_000_000n);
    const payToBefore = await usdcBalance(seller.payTo);
    const buyerBefore = await usdcBalance(buyer.address);

    const result = await pay(`${apps[framework].url}/weather?city=Oslo`, key);

    expect(result.status).toBe(200);
    const body = result.body as { city: string; temperatureC: number; paidBy: string; paymentId: string };
    expect(body).toMatchObject({ city: 'Oslo', temperatureC: expect.any(Number), paidBy: buyer.address });
    expect(result.settlement).toMatchObject({ success: true, payer: buyer.address, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) });

    const record = await server.request('GET', `/v0/payments/${body.paymentId}`, { key: seller.sellerKey });
    expect(record.status).toBe(200);
    const payment = record.body as PaymentRecord;
    expect(payment).toMatchObject({
      id: body.paymentId,
      status: 'settled',
      txHash: result.settlement!.transaction,
      payerAddress: buyer.address,
      recipientAddress: seller.payTo,
      amountUsdcRaw: PRICE_ATOMIC.toString(),
      resourceUrl: `${apps[framework].url}/weather`,
    });
    const receipt = await testChain().publicClient.getTransactionReceipt({ hash: payment.txHash as Hex });
    expect(receipt.status).toBe('success');

    expect(await usdcBalance(seller.payTo)).toBe(payToBefore + PRICE_ATOMIC);
    expect(await usdcBalance(buyer.address)).toBe(buyerBefore - PRICE_ATOMIC);

    // As an ops person would: against the service's DID document, fetched from the backend.
    const didDocument = await (await fetch(`${server.url}/.well-known/did.json`)).json() as DidDocument;
    const signed = payment.signedReceipt!;
    expect(signed).toMatchObject({ did: didDocument.id, body: { paymentId: body.paymentId, txHash: payment.txHash, amountUsdcRaw: '10000' } });
    expect(await verifyReceipt(signed, didDocument)).toEqual({ ok: true });
    const forged = { ...signed, body: { ...signed.body, amountUsdcRaw: '1' } };
    expect(await verifyReceipt(forged, didDocument)).toEqual({ ok: false, reason: 'signature_mismatch' });

    // The settlement header carries the offer-receipt extension's JWS receipt, which the official
    // extension's verifier accepts by resolving its kid through the same DID document.
    const offerReceipt = (result.settlement!.extensions as any)?.['offer-receipt']?.info?.receipt as JWSSignedReceipt;
    expect(offerReceipt).toEqual(payment.offerReceipt);
    expect(await verifyReceiptSignatureJWS(offerReceipt)).toMatchObject({
      network: `eip155:${testChain().chain.id}`, resourceUrl: `${apps[framework].url}/weather`, payer: buyer.address, transaction: payment.txHash,
    });
  });

  test('the free route needs no payment', async () => {
    const response = await fetch(`${apps[framework].url}/cities`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ cities: expect.arrayContaining(['Oslo']) });
  });
});
