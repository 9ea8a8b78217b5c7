// agentgate as a standard x402 facilitator: the official @x402/express seller points its
// HTTPFacilitatorClient at {BASE_URL}/v0/x402 with its seller key, the official @x402/fetch buyer pays it,
// and the payment lands in agentgate's records with a verifiable receipt and a webhook. Plus /supported
// read by the official client, and every refusal reason of /verify and /settle.
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { promisify } from 'node:util';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Client } from '@x402/core/client';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { registerExactEvmScheme as registerClientEvm } from '@x402/evm/exact/client';
import { registerExactEvmScheme as registerServerEvm } from '@x402/evm/exact/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import { extractReceiptFromResponse, verifyReceiptSignatureJWS, type JWSSignedReceipt } from '@x402/extensions/offer-receipt';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { useFacilitator } from 'x402/verify';
import { exact } from 'x402/schemes';
import { settleResponseHeader } from 'x402/types';
import { wrapFetchWithPayment as wrapFetchV1 } from 'x402-fetch';
import type { Address } from 'viem';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { fundedBuyer, randomNonce, sendUsdc, signAuthorization, testChain, usdcBalance } from '../support/chain.js';
import { verifyReceipt } from 'agentgate-x402-wire';
import { openStorefront } from '../support/storefront.js';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import type { Authorization } from '../../server/chain/usdc.js';

const run = promisify(execFile);
const NETWORK = 'eip155:84532';
const PRICE = '10000';

let server: TestServer;
let seller: { platformKey: string; sellerKey: string; payTo: Address; identityKey: string };
let shop: { url: string; http: Server };
let hooks: { received: Array<{ headers: Record<string, unknown>; body: any }>; http: Server; url: string };

const facilitatorClient = (key: string | undefined) => new HTTPFacilitatorClient({
  url: `${server.url}/v0/x402`,
  ...(key ? { createAuthHeaders: async () => { const h = { Authorization: `Bearer ${key}` }; return { verify: h, settle: h, supported: h }; } } : {}),
});

async function listen(app: express.Express | ((req: any, res: any) => void)) {
  const http = createServer(app as never);
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  return { http, url: `http://127.0.0.1:${(http.address() as AddressInfo).port}` };
}

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true', WEBHOOK_RETRY_BASE_MS: '20' });
  const agent = await signUp(server);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} });
  seller = { platformKey: agent.platform_key, sellerKey: key.body.apiKey, payTo, identityKey: agent.identity.rawKey };

  // A seller on the official stack only: @x402/express with agentgate as its facilitator.
  const resourceServer = registerServerEvm(new x402ResourceServer(facilitatorClient(seller.sellerKey)), { networks: [NETWORK] });
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /weather': {
      accepts: { scheme: 'exact', network: NETWORK, payTo, price: { asset: testChain().usdc, amount: PRICE, extra: { name: DEV_USDC_NAME, version: '2' } } },
      description: 'Weather', mimeType: 'application/json',
    },
  }, resourceServer));
  app.get('/weather', (_req, res) => { res.json({ city: 'Oslo', temperatureC: 7 }); });
  shop = await listen(app);

  const received: Array<{ headers: Record<string, unknown>; body: any }> = [];
  const hookServer = await listen((req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => { received.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString()) }); res.end('ok'); });
  });
  hooks = { ...hookServer, received };
});

afterAll(async () => {
  for (const http of [shop?.http, hooks?.http]) { http?.closeAllConnections(); http?.close(); }
  await server?.close();
});

// The dev token is not a default asset of the official client: allow it, as a buyer of a custom token would.
const payingFetch = (buyer: PrivateKeyAccount) => wrapFetchWithPayment(fetch, registerClientEvm(new x402Client(), { signer: buyer })
  .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] }));

describe('the official x402 stack with agentgate as facilitator', () => {
  it('reads /supported through the official client', async () => {
    const supported = await facilitatorClient(seller.sellerKey).getSupported();
    expect(supported.extensions).toEqual(expect.arrayContaining(['payment-identifier', 'bazaar', 'offer-receipt']));
    expect(supported.kinds).toEqual(expect.arrayContaining([
      expect.objectContaining({ x402Version: 2, scheme: 'exact', network: NETWORK }),
      expect.objectContaining({ x402Version: 1, scheme: 'exact', network: 'base-sepolia' }),
    ]));
  });

  it('an @x402/fetch buyer pays an @x402/express seller; agentgate records it with a receipt that verifies', async () => {
    const buyer = await fundedBuyer('1');
    const before = await usdcBalance(seller.payTo);
    const res = await payingFetch(buyer)(`${shop.url}/weather`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ city: 'Oslo', temperatureC: 7 });
    expect(await usdcBalance(seller.payTo)).toBe(before + BigInt(PRICE));

    // The offer-receipt extension's receipt reaches the buyer through the official seller, and the
    // official verifier accepts it, resolving its kid through our did:web document over HTTP.
    const offerReceipt = extractReceiptFromResponse(res);
    expect(offerReceipt).toMatchObject({ format: 'jws' });
    const claims = await verifyReceiptSignatureJWS(offerReceipt as JWSSignedReceipt);
    expect(claims).toMatchObject({ version: 1, network: NETWORK, resourceUrl: `${shop.url}/weather`, payer: buyer.address });
    expect(claims.transaction).toMatch(/^0x[0-9a-f]{64}$/);

    const list = await server.request('GET', '/v0/payments', { key: seller.platformKey });
    const payment = list.body.payments.find((p: any) => p.payerAddress === buyer.address);
    expect(payment).toMatchObject({ status: 'settled', resourceUrl: `${shop.url}/weather`, endpointId: null, amountUsdcRaw: PRICE, recipientAddress: seller.payTo });
    const detail = await server.request('GET', `/v0/payments/${payment.id}`, { key: seller.sellerKey });
    const didDocument = (await server.request('GET', '/.well-known/did.json')).body;
    expect(await verifyReceipt(detail.body.signedReceipt, didDocument)).toMatchObject({ ok: true });
    expect(detail.body.offerReceipt).toEqual(offerReceipt);
    expect(detail.body.txHash).toBe(claims.transaction);
  });

  it('`npm run example:buyer -- <url>` reads this v2-only seller\'s 402 and pays it with v2 (x402-fetch alone crashed on it)', async () => {
    const buyerKey = generatePrivateKey();
    await sendUsdc(privateKeyToAccount(buyerKey).address, 100_000n);
    const env = { ...process.env, AGENTGATE_DEV_SELLER_FILE: '/nonexistent/dev-seller.json', BUYER_PRIVATE_KEY: buyerKey, CHAIN_ID: '84532', USDC_ADDRESS: testChain().usdc };
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'examples/buyer/buyer.ts', `${shop.url}/weather`], { env, timeout: 60_000 });
    expect(stdout).toContain(`x402 v2 buyer ${privateKeyToAccount(buyerKey).address} -> ${shop.url}/weather`);
    expect(JSON.parse(stdout.slice(stdout.indexOf('{')))).toMatchObject({ status: 200, body: { city: 'Oslo', temperatureC: 7 }, settlement: { success: true } });
  });

  it('delivers payment.received when the resource is a registered endpoint with a webhook', async () => {
    const endpoint = await server.request('POST', '/v0/payments/endpoints', {
      key: seller.platformKey, body: { url: `${shop.url}/weather`, priceUsdc: '0.01', webhookUrl: `${hooks.url}/hook` },
    });
    expect(endpoint.status).toBe(201);
    const buyer = await fundedBuyer('1');
    expect((await payingFetch(buyer)(`${shop.url}/weather`)).status).toBe(200);
    const deadline = Date.now() + 20_000;
    while (!hooks.received.some((h) => h.body.payerAddress === buyer.address || h.body.body?.payerAddress === buyer.address) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const hook = hooks.received.find((h) => JSON.stringify(h.body).includes(buyer.address));
    expect(hook).toBeDefined();
    expect(hook!.headers['x-service-event']).toBe('payment.received');
    const list = await server.request('GET', '/v0/payments', { key: seller.platformKey });
    expect(list.body.payments.find((p: any) => p.payerAddress === buyer.address)).toMatchObject({ endpointId: endpoint.body.id, status: 'settled' });
  });
});

describe('an x402 v1 seller with agentgate as facilitator', () => {
  // x402 v1 has no resource-server class: a v1 seller answers the spec's 402 body itself and asks its
  // facilitator through the official v1 client (`useFacilitator` of the `x402` package), as x402-express does.
  let v1shop: { url: string; http: Server };
  beforeAll(async () => {
    const facilitator = useFacilitator({
      url: `${server.url}/v0/x402` as `${string}://${string}`,
      createAuthHeaders: async () => { const h = { Authorization: `Bearer ${seller.sellerKey}` }; return { verify: h, settle: h, supported: h }; },
    });
    const app = express();
    app.get('/report', async (req, res) => {
      const requirement = {
        scheme: 'exact' as const, network: 'base-sepolia' as const, maxAmountRequired: PRICE, resource: `${v1shop.url}/report`, description: 'Report',
        mimeType: 'application/json', payTo: seller.payTo, maxTimeoutSeconds: 60, asset: testChain().usdc, extra: { name: DEV_USDC_NAME, version: '2' },
      };
      const header = req.header('X-PAYMENT');
      if (!header) { res.status(402).json({ x402Version: 1, error: 'X-PAYMENT header is required', accepts: [requirement] }); return; }
      const payment = exact.evm.decodePayment(header);
      const verified = await facilitator.verify(payment, requirement);
      if (!verified.isValid) { res.status(402).json({ x402Version: 1, error: verified.invalidReason, accepts: [requirement] }); return; }
      const settled = await facilitator.settle(payment, requirement);
      if (!settled.success) { res.status(402).json({ x402Version: 1, error: settled.errorReason, accepts: [requirement] }); return; }
      res.setHeader('X-PAYMENT-RESPONSE', settleResponseHeader(settled));
      res.json({ report: 'ok' });
    });
    v1shop = await listen(app);
  });
  afterAll(() => { v1shop?.http.closeAllConnections(); v1shop?.http.close(); });

  it('an x402-fetch (v1) buyer pays it: 200, the price on chain, the payment recorded with receipts that verify', async () => {
    const buyer = await fundedBuyer('1');
    const before = await usdcBalance(seller.payTo);
    const res = await wrapFetchV1(fetch, buyer, 100_000n)(`${v1shop.url}/report`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ report: 'ok' });
    expect(await usdcBalance(seller.payTo)).toBe(before + BigInt(PRICE));
    const settlement = JSON.parse(Buffer.from(res.headers.get('x-payment-response')!, 'base64').toString());
    expect(settlement).toMatchObject({ success: true, network: 'base-sepolia', payer: buyer.address });

    const list = await server.request('GET', '/v0/payments', { key: seller.platformKey });
    const payment = list.body.payments.find((p: any) => p.payerAddress === buyer.address);
    expect(payment).toMatchObject({ status: 'settled', resourceUrl: `${v1shop.url}/report`, endpointId: null, txHash: settlement.transaction });
    const detail = await server.request('GET', `/v0/payments/${payment.id}`, { key: seller.sellerKey });
    expect(detail.body).toMatchObject({ x402Version: 1 });
    const didDocument = (await server.request('GET', '/.well-known/did.json')).body;
    expect(await verifyReceipt(detail.body.signedReceipt, didDocument)).toMatchObject({ ok: true });
    expect(await verifyReceiptSignatureJWS(detail.body.offerReceipt)).toMatchObject({ payer: buyer.address, network: 'eip155:84532', transaction: settlement.transaction });
  });
});

describe('/verify and /settle refusals', () => {
  const requirements = (overrides: Record<string, unknown> = {}) => ({
    scheme: 'exact', network: NETWORK, amount: PRICE, asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 60,
    extra: { name: DEV_USDC_NAME, version: '2' }, ...overrides,
  });
  const wire = (a: Authorization) => ({ from: a.from, to: a.to, value: a.value.toString(), validAfter: a.validAfter.toString(), validBefore: a.validBefore.toString(), nonce: a.nonce });
  async function payment(input: Partial<{ to: Address; value: bigint; validBefore: bigint; signer: PrivateKeyAccount; accepted: Record<string, unknown> }> = {}) {
    const buyer = input.signer ?? await fundedBuyer('1');
    const signed = await signAuthorization(buyer, { to: input.to ?? seller.payTo, value: input.value ?? BigInt(PRICE), validBefore: input.validBefore, nonce: randomNonce() });
    return { x402Version: 2, resource: { url: 'https://shop.example/weather' }, accepted: input.accepted ?? requirements(), payload: { signature: signed.signature, authorization: wire(signed.authorization) } };
  }
  const call = (path: 'verify' | 'settle', body: unknown, key: string | null = seller.sellerKey) =>
    server.request('POST', `/v0/x402/${path}`, { key: key ?? undefined, body });

  it.each([
    ['a payTo other than the seller\'s', async () => ({ paymentPayload: await payment({ to: '0x000000000000000000000000000000000000dEaD', accepted: requirements({ payTo: '0x000000000000000000000000000000000000dEaD' }) }), paymentRequirements: requirements({ payTo: '0x000000000000000000000000000000000000dEaD' }) }), 'invalid_payment_requirements'],
    ['a wrong amount', async () => ({ paymentPayload: await payment({ value: 1n }), paymentRequirements: requirements() }), 'invalid_exact_evm_payload_authorization_value_mismatch'],
    ['an expired authorization', async () => ({ paymentPayload: await payment({ validBefore: BigInt(Math.floor(Date.now() / 1000) - 10) }), paymentRequirements: requirements() }), 'invalid_exact_evm_payload_authorization_valid_before'],
    ['an unknown network', async () => ({ paymentPayload: await payment({ accepted: requirements({ network: 'eip155:1' }) }), paymentRequirements: requirements({ network: 'eip155:1' }) }), 'invalid_exact_evm_network_mismatch'],
  ])('refuses %s on /verify and /settle, moving nothing', async (_name, build, reason) => {
    const body = { x402Version: 2, ...(await build()) };
    const before = await usdcBalance(seller.payTo);
    const verified = await call('verify', body);
    expect(verified.status).toBe(200);
    expect(verified.body).toMatchObject({ isValid: false, invalidReason: reason });
    const settled = await call('settle', body);
    expect(settled.body).toMatchObject({ success: false, errorReason: reason, transaction: '' });
    expect(await usdcBalance(seller.payTo)).toBe(before);
  });

  it('refuses a bad signature', async () => {
    const body = { x402Version: 2, paymentPayload: await payment(), paymentRequirements: requirements() };
    (body.paymentPayload.payload as { signature: string }).signature = `0x${'11'.repeat(65)}`;
    expect((await call('verify', body)).body).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_signature' });
  });

  it('settles once: a replay is refused as a used nonce, and a failed settlement is never a success', async () => {
    const body = { x402Version: 2, paymentPayload: await payment(), paymentRequirements: requirements() };
    expect((await call('verify', body)).body).toMatchObject({ isValid: true });
    const [first, second] = await Promise.all([call('settle', body), call('settle', body)]);
    const outcomes = [first.body, second.body];
    expect(outcomes.filter((o) => o.success === true)).toHaveLength(1);
    expect(outcomes.find((o) => o.success === false)).toMatchObject({ errorReason: 'invalid_exact_evm_nonce_already_used', transaction: '' });
    expect((await call('settle', body)).body).toMatchObject({ success: false, errorReason: 'invalid_exact_evm_nonce_already_used' });
  });

  it('takes x402 v1 bodies with network names', async () => {
    const buyer = await fundedBuyer('1');
    const signed = await signAuthorization(buyer, { to: seller.payTo, value: BigInt(PRICE) });
    const body = {
      x402Version: 1,
      paymentPayload: { x402Version: 1, scheme: 'exact', network: 'base-sepolia', payload: { signature: signed.signature, authorization: wire(signed.authorization) } },
      paymentRequirements: { scheme: 'exact', network: 'base-sepolia', maxAmountRequired: PRICE, resource: 'https://shop.example/v1', description: 'v1', mimeType: 'application/json', payTo: seller.payTo, maxTimeoutSeconds: 60, asset: testChain().usdc, extra: { name: DEV_USDC_NAME, version: '2' } },
    };
    const settled = await call('settle', body);
    expect(settled.body).toMatchObject({ success: true, network: 'base-sepolia', payer: buyer.address });
    expect(settled.body.transaction).toMatch(/^0x[0-9a-f]{64}$/);
  });

  it('payment-identifier: the same id and payload, also concurrently, moves money once and answers alike; another payload under that id is refused', async () => {
    const id = `pay_${Date.now().toString(16)}${'a'.repeat(12)}`;
    const withId = (payload: any) => ({ ...payload, extensions: { 'payment-identifier': { info: { required: false, id } } } });
    const body = { x402Version: 2, paymentPayload: withId(await payment()), paymentRequirements: requirements() };
    const before = await usdcBalance(seller.payTo);
    const answers = await Promise.all([call('settle', body), call('settle', body), call('settle', body)]);
    for (const answer of answers) expect(answer.body).toMatchObject({ success: true, transaction: answers[0]!.body.transaction });
    expect((await call('settle', body)).body).toEqual(answers[0]!.body);
    expect(await usdcBalance(seller.payTo)).toBe(before + BigInt(PRICE));
    const other = await call('settle', { ...body, paymentPayload: withId(await payment()) });
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({ success: false, errorReason: 'payment_identifier_conflict', transaction: '' });
    expect(await usdcBalance(seller.payTo)).toBe(before + BigInt(PRICE));
    const supported = await server.request('GET', '/v0/x402/supported');
    expect(supported.body.extensions).toContain('payment-identifier');
  });

  it('payment-identifier: a repeat whose first request left no result (its process died, or the database went away as it answered) answers from the payment itself', async () => {
    const id = `lost_${Date.now().toString(16)}${'b'.repeat(12)}`;
    const body = { x402Version: 2, paymentPayload: { ...(await payment()), extensions: { 'payment-identifier': { info: { required: false, id } } } }, paymentRequirements: requirements() };
    const first = await call('settle', body);
    expect(first.body).toMatchObject({ success: true });
    // As the first request left it had it died before writing the result down.
    const lost = await server.app.db.collection('payment_identifiers').updateMany({ _id: { $regex: `:${id}$` } } as never, { $unset: { result: 1 } });
    expect(lost.modifiedCount).toBe(1);
    const repeat = await call('settle', body);
    expect(repeat.body).toMatchObject({ success: true, transaction: first.body.transaction, payer: first.body.payer });
  });

  it('needs a seller key: none is 401, an identity key 403', async () => {
    const body = { x402Version: 2, paymentPayload: await payment(), paymentRequirements: requirements() };
    expect((await call('verify', body, null)).status).toBe(401);
    expect((await call('settle', body, 'loid-not-a-key')).status).toBe(401);
    expect((await call('settle', body, seller.identityKey)).status).toBe(403);
  });
});

describe('bazaar discovery', () => {
  it('lists opted-in endpoints with price, network and the schemas the seller declared; opted-out ones stay hidden', async () => {
    const inputSchema = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
    const outputSchema = { type: 'object', properties: { temperatureC: { type: 'number' } } };
    // The seller's storefront sells both; only the forecast is opted in to discovery.
    const store = await openStorefront(server, seller, {
      'GET /forecast': { price: '$0.05', endpoint: { description: 'Forecast', discoverable: true, inputSchema, outputSchema } },
      'GET /private': { price: '$0.05' },
    });
    const [forecast, hidden] = [store.resource('/forecast'), store.resource('/private')];
    const listed = await server.request('GET', `/v0/payments/endpoints/${store.endpoint('/forecast').id}`, { key: seller.platformKey });
    expect(listed.body).toMatchObject({ discoverable: true, inputSchema, outputSchema });

    const page = await server.request('GET', '/v0/x402/discovery/resources?type=http&limit=10');
    expect(page.status).toBe(200);
    const item = page.body.items.find((i: any) => i.resource === forecast);
    expect(item).toMatchObject({
      type: 'http', x402Version: 2,
      accepts: [expect.objectContaining({ scheme: 'exact', network: NETWORK, amount: '50000', payTo: seller.payTo })],
      metadata: { description: 'Forecast', priceUsdc: '0.05', inputSchema, outputSchema },
    });
    expect(page.body.items.some((i: any) => i.resource === hidden)).toBe(false);
    expect(page.body.pagination).toMatchObject({ limit: 10, offset: 0, total: page.body.items.length });

    // Opting out removes it; paging past the end is an empty page.
    expect((await server.request('PATCH', `/v0/payments/endpoints/${listed.body.id}`, { key: seller.platformKey, body: { discoverable: false } })).body.discoverable).toBe(false);
    const after = await server.request('GET', '/v0/x402/discovery/resources');
    expect(after.body.items.some((i: any) => i.resource === forecast)).toBe(false);
    expect((await server.request('GET', '/v0/x402/discovery/resources?offset=1000')).body.items).toEqual([]);
    // An empty or non-number offset is refused, not read as 0.
    for (const offset of ['', 'x', '-1', '1.5']) expect((await server.request('GET', `/v0/x402/discovery/resources?offset=${offset}`)).status).toBe(400);
  });
});
