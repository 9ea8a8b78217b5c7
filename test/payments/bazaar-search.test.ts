// Bazaar discovery as the official stack does it: an @x402/express seller declares its route's discovery
// info (@x402/extensions' bazaar), an @x402/fetch buyer pays it through agentgate as facilitator, the
// settlement catalogs the resource and says so in EXTENSION-RESPONSES, and the official discovery client
// (withBazaar over HTTPFacilitatorClient) finds it with GET /discovery/search, beside the endpoints
// sellers registered as discoverable.
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Client } from '@x402/core/client';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { registerExactEvmScheme as registerClientEvm } from '@x402/evm/exact/client';
import { registerExactEvmScheme as registerServerEvm } from '@x402/evm/exact/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import { bazaarResourceServerExtension, declareDiscoveryExtension, withBazaar } from '@x402/extensions/bazaar';
import type { PrivateKeyAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { fundedBuyer, testChain } from '../support/chain.js';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { setUpSeller } from '../interop/seller.js';
import { openStorefront } from '../support/storefront.js';

const NETWORK = 'eip155:84532';
const PRICE = '10000';

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let shop: { url: string; http: Server };
const settlements: Array<{ success: boolean; extensionResponses?: Record<string, unknown> }> = [];

const facilitatorClient = (key?: string) => new HTTPFacilitatorClient({
  url: `${server.url}/v0/x402`,
  ...(key ? { createAuthHeaders: async () => { const h = { Authorization: `Bearer ${key}` }; return { verify: h, settle: h, supported: h }; } } : {}),
});
/** The official discovery client: public, no key. */
const discovery = () => withBazaar(facilitatorClient()).extensions.bazaar;

const payingFetch = (buyer: PrivateKeyAccount) => wrapFetchWithPayment(fetch, registerClientEvm(new x402Client(), { signer: buyer })
  .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] }));

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  seller = await setUpSeller(server);
  const { payTo } = seller;

  const resourceServer = registerServerEvm(new x402ResourceServer(facilitatorClient(seller.sellerKey)), { networks: [NETWORK] })
    .registerExtension(bazaarResourceServerExtension)
    .onAfterSettle(async (ctx) => { settlements.push(ctx.result as never); });
  const accepts = { scheme: 'exact', network: NETWORK, payTo, price: { asset: testChain().usdc, amount: PRICE, extra: { name: DEV_USDC_NAME, version: '2' } } };
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /tides': {
      accepts, description: 'Tide tables for Norwegian harbours', mimeType: 'application/json',
      serviceName: 'Fjord Data', tags: ['tides', 'ocean', 'TIDES'],
      extensions: declareDiscoveryExtension({
        input: { harbour: 'Bergen' },
        inputSchema: { properties: { harbour: { type: 'string' } }, required: ['harbour'] },
        output: { example: { harbour: 'Bergen', highWater: '06:12' } },
      }),
    },
  } as never, resourceServer));
  app.get('/tides', (_req, res) => { res.json({ harbour: 'Bergen', highWater: '06:12' }); });
  const http = createServer(app);
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  shop = { http, url: `http://127.0.0.1:${(http.address() as AddressInfo).port}` };
});

afterAll(async () => {
  shop?.http.closeAllConnections();
  shop?.http.close();
  await server?.close();
});

describe('bazaar search with the official discovery client', () => {
  it('catalogs a paid route\'s bazaar declaration at settlement, says so in EXTENSION-RESPONSES, and finds it by search', async () => {
    // Before anyone paid, nothing of the shop is cataloged.
    expect((await discovery().search({ query: 'tide tables' })).resources).toEqual([]);

    const res = await payingFetch(await fundedBuyer('1'))(`${shop.url}/tides?harbour=Bergen`);
    expect(res.status).toBe(200);
    // The official facilitator client read our header into the settle result.
    expect(settlements.at(-1)).toMatchObject({ success: true, extensionResponses: { bazaar: { status: 'success' } } });

    const found = await discovery().search({ query: 'Norwegian tide tables' });
    expect(found.x402Version).toBe(2);
    expect(found.resources).toHaveLength(1);
    expect(found.resources[0]).toMatchObject({
      resource: `${shop.url}/tides`, type: 'http', x402Version: 2,
      accepts: [expect.objectContaining({ scheme: 'exact', network: NETWORK, amount: PRICE, payTo: seller.payTo })],
      description: 'Tide tables for Norwegian harbours', serviceName: 'Fjord Data',
      // Tags as the spec's rules keep them: deduplicated case-insensitively.
      tags: ['tides', 'ocean'],
      extensions: { bazaar: { info: { input: { type: 'http', method: 'GET', queryParams: { harbour: 'Bergen' } } } } },
    });
    expect(new Date(found.resources[0]!.lastUpdated).getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(found.pagination).toEqual({ limit: 20, cursor: null });

    // Filters: the spec's, all of which must hold; the list endpoint has the entry too.
    expect((await discovery().search({ query: 'tides', payTo: seller.payTo.toLowerCase(), network: NETWORK, scheme: 'exact', extensions: 'bazaar' })).resources).toHaveLength(1);
    expect((await discovery().search({ query: 'tides', network: 'eip155:1' })).resources).toEqual([]);
    expect((await discovery().search({ query: 'tides', type: 'mcp' })).resources).toEqual([]);
    expect((await discovery().search({ query: 'weather in Paris' })).resources).toEqual([]);
    const listed = await discovery().listResources({ type: 'http', extensions: 'bazaar' });
    expect(listed.items.map((i) => i.resource)).toEqual([`${shop.url}/tides`]);

    // Paid again: the same entry, refreshed, never a second one.
    expect((await payingFetch(await fundedBuyer('1'))(`${shop.url}/tides?harbour=Oslo`)).status).toBe(200);
    expect((await discovery().search({ query: 'tides' })).resources).toHaveLength(1);
  });

  it('searches registered discoverable endpoints too, ranked by the words they match, with cursor pages', async () => {
    // Another storefront of the seller's, its routes registered in this order; /secret is not discoverable.
    const fjord = await openStorefront(server, seller, {
      'GET /tide-alerts': { price: '$0.02', endpoint: { description: 'Tide alerts by SMS', discoverable: true } },
      'GET /ocean-temps': { price: '$0.02', endpoint: { description: 'Ocean temperatures', discoverable: true } },
      'GET /secret': { price: '$0.02', endpoint: { description: 'Tide secrets', discoverable: false } },
    });
    const all = await discovery().search({ query: 'ocean tide' });
    // /tides matches both words (its tags); the others one each, in list order; the undiscoverable one never.
    expect(all.resources.map((r) => r.resource)).toEqual([`${shop.url}/tides`, fjord.resource('/tide-alerts'), fjord.resource('/ocean-temps')]);
    const first = await discovery().search({ query: 'ocean tide', limit: 2 });
    expect(first.resources.map((r) => r.resource)).toEqual(all.resources.slice(0, 2).map((r) => r.resource));
    expect(first.pagination?.cursor).toEqual(expect.any(String));
    const second = await discovery().search({ query: 'ocean tide', limit: 2, cursor: first.pagination!.cursor! });
    expect(second.resources.map((r) => r.resource)).toEqual([fjord.resource('/ocean-temps')]);
    expect(second.pagination).toEqual({ limit: 2, cursor: null });
  });

  it('refuses a search without a query, a bad cursor or limit with 400 {error, message, status}', async () => {
    for (const query of ['', '?query=', '?query=tides&cursor=bm90LWEtY3Vyc29y', '?query=tides&limit=0', '?query=tides&limit=101', `?query=${'x'.repeat(501)}`]) {
      const res = await server.request('GET', `/v0/x402/discovery/search${query}`);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: 'validation_error', status: 400, message: expect.stringMatching(/^query\./) });
    }
    await expect(discovery().search({ query: 'tides', cursor: 'garbage' })).rejects.toThrow(/\(400\)/);
  });

  it('answers a declaration that fails its own schema with a rejected EXTENSION-RESPONSES, and catalogs nothing', async () => {
    const client = facilitatorClient(seller.sellerKey);
    const requirements = { scheme: 'exact', network: NETWORK, amount: PRICE, asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 60, extra: { name: DEV_USDC_NAME, version: '2' } };
    const bazaar = {
      info: { input: { type: 'http', method: 'GET', queryParams: { harbour: 42 } } },
      schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { input: { type: 'object', properties: { queryParams: { type: 'object', properties: { harbour: { type: 'string' } } } } } }, required: ['input'] },
    };
    const payload = {
      x402Version: 2, resource: { url: 'https://bad.example/tides' }, accepted: requirements,
      payload: { signature: '0x00', authorization: { from: seller.payTo, to: seller.payTo, value: PRICE, validAfter: '0', validBefore: '0', nonce: `0x${'00'.repeat(32)}` } },
      extensions: { bazaar },
    };
    const verified = await client.verify(payload as never, requirements as never).catch((err: { invalidReason?: string }) => err) as { extensionResponses?: unknown };
    expect(verified.extensionResponses).toEqual({ bazaar: { status: 'rejected', rejectedReason: expect.stringMatching(/^info failed schema validation: \/input\/queryParams\/harbour must be string/) } });
    // A well-formed declaration on an invalid payment: rejected too, since nothing will settle.
    const fixed = { ...payload, extensions: { bazaar: { ...bazaar, info: { input: { type: 'http', method: 'GET', queryParams: { harbour: 'Bergen' } } } } } };
    const refused = await client.verify(fixed as never, requirements as never).catch((err) => err) as { extensionResponses?: unknown };
    expect(refused.extensionResponses).toEqual({ bazaar: { status: 'rejected', rejectedReason: 'the payment is not valid; nothing is cataloged' } });
    expect((await discovery().search({ query: 'bad' })).resources).toEqual([]);

    // A schema with an $id, then another with the same $id (the seller's next version of it, or another
    // seller's copy of one template): each is read on its own, the second is no clash with the first.
    for (const harbour of [{ type: 'string' }, { type: 'string', minLength: 2 }]) {
      const schema = { ...bazaar.schema, $id: 'https://bad.example/schemas/tides.json', properties: { input: { type: 'object', properties: { queryParams: { type: 'object', properties: { harbour } } } } } };
      const versioned = { ...fixed, extensions: { bazaar: { ...fixed.extensions.bazaar, schema } } };
      const answer = await client.verify(versioned as never, requirements as never).catch((err) => err) as { extensionResponses?: unknown };
      expect(answer.extensionResponses).toEqual({ bazaar: { status: 'rejected', rejectedReason: 'the payment is not valid; nothing is cataloged' } });
    }
  });
});
