// payments_pay through a channel to a seller on the official stack: @x402/express with the batch-settlement
// server scheme (BatchSettlementEvmScheme from @x402/evm, its in-memory channel storage), agentgate as its
// facilitator. The agent's wallet deposits once and pays with vouchers, then asks the seller for the
// remainder back (the scheme's cooperative refund, as the official client asks it): the seller claims what
// the calls charged and refunds the rest to the wallet in one transaction.
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { BatchSettlementEvmScheme as ChannelServerScheme } from '@x402/evm/batch-settlement/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { readChannelState } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { TOOLS } from '../../server/tools.js';
import { ToolRefusal } from '../../server/platform/mcp-tool.js';
import { signUp } from '../support/agents.js';
import { testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { createMandate, fundedAgent, pay } from './support.js';

const NETWORK = 'eip155:84532';
const PRICE = 1_000n; // $0.001 a call

let server: TestServer;
let shop: { url: string; http: Server };
let payTo: `0x${string}`;
/** The seller's app as it runs now: a new one is the seller restarted (its in-memory channel storage empty). */
let sellerApp: express.Express;
let openSeller: () => express.Express;

beforeAll(async () => {
  server = await startTestServer({ CHANNEL_SWEEP_EVERY_MS: '600000' });
  const seller = await signUp(server);
  payTo = privateKeyToAccount(generatePrivateKey()).address;
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: seller.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const sellerKey = (await server.request('POST', '/v0/payments/seller-keys', { key: seller.platform_key, body: {} })).body.apiKey as string;
  const facilitator = new HTTPFacilitatorClient({
    url: `${server.url}/v0/x402`,
    createAuthHeaders: async () => { const h = { Authorization: `Bearer ${sellerKey}` }; return { verify: h, settle: h, supported: h }; },
  });
  openSeller = () => {
    const resourceServer = new x402ResourceServer(facilitator).register(NETWORK, new ChannelServerScheme(payTo));
    const app = express();
    app.use(officialPaymentMiddleware({
      'GET /weather': {
        accepts: { scheme: 'batch-settlement', network: NETWORK, payTo, price: { asset: testChain().usdc, amount: PRICE.toString(), extra: { name: DEV_USDC_NAME, version: '2' } } },
        description: 'Weather, per call', mimeType: 'application/json',
      },
    }, resourceServer));
    app.get('/weather', (_req, res) => { res.json({ weather: 'sunny' }); });
    return app;
  };
  sellerApp = openSeller();
  const httpServer = createServer((req, res) => sellerApp(req as never, res as never));
  httpServer.listen(0, '127.0.0.1');
  await once(httpServer, 'listening');
  shop = { http: httpServer, url: `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}` };
}, 60_000);

afterAll(async () => {
  shop?.http.closeAllConnections();
  shop?.http.close();
  await server?.close();
});

describe('payments_pay and the official batch-settlement seller', () => {
  it('deposits once, pays with vouchers, and takes the remainder back through the seller\'s cooperative refund', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const before = await usdcBalance(agent.address);
    const first = await pay(server, agent.key, { url: `${shop.url}/weather` });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ content: { weather: 'sunny' }, txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), cost: { scheme: 'batch-settlement', channel: { depositUsdc: '0.01' } } });
    const channelId: string = first.body.cost.channel.channelId;
    for (let i = 2; i <= 3; i++) {
      const res = await pay(server, agent.key, { url: `${shop.url}/weather` });
      expect(res.body).toMatchObject({ status: 200, txHash: null, cost: { channel: { channelId, cumulativeUsdc: `0.00${i}` } } });
    }
    expect(await usdcBalance(agent.address)).toBe(before - 10n * PRICE);

    // Another identity cannot ask for it: not its channel.
    const stranger = await fundedAgent(server, '0');
    expect((await server.request('POST', `/v0/wallet/channels/${channelId}/refund`, { key: stranger.key })).status).toBe(404);

    const tool = TOOLS.find((t) => t.name === 'payments_refund_channel')!;
    const principal = { tier: 'identity' as const, keyId: 'k', orgId: agent.org_id, identityId: agent.identity.identityId, scopes: new Set(['payments:spend']) };
    const refunded: any = await tool.run(server.app, principal, tool.input.parse({ id: channelId }));
    expect(refunded).not.toBeInstanceOf(ToolRefusal);
    expect(refunded).toMatchObject({ ok: true, channelId, refundedUsdc: '0.007', txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    expect(await usdcBalance(agent.address)).toBe(before - 3n * PRICE);
    expect(await readChannelState(testChain().publicClient as never, channelId as Hex)).toMatchObject({ balance: 3n * PRICE, totalClaimed: 3n * PRICE });
    const channels = await server.request('GET', '/v0/wallet/channels', { key: agent.key });
    expect(channels.body.channels[0]).toMatchObject({ channelId, depositedUsdc: '0.01', chargedUsdc: '0.003', claimedUsdc: '0.003', availableUsdc: '0', refundedUsdc: '0.007' });

    // The next call deposits again into the same channel.
    const again = await pay(server, agent.key, { url: `${shop.url}/weather` });
    expect(again.body).toMatchObject({ status: 200, txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), cost: { channel: { channelId, cumulativeUsdc: '0.004', depositUsdc: '0.01' } } });
  });

  it('an idle channel: the backend\'s round asks the seller for the rest; a round runs once, whichever process starts it (a unique insert)', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const before = await usdcBalance(agent.address);
    const first = await pay(server, agent.key, { url: `${shop.url}/weather` });
    const channelId: string = first.body.cost.channel.channelId;
    expect((await pay(server, agent.key, { url: `${shop.url}/weather` })).status).toBe(200);
    expect(await usdcBalance(agent.address)).toBe(before - 10n * PRICE);

    // Not idle for an hour yet: nothing is asked.
    expect(await server.app.buyer.channels.refundIdle({ idleMs: 3_600_000, round: `hour-${Date.now()}` })).toEqual({ refunded: 0, refused: 0, withdrawalsStarted: 0, withdrawalsFinished: 0 });
    expect(await usdcBalance(agent.address)).toBe(before - 10n * PRICE);
    // Idle: one round (the same round a second time does nothing) brings the rest back.
    const round = `now-${Date.now()}`;
    const [a, b] = await Promise.all([server.app.buyer.channels.refundIdle({ idleMs: 0, round }), server.app.buyer.channels.refundIdle({ idleMs: 0, round })]);
    expect([a, b].filter((t) => t === undefined)).toHaveLength(1);
    expect((a ?? b)!.refunded).toBeGreaterThanOrEqual(1);
    expect(await usdcBalance(agent.address)).toBe(before - 2n * PRICE);
    expect(await readChannelState(testChain().publicClient as never, channelId as Hex)).toMatchObject({ balance: 2n * PRICE, totalClaimed: 2n * PRICE });
  });

  it('the seller restarts and forgets the channel (its storage is in memory): the wallet\'s next vouchers are taken, and the mandate counts each call once', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const first = await pay(server, agent.key, { url: `${shop.url}/weather` });
    const channelId: string = first.body.cost.channel.channelId;
    expect((await pay(server, agent.key, { url: `${shop.url}/weather` })).status).toBe(200);

    sellerApp = openSeller();
    const next = await pay(server, agent.key, { url: `${shop.url}/weather` });
    expect(next.status).toBe(200);
    expect(next.body).toMatchObject({ content: { weather: 'sunny' }, txHash: null, cost: { channel: { channelId, cumulativeUsdc: '0.003' } } });
    const after = await pay(server, agent.key, { url: `${shop.url}/weather` });
    expect(after.body).toMatchObject({ status: 200, cost: { channel: { channelId, cumulativeUsdc: '0.004' } } });
    expect((await server.request('GET', '/v0/payments/mandates', { key: agent.key })).body.mandates[0]).toMatchObject({ spentTodayUsdc: '0.004', callCount: 4 });
  });
});
