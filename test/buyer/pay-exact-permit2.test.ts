// payments_pay paying `exact` offers that ask for Permit2 (extra.assetTransferMethod "permit2") from the
// agent's smart-account wallet: an official @x402/express seller settled by the official @x402/evm
// facilitator in-process (nothing of ours between the buyer and the chain but the dev chain's proxy), and
// our Express adapter with a route asking for Permit2, settled by this backend. The wallet approves
// Permit2 once (relayer-paid); the mandate counts what the chain moved.
import express from 'express';
import type { Address } from 'viem';
import { startTestServer, type TestServer } from '../support/server.js';
import { testChain, usdcBalance } from '../support/chain.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from '../interop/seller.js';
import { paymentMiddleware as ourPaymentMiddleware } from '../../adapters/express.js';
import { EXACT_PROXY_ADDRESS } from '../../server/payments/schemes/exact/evm/chain.js';
import { createMandate, fundedAgent, officialExpressSeller, pay } from './support.js';

let server: TestServer;
let official: Awaited<ReturnType<typeof officialExpressSeller>>;
let ours: RunningApp & { payTo: Address; platformKey: string };

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  official = await officialExpressSeller({ assetTransferMethod: 'permit2' });
  const seller = await setUpSeller(server);
  const app = express();
  app.use(ourPaymentMiddleware({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /report': { price: '$0.01', assetTransferMethod: 'permit2' } } }));
  app.get('/report', (_req, res) => { res.json({ report: 'done' }); });
  ours = { ...(await serve(app)), payTo: seller.payTo, platformKey: seller.platformKey };
  expect((await registerEndpoint(server, seller.platformKey, { url: `${ours.url}/report`, priceUsdc: '0.01' })).status).toBe(201);
});
afterAll(async () => {
  await Promise.all([official?.close(), ours?.close()]);
  await server.close();
});

const outgoingOf = (identityId: string) => server.app.db.collection('outgoing_payments').find({ identityId }).toArray();

describe('payments_pay pays exact offers through Permit2', () => {
  it('the official seller and facilitator: the settlement goes through the exact Permit2 proxy; the mandate counts the price', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key, { maxPerCallUsdc: '0.05', dailyCapUsdc: '1' });
    const before = { buyer: await usdcBalance(agent.address), seller: await usdcBalance(official.payTo) };
    const res = await pay(server, agent.key, { url: `${official.url}/quote` });
    expect(res.body).toMatchObject({ ok: true, paid: true, status: 200, cost: { amountUsdcRaw: String(official.priceAtomic) }, payer: agent.address, recipient: official.payTo, mandate: { spentTodayUsdc: '0.02', callCount: 1 } });
    expect(await usdcBalance(agent.address)).toBe(before.buyer - official.priceAtomic);
    expect(await usdcBalance(official.payTo)).toBe(before.seller + official.priceAtomic);
    const tx = await testChain().publicClient.getTransaction({ hash: res.body.txHash });
    expect(tx.to?.toLowerCase()).toBe(EXACT_PROXY_ADDRESS.toLowerCase());
    const [outgoing] = await outgoingOf(agent.identity.identityId);
    expect(outgoing).toMatchObject({ status: 'settled', amountUsdcRaw: String(official.priceAtomic), txHash: res.body.txHash });
  });

  it('our Express route asking for Permit2, settled by this backend: recorded as a Permit2 payment on both sides', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key, { maxPerCallUsdc: '0.05', dailyCapUsdc: '1' });
    const before = await usdcBalance(agent.address);
    const res = await pay(server, agent.key, { url: `${ours.url}/report` });
    expect(res.body).toMatchObject({ ok: true, paid: true, status: 200, content: { report: 'done' }, cost: { amountUsdcRaw: '10000' }, mandate: { spentTodayUsdc: '0.01' } });
    expect(await usdcBalance(agent.address)).toBe(before - 10_000n);
    const incoming = await server.request('GET', '/v0/payments', { key: ours.platformKey });
    expect(incoming.body.payments).toEqual([expect.objectContaining({ payerAddress: agent.address, status: 'settled', assetTransferMethod: 'permit2', txHash: res.body.txHash })]);
  });
});
