// ERC-8021 builder codes (the x402 `builder-code` extension) with the official packages: an official
// @x402/express seller declares its app code in the 402, the official client echoes it and adds its own
// service code, and agentgate as facilitator appends the attribution (with its own wallet code) to the
// settlement transaction, read back with the official parser. A Multicall3 batch carries one suffix, so
// payments waiting together are batched by code.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Client } from '@x402/core/client';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { registerExactEvmScheme as registerClientEvm } from '@x402/evm/exact/client';
import { registerExactEvmScheme as registerServerEvm } from '@x402/evm/exact/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import { BUILDER_CODE, BuilderCodeClientExtension, builderCodeResourceServerExtension, declareBuilderCodeExtension, parseBuilderCodeSuffixFromCalldata } from '@x402/extensions/builder-code';
import type { Hex } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { builderCodeSuffix } from '../../server/chain/builder-code.js';
import { EXACT_PROXY_ADDRESS } from '../../server/payments/schemes/exact/evm/chain.js';
import { toClientEvmSigner } from '@x402/evm';
import { fundedBuyer, testChain } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from './seller.js';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';

const NETWORK = 'eip155:84532';

let server: TestServer;
let shop: { url: string; http: Server };
let ours: RunningApp;

beforeAll(async () => {
  // One transaction in flight per relayer: what arrives meanwhile waits and is batched.
  server = await startTestServer({ BUILDER_CODE: 'agentgate_w', SETTLEMENT_PIPELINE_DEPTH: '1', SETTLEMENT_BATCH_MAX: '50' });
  const seller = await setUpSeller(server);
  const client = new HTTPFacilitatorClient({
    url: `${server.url}/v0/x402`,
    createAuthHeaders: async () => { const h = { Authorization: `Bearer ${seller.sellerKey}` }; return { verify: h, settle: h, supported: h }; },
  });
  const resourceServer = registerServerEvm(new x402ResourceServer(client), { networks: [NETWORK] });
  resourceServer.registerExtension(builderCodeResourceServerExtension);
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /weather': {
      accepts: { scheme: 'exact', network: NETWORK, payTo: seller.payTo, price: { asset: testChain().usdc, amount: '10000', extra: { name: DEV_USDC_NAME, version: '2' } } },
      description: 'Weather', mimeType: 'application/json',
      extensions: { [BUILDER_CODE]: declareBuilderCodeExtension('shop_app') },
    },
  }, resourceServer));
  app.get('/weather', (_req, res) => { res.json({ city: 'Oslo' }); });
  const http = createServer(app);
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  shop = { http, url: `http://127.0.0.1:${(http.address() as AddressInfo).port}` };

  // Our middleware, declaring the seller's app code in its 402.
  const mine = express();
  mine.use(expressPayments({ backendUrl: server.url, apiKey: seller.sellerKey, routes: {
    'GET /weather': { price: '$0.01', builderCode: 'our_shop' },
    'GET /permit2': { price: '$0.01', builderCode: 'our_shop', assetTransferMethod: 'permit2' },
  } }));
  mine.get('/weather', (_req, res) => { res.json({ city: 'Oslo' }); });
  mine.get('/permit2', (_req, res) => { res.json({ city: 'Bergen' }); });
  ours = await serve(mine);
  for (const path of ['/weather', '/permit2']) {
    expect(await registerEndpoint(server, seller.platformKey, { url: `${ours.url}${path}`, priceUsdc: '0.01' })).toMatchObject({ status: 201 });
  }
}, 60_000);

afterAll(async () => {
  await ours?.close();
  shop?.http.closeAllConnections();
  shop?.http.close();
  await server?.close();
});

const payingFetch = (buyer: PrivateKeyAccount, serviceCode?: string) => {
  const client = registerClientEvm(new x402Client(), { signer: buyer })
    .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] });
  if (serviceCode) client.registerExtension(new BuilderCodeClientExtension(serviceCode));
  return wrapFetchWithPayment(fetch, client);
};

async function pay(serviceCode?: string, url = () => `${shop.url}/weather`): Promise<Hex> {
  const response = await payingFetch(await fundedBuyer('1'), serviceCode)(url());
  expect(response.status).toBe(200);
  return decodePaymentResponseHeader(response.headers.get('PAYMENT-RESPONSE')!).transaction as Hex;
}

const attributionOf = async (txHash: Hex) => parseBuilderCodeSuffixFromCalldata((await testChain().publicClient.getTransaction({ hash: txHash })).input);

test('our suffix encoding is what the official parser reads', () => {
  const codes = { a: 'shop_app', w: 'agentgate_w', s: ['buyer_one', 'x'.repeat(32)] };
  expect(parseBuilderCodeSuffixFromCalldata(`0xa9059cbb${builderCodeSuffix(codes)!.slice(2)}`)).toEqual(codes);
  expect(builderCodeSuffix({})).toBeUndefined();
});

test('GET /supported lists the builder-code extension', async () => {
  const supported = await (await fetch(`${server.url}/v0/x402/supported`)).json() as { extensions: string[] };
  expect(supported.extensions).toContain('builder-code');
});

test('the settlement transaction carries the seller\'s app code, the buyer\'s service code and our wallet code', async () => {
  const tx = await pay('buyer_one');
  expect(await attributionOf(tx)).toEqual({ a: 'shop_app', w: 'agentgate_w', s: ['buyer_one'] });
  const receipt = await testChain().publicClient.getTransactionReceipt({ hash: tx });
  expect(receipt.status).toBe('success');
});

test('our middleware declares the seller\'s app code: the official client echoes it into the settlement', async () => {
  const tx = await pay('buyer_one', () => `${ours.url}/weather`);
  expect(await attributionOf(tx)).toEqual({ a: 'our_shop', w: 'agentgate_w', s: ['buyer_one'] });
  // Every 402 of the route declares it, the challenge and the refusal of a payment alike.
  const declared = async (headers: Record<string, string>) => {
    const response = await fetch(`${ours.url}/weather`, { headers });
    expect(response.status).toBe(402);
    return (decodePaymentRequiredHeader(response.headers.get('PAYMENT-REQUIRED')!).extensions as Record<string, { info: unknown }>)[BUILDER_CODE]?.info;
  };
  expect(await declared({})).toEqual({ a: 'our_shop' });
  expect(await declared({ 'PAYMENT-SIGNATURE': 'not-a-payment' })).toEqual({ a: 'our_shop' });
});

test('a payment through Permit2 carries the attribution too, after the exact proxy\'s call (a buyer with no gas, its USDC permit sent along)', async () => {
  const buyer = await fundedBuyer('1');
  const client = registerClientEvm(new x402Client(), { signer: toClientEvmSigner(buyer, testChain().publicClient as never) })
    .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] });
  client.registerExtension(new BuilderCodeClientExtension('buyer_one'));
  const response = await wrapFetchWithPayment(fetch, client)(`${ours.url}/permit2`);
  expect(response.status).toBe(200);
  const tx = decodePaymentResponseHeader(response.headers.get('PAYMENT-RESPONSE')!).transaction as Hex;
  expect((await testChain().publicClient.getTransaction({ hash: tx })).to?.toLowerCase()).toBe(EXACT_PROXY_ADDRESS.toLowerCase());
  expect(await attributionOf(tx)).toEqual({ a: 'our_shop', w: 'agentgate_w', s: ['buyer_one'] });
});

test('payments waiting together are batched by code: each transaction carries the codes of every payment in it', async () => {
  const settler = server.app.settlement!.settler;
  // The first transaction is held at submission until four more payments wait; they then leave together.
  let first = true;
  const blockerHeld = new Promise<void>((held) => {
    settler.onSubmitted.push(async () => {
      if (!first) return;
      first = false;
      held();
      while (settler.waiting < 4) await new Promise((r) => setTimeout(r, 10));
    });
  });
  const blocker = pay('blocker');
  await blockerHeld; // the four below arrive while the blocker's transaction is held, never before it
  const [one1, two1, one2, two2] = await Promise.all([pay('buyer_one'), pay('buyer_two'), pay('buyer_one'), pay('buyer_two')]);
  await blocker;
  expect(one1).toBe(one2);
  expect(two1).toBe(two2);
  expect(one1).not.toBe(two1);
  expect(await attributionOf(one1)).toEqual({ a: 'shop_app', w: 'agentgate_w', s: ['buyer_one'] });
  expect(await attributionOf(two1)).toEqual({ a: 'shop_app', w: 'agentgate_w', s: ['buyer_two'] });
  // Both are Multicall3 batches of two transfers.
  for (const tx of [one1, two1]) expect((await testChain().publicClient.getTransaction({ hash: tx })).to?.toLowerCase()).not.toBe(testChain().usdc.toLowerCase());
});
