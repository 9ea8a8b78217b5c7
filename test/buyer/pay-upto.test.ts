// payments_pay (and its MCP tool) paying x402 `upto` offers from the agent's smart-account wallet: the
// official @x402/express seller with an upto route and agentgate as its facilitator, and our own Express
// seller priced { upto }. The wallet approves Permit2 once (a relayer-paid transaction, recorded), the
// mandate caps the maximum signed, and the records and the mandate keep what was actually charged.
import express from 'express';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { UptoEvmScheme as UptoServerScheme } from '@x402/evm/upto/server';
import { paymentMiddleware as officialPaymentMiddleware, setSettlementOverrides } from '@x402/express';
import type { Address } from 'viem';
import { startTestServer, type TestServer } from '../support/server.js';
import { testChain, usdcBalance } from '../support/chain.js';
import { serve, setUpSeller, type RunningApp } from '../interop/seller.js';
import { paymentMiddleware as ourPaymentMiddleware } from '../../adapters/express.js';
import { permit2Allowance } from '../../server/chain/permit2.js';
import { TOOLS } from '../../server/tools.js';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { createMandate, fundedAgent, pay } from './support.js';

const NETWORK = 'eip155:84532';
let server: TestServer;
let official: RunningApp & { payTo: Address };
let ours: RunningApp & { payTo: Address };

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });

  // The official stack: @x402/express with an upto route, agentgate (this backend) as its facilitator.
  const officialSeller = await setUpSeller(server);
  const facilitator = new HTTPFacilitatorClient({
    url: `${server.url}/v0/x402`,
    createAuthHeaders: async () => { const h = { Authorization: `Bearer ${officialSeller.sellerKey}` }; return { verify: h, settle: h, supported: h }; },
  });
  const officialApp = express();
  officialApp.use(officialPaymentMiddleware({
    'GET /complete': {
      accepts: { scheme: 'upto', network: NETWORK, payTo: officialSeller.payTo, price: { asset: testChain().usdc, amount: '500000', extra: { name: DEV_USDC_NAME, version: '2' } } },
      description: 'LLM completion, billed by tokens', mimeType: 'application/json',
    },
  }, new x402ResourceServer(facilitator).register(NETWORK, new UptoServerScheme())));
  officialApp.get('/complete', (req, res) => {
    const tokens = Number(req.query.tokens ?? 0);
    setSettlementOverrides(res, { amount: String(tokens * 100) });
    res.json({ text: 'Hello', usage: { tokens } });
  });
  official = { ...(await serve(officialApp)), payTo: officialSeller.payTo };

  // Ours: the Express adapter, a route priced { upto }, registered by its maximum.
  const ourSeller = await setUpSeller(server);
  const ourApp = express();
  ourApp.use(ourPaymentMiddleware({ backendUrl: server.url, apiKey: ourSeller.sellerKey, routes: { 'GET /complete': { price: { upto: '$0.50' } } } }));
  ourApp.get('/complete', (req, res) => {
    res.locals.x402.charge({ atomic: BigInt(Number(req.query.tokens ?? 0) * 100) });
    res.json({ text: 'Hello', usage: { tokens: Number(req.query.tokens ?? 0) } });
  });
  ours = { ...(await serve(ourApp)), payTo: ourSeller.payTo };
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: ourSeller.platformKey, body: { url: `${ours.url}/complete`, maxPriceUsdc: '0.50' } });
  expect(registered.status).toBe(201);
});
afterAll(async () => {
  await Promise.all([official?.close(), ours?.close()]);
  await server.close();
});

const outgoingOf = (identityId: string) => server.app.db.collection('outgoing_payments').find({ identityId }).toArray();

describe('payments_pay pays upto offers', () => {
  it('pays the official @x402/express upto seller (agentgate as facilitator) what it charged; Permit2 approved once, recorded', async () => {
    const agent = await fundedAgent(server, '2');
    await createMandate(server, agent.key, { maxPerCallUsdc: '0.50', dailyCapUsdc: '2' });
    const before = { buyer: await usdcBalance(agent.address), seller: await usdcBalance(official.payTo) };

    const res = await pay(server, agent.key, { url: `${official.url}/complete?tokens=123` });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      ok: true, paid: true, status: 200, content: { text: 'Hello', usage: { tokens: 123 } },
      cost: { scheme: 'upto', amountUsdc: '0.0123', amountUsdcRaw: '12300', maxAmountUsdc: '0.5', maxAmountUsdcRaw: '500000' },
      txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), payer: agent.address, recipient: official.payTo,
      // The daily spend counts what was charged, not the maximum that was reserved.
      mandate: { spentTodayUsdc: '0.0123', totalSpentUsdc: '0.0123', callCount: 1 },
    });
    expect(res.body.paymentResponse).toMatchObject({ success: true, amount: '12300' });
    expect(await usdcBalance(agent.address)).toBe(before.buyer - 12_300n);
    expect(await usdcBalance(official.payTo)).toBe(before.seller + 12_300n);

    // The one-time approval: sent by the relayer, on the wallet record and in the activity log.
    const { publicClient, usdc } = testChain();
    expect(await permit2Allowance(publicClient as never, usdc, agent.address)).toBeGreaterThan(10n ** 30n);
    const wallet = await server.app.db.collection('wallets').findOne({ identityId: agent.identity.identityId });
    expect(wallet?.permit2ApprovalTx).toMatch(/^0x[0-9a-f]{64}$/);
    const approvals = await server.app.db.collection('activity_logs').find({ identityId: agent.identity.identityId, action: 'wallet.permit2_approved' }).toArray();
    expect(approvals).toHaveLength(1);

    // The records: the buyer's (outgoing) and the seller's (incoming, through the facilitator door).
    const [outgoing] = await outgoingOf(agent.identity.identityId);
    expect(outgoing).toMatchObject({ status: 'settled', scheme: 'upto', amountUsdcRaw: '12300', maxAmountUsdcRaw: '500000', txHash: res.body.txHash });
    await server.app.payments.records.recordsWritten();
    const incoming = await server.app.payments.records.payments.findOne({ txHash: res.body.txHash }).lean();
    expect(incoming).toMatchObject({ scheme: 'upto', amountUsdcRaw: '12300', maxAmountUsdcRaw: '500000', payerAddress: agent.address });

    // A second payment needs no second approval.
    const again = await pay(server, agent.key, { url: `${official.url}/complete?tokens=10` });
    expect(again.body).toMatchObject({ ok: true, cost: { amountUsdcRaw: '1000' }, mandate: { spentTodayUsdc: '0.0133', callCount: 2 } });
    const walletAfter = await server.app.db.collection('wallets').findOne({ identityId: agent.identity.identityId });
    expect(walletAfter?.permit2ApprovalTx).toBe(wallet?.permit2ApprovalTx);
  });

  it('counts what the chain moved, not what the seller says it charged (a seller under-reporting to slip past the daily cap)', async () => {
    // In front of the official seller, a proxy that rewrites PAYMENT-RESPONSE to claim almost nothing was charged.
    const liar = express();
    liar.get('/complete', async (req, res) => {
      const upstream = await fetch(`${official.url}${req.originalUrl}`, { headers: Object.fromEntries(Object.entries(req.headers).filter(([k, v]) => typeof v === 'string' && k !== 'host')) as Record<string, string> });
      upstream.headers.forEach((value, name) => {
        if (name === 'payment-response') {
          const settled = JSON.parse(Buffer.from(value, 'base64').toString('utf8'));
          value = Buffer.from(JSON.stringify({ ...settled, amount: '1' })).toString('base64');
        }
        if (!['content-length', 'content-encoding', 'transfer-encoding', 'connection'].includes(name)) res.setHeader(name, value);
      });
      res.status(upstream.status).send(Buffer.from(await upstream.arrayBuffer()));
    });
    const proxy = await serve(liar);
    try {
      const agent = await fundedAgent(server, '2');
      await createMandate(server, agent.key, { maxPerCallUsdc: '0.50', dailyCapUsdc: '2' });
      const before = await usdcBalance(agent.address);
      const res = await pay(server, agent.key, { url: `${proxy.url}/complete?tokens=123` });
      expect(res.body.paymentResponse).toMatchObject({ success: true, amount: '1' });
      expect(await usdcBalance(agent.address)).toBe(before - 12_300n);
      expect(res.body).toMatchObject({ ok: true, cost: { amountUsdcRaw: '12300' }, mandate: { spentTodayUsdc: '0.0123', callCount: 1 } });
      const [outgoing] = await outgoingOf(agent.identity.identityId);
      expect(outgoing).toMatchObject({ status: 'settled', amountUsdcRaw: '12300' });
    } finally {
      await proxy.close();
    }
  });

  it('pays our Express seller priced { upto: "$0.50" }, through the MCP tool payments_pay', async () => {
    const tool = TOOLS.find((t) => t.name === 'payments_pay')!;
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key, { maxPerCallUsdc: '0.50', dailyCapUsdc: '1' });
    const principal = { tier: 'identity' as const, keyId: 'k', orgId: agent.org_id, identityId: agent.identity.identityId, scopes: new Set(['payments:spend']) };
    const before = await usdcBalance(agent.address);
    const result: any = await tool.run(server.app, principal, tool.input.parse({ url: `${ours.url}/complete?tokens=50` }));
    expect(result).toMatchObject({ ok: true, paid: true, status: 200, cost: { scheme: 'upto', amountUsdcRaw: '5000', maxAmountUsdcRaw: '500000' }, payer: agent.address });
    expect(await usdcBalance(agent.address)).toBe(before - 5_000n);
  });

  it('the mandate caps the maximum signed: a $0.50 maximum under a $0.05 per-call mandate is refused, nothing signed or approved', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key, { maxPerCallUsdc: '0.05', dailyCapUsdc: '1' });
    const res = await pay(server, agent.key, { url: `${official.url}/complete?tokens=1` });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ ok: false, code: 'mandate_per_call_exceeded' });
    expect(await outgoingOf(agent.identity.identityId)).toHaveLength(0);
    const { publicClient, usdc } = testChain();
    expect(await permit2Allowance(publicClient as never, usdc, agent.address)).toBe(0n);
  });

  it('maxAmountUsdc judges the maximum, not the expected charge', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key, { maxPerCallUsdc: '0.50', dailyCapUsdc: '1' });
    const res = await pay(server, agent.key, { url: `${official.url}/complete?tokens=1`, maxAmountUsdc: '0.10' });
    expect(res.body).toMatchObject({ ok: false, code: 'max_amount_exceeded', message: expect.stringContaining('maximum') });
  });
});
