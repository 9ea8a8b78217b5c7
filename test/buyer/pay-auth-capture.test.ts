// payments_pay paying x402 `auth-capture` offers from the agent's smart-account wallet: our Express seller
// with a route offering auth-capture (agentgate its backend and the escrow's operator). The wallet signs
// the ERC-3009 authorization into escrow under its mandate; a handler that succeeds is captured, one that
// fails is voided and the mandate gets back what it had counted, and so does a refund.
import express from 'express';
import type { Address } from 'viem';
import { startTestServer, type TestServer } from '../support/server.js';
import { usdcBalance } from '../support/chain.js';
import { fundedOperator } from '../support/auth-capture.js';
import { serve, setUpSeller, type RunningApp } from '../interop/seller.js';
import { paymentMiddleware } from '../../adapters/express.js';
import { createMandate, fundedAgent, pay } from './support.js';

let server: TestServer;
let shop: RunningApp & { payTo: Address; platformKey: string };
let failNext = false;

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  await fundedOperator(server);
  const seller = await setUpSeller(server);
  const app = express();
  app.use(paymentMiddleware({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /report': { price: '$0.30', scheme: 'auth-capture' } } }));
  app.get('/report', (_req, res) => {
    if (failNext) res.status(503).json({ error: 'busy' });
    else res.json({ report: 'ok', paymentId: res.locals.x402.paymentId });
  });
  shop = { ...(await serve(app)), payTo: seller.payTo, platformKey: seller.platformKey };
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${shop.url}/report`, priceUsdc: '0.30' } });
  expect(registered.status).toBe(201);
});
afterAll(async () => {
  await shop?.close();
  await server.close();
});

const mandateOf = async (key: string) => (await server.request('GET', '/v0/payments/mandates', { key })).body.mandates[0];

describe('payments_pay pays auth-capture offers', () => {
  it('a handler that succeeds: authorized into escrow and captured, counted on the mandate; a refund gives the mandate back what it counted', async () => {
    failNext = false;
    const agent = await fundedAgent(server, '2');
    await createMandate(server, agent.key, { maxPerCallUsdc: '0.50', dailyCapUsdc: '1' });
    const before = { buyer: await usdcBalance(agent.address), seller: await usdcBalance(shop.payTo) };

    const res = await pay(server, agent.key, { url: `${shop.url}/report` });
    expect(res.body).toMatchObject({
      ok: true, paid: true, status: 200, content: { report: 'ok' },
      cost: { scheme: 'auth-capture', amountUsdcRaw: '300000', escrow: 'captured' }, payer: agent.address, recipient: shop.payTo,
      mandate: { spentTodayUsdc: '0.3', totalSpentUsdc: '0.3', callCount: 1 },
    });
    expect(await usdcBalance(agent.address)).toBe(before.buyer - 300_000n);
    expect(await usdcBalance(shop.payTo)).toBe(before.seller + 300_000n);

    // The seller refunds part of it: the money comes back, and the mandate counts only what was kept.
    const incomingId = res.body.content.paymentId as string;
    const refund = await server.request('POST', `/v0/payments/${incomingId}/refund`, { key: shop.platformKey, body: { amount: '0.1', reason: 'partial' } });
    expect(refund.body.status).toBe('refunded');
    expect(await usdcBalance(agent.address)).toBe(before.buyer - 200_000n);
    expect(await mandateOf(agent.key)).toMatchObject({ spentTodayUsdc: '0.2', totalSpentUsdc: '0.2', callCount: 1 });
    // Read again: given back once.
    expect(await mandateOf(agent.key)).toMatchObject({ spentTodayUsdc: '0.2', totalSpentUsdc: '0.2' });
    const outgoing = await server.app.db.collection('outgoing_payments').findOne({ identityId: agent.identity.identityId });
    expect(outgoing).toMatchObject({ scheme: 'auth-capture', status: 'settled', escrow: { state: 'refunded', countedUsdcRaw: '200000' } });
  });

  it('a handler that fails: the authorization is voided, the buyer whole, and the mandate gets the amount back', async () => {
    failNext = true;
    const agent = await fundedAgent(server, '2');
    await createMandate(server, agent.key, { maxPerCallUsdc: '0.50', dailyCapUsdc: '0.5' });
    const before = await usdcBalance(agent.address);
    const res = await pay(server, agent.key, { url: `${shop.url}/report` });
    expect(res.body).toMatchObject({ ok: true, paid: true, status: 503, cost: { scheme: 'auth-capture', amountUsdcRaw: '0', escrow: 'voided' }, mandate: { spentTodayUsdc: '0' } });
    expect(await usdcBalance(agent.address)).toBe(before);
    // The cap is free again: a second call (that succeeds) fits a 0.5 daily cap.
    failNext = false;
    const second = await pay(server, agent.key, { url: `${shop.url}/report` });
    expect(second.body).toMatchObject({ ok: true, status: 200, mandate: { spentTodayUsdc: '0.3' } });
  });

  it('the mandate caps what is authorized: a price over maxPerCallUsdc is refused before anything is signed', async () => {
    failNext = false;
    const agent = await fundedAgent(server, '2');
    await createMandate(server, agent.key, { maxPerCallUsdc: '0.20', dailyCapUsdc: '1' });
    const before = await usdcBalance(agent.address);
    const res = await pay(server, agent.key, { url: `${shop.url}/report` });
    expect(res.body).toMatchObject({ ok: false, error: 'mandate_per_call_exceeded' });
    expect(await usdcBalance(agent.address)).toBe(before);
  });
});
