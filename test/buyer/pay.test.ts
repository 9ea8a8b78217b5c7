import express from 'express';
import type { Address } from 'viem';
import { startTestServer, type TestServer } from '../support/server.js';
import { testChain, usdcBalance } from '../support/chain.js';
import { serve, type RunningApp } from '../interop/seller.js';
import { encodeBase64Json, verifyReceipt } from 'agentgate-x402-wire';
import { authorizationState } from '../../server/chain/usdc.js';
import { TOOLS } from '../../server/tools.js';
import { ToolRefusal } from '../../server/platform/mcp-tool.js';
import { createMandate, fundedAgent, inDays, officialExpressSeller, ourExpressSeller, pay } from './support.js';

let server: TestServer;
let ours: Awaited<ReturnType<typeof ourExpressSeller>>;
let official: Awaited<ReturnType<typeof officialExpressSeller>>;
const extras: RunningApp[] = [];

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  [ours, official] = await Promise.all([ourExpressSeller(server), officialExpressSeller()]);
});
afterAll(async () => {
  await Promise.all([ours?.close(), official?.close(), ...extras.map((e) => e.close())]);
  await server.close();
});

const outgoingOf = (identityId: string) => server.app.db.collection('outgoing_payments').find({ identityId }).toArray();

describe('payments_pay against real sellers', () => {
  it('pays our Express example seller: 200, balances move by the price, records on both sides, a receipt that verifies', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const before = { buyer: await usdcBalance(agent.address), seller: await usdcBalance(ours.payTo) };

    const res = await pay(server, agent.key, { url: `${ours.url}/weather?city=Oslo` });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      ok: true, paid: true, status: 200, contentType: expect.stringContaining('application/json'),
      content: { city: 'Oslo', paidBy: agent.address },
      cost: { amountUsdc: '0.01', amountUsdcRaw: '10000', network: 'base-sepolia' },
      txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), payer: agent.address, recipient: ours.payTo, resource: `${ours.url}/weather`,
      mandate: { spentTodayUsdc: '0.01', remainingTodayUsdc: '0.99', totalSpentUsdc: '0.01', callCount: 1 },
    });
    expect(res.body.paymentResponse).toMatchObject({ success: true, transaction: res.body.txHash, payer: agent.address });

    expect(await usdcBalance(agent.address)).toBe(before.buyer - 10_000n);
    expect(await usdcBalance(ours.payTo)).toBe(before.seller + 10_000n);
    const wallet = await server.request('GET', '/v0/wallet', { key: agent.key });
    expect(wallet.body).toMatchObject({ deployed: true, balanceUsdc: '0.99' });

    // The seller's record, with a receipt signed by the service key.
    const sellerPayments = await server.request('GET', '/v0/payments', { key: ours.platformKey });
    const received = sellerPayments.body.payments.find((p: any) => p.txHash === res.body.txHash);
    expect(received).toMatchObject({ direction: 'in', status: 'settled', payerAddress: agent.address, amountUsdcRaw: '10000' });
    const detail = await server.request('GET', `/v0/payments/${received.id}`, { key: ours.platformKey });
    expect(await verifyReceipt(detail.body.signedReceipt, server.app.serviceKey.publicKeyMultibase)).toEqual({ ok: true });
    expect(detail.body.signedReceipt.body).toMatchObject({ payerAddress: agent.address, txHash: res.body.txHash });
    // The seller's offer-receipt (JWS) reaches the buying agent in its payment response.
    expect(res.body.paymentResponse.offerReceipt).toEqual(detail.body.offerReceipt);
    expect(res.body.paymentResponse.offerReceipt).toMatchObject({ format: 'jws' });

    // The buyer's record.
    const activity = await server.request('GET', '/v0/payments/activity', { key: agent.key });
    expect(activity.status).toBe(200);
    expect(activity.body.activity[0]).toMatchObject({
      id: res.body.paymentId, direction: 'out', status: 'settled', amountUsdc: '0.01', txHash: res.body.txHash,
      payerAddress: agent.address, recipientAddress: ours.payTo, resourceUrl: `${ours.url}/weather`,
    });
  });

  it('pays an official @x402/express (v2) seller settled by the official facilitator logic', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const sellerBefore = await usdcBalance(official.payTo);
    const res = await pay(server, agent.key, { url: `${official.url}/quote` });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      ok: true, paid: true, status: 200, content: { quote: expect.any(String) },
      cost: { amountUsdc: '0.02', amountUsdcRaw: '20000' }, payer: agent.address, recipient: official.payTo,
      paymentResponse: { success: true, network: 'eip155:84532', payer: agent.address },
    });
    expect(res.body.txHash).toBe(res.body.paymentResponse.transaction);
    const receipt = await testChain().publicClient.getTransactionReceipt({ hash: res.body.txHash });
    expect(receipt.status).toBe('success');
    expect(await usdcBalance(agent.address)).toBe(1_000_000n - 20_000n);
    expect(await usdcBalance(official.payTo)).toBe(sellerBefore + 20_000n);
  });

  it('is the MCP tool payments_pay, with the same result', async () => {
    const tool = TOOLS.find((t) => t.name === 'payments_pay')!;
    expect(tool.scope).toBe('payments:spend');
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const principal = { tier: 'identity' as const, keyId: 'k', orgId: agent.org_id, identityId: agent.identity.identityId, scopes: new Set(['payments:spend']) };
    const result: any = await tool.run(server.app, principal, tool.input.parse({ url: `${official.url}/quote`, maxAmountUsdc: '0.02' }));
    expect(result).toMatchObject({ ok: true, paid: true, status: 200, cost: { amountUsdc: '0.02' }, payer: agent.address });
    // A refusal is a ToolRefusal (the MCP server answers it with isError: true) carrying the route's refusal body.
    const refused = await tool.run(server.app, principal, tool.input.parse({ url: `${official.url}/quote`, maxAmountUsdc: '0.019' }));
    expect(refused).toBeInstanceOf(ToolRefusal);
    expect((refused as ToolRefusal).body).toEqual({ ok: false, code: 'max_amount_exceeded', error: 'max_amount_exceeded', status: 403, message: expect.any(String) });
  });

  it('returns a non-402 answer as it is, unpaid', async () => {
    const agent = await fundedAgent(server, '0');
    const res = await pay(server, agent.key, { url: `${ours.url}/cities` });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, paid: false, status: 200, content: { cities: expect.arrayContaining(['Oslo']) } });
  });

  it('dry-runs: shows the price and the mandate, pays nothing', async () => {
    const agent = await fundedAgent(server, '1');
    const mandate = await createMandate(server, agent.key);
    const res = await pay(server, agent.key, { url: `${official.url}/quote`, dryRun: true });
    expect(res.body).toMatchObject({ ok: true, paid: false, dryRun: true, status: 402, cost: { amountUsdc: '0.02' }, recipient: official.payTo, mandate: { spentTodayUsdc: '0' } });
    expect(await usdcBalance(agent.address)).toBe(1_000_000n);
    expect((await server.request('GET', `/v0/payments/mandates/${mandate.mandateId}`, { key: agent.key })).body).toMatchObject({ spentTodayUsdc: '0', callCount: 0 });
  });
});

describe('refusals: the right code and no money moved', () => {
  async function expectRefused(agent: Awaited<ReturnType<typeof fundedAgent>>, body: Record<string, unknown>, code: string, status: number) {
    const before = await usdcBalance(agent.address);
    const settledBefore = (await outgoingOf(agent.identity.identityId)).filter((p) => p.status === 'settled').length;
    const res = await pay(server, agent.key, body);
    expect({ code: res.body.code, status: res.status, ok: res.body.ok, error: res.body.error }).toEqual({ code, status, ok: false, error: code });
    expect(typeof res.body.message).toBe('string');
    expect(await usdcBalance(agent.address)).toBe(before);
    expect((await outgoingOf(agent.identity.identityId)).filter((p) => p.status === 'settled')).toHaveLength(settledBefore);
    return res;
  }

  it('no mandate, expired mandate, revoked mandate', async () => {
    const agent = await fundedAgent(server, '1');
    await expectRefused(agent, { url: `${official.url}/quote` }, 'mandate_not_found', 403);
    const expired = await createMandate(server, agent.key);
    await server.app.db.collection('mandates').updateOne({ _id: expired.mandateId as never }, { $set: { validUntil: new Date(Date.now() - 1000) } });
    await expectRefused(agent, { url: `${official.url}/quote` }, 'mandate_expired', 403);
    const other = await fundedAgent(server, '1');
    const revoked = await createMandate(server, other.key);
    expect((await server.request('DELETE', `/v0/payments/mandates/${revoked.mandateId}`, { key: other.key })).status).toBe(200);
    await expectRefused(other, { url: `${official.url}/quote` }, 'mandate_revoked', 403);
  });

  it('over the per-call cap, over maxAmountUsdc, a host the mandate does not allow', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key, { maxPerCallUsdc: '0.019', dailyCapUsdc: '1' });
    await expectRefused(agent, { url: `${official.url}/quote` }, 'mandate_per_call_exceeded', 403);
    const second = await fundedAgent(server, '1');
    await createMandate(server, second.key);
    await expectRefused(second, { url: `${official.url}/quote`, maxAmountUsdc: '0.01' }, 'max_amount_exceeded', 403);
    const third = await fundedAgent(server, '1');
    await createMandate(server, third.key, { allowedHosts: ['api.example.com', '*.example.org'] });
    await expectRefused(third, { url: `${official.url}/quote` }, 'mandate_host_not_allowed', 403);
  });

  it('over the daily cap after earlier payments', async () => {
    const agent = await fundedAgent(server, '1');
    const mandate = await createMandate(server, agent.key, { maxPerCallUsdc: '0.02', dailyCapUsdc: '0.03' });
    expect((await pay(server, agent.key, { url: `${official.url}/quote` })).body.ok).toBe(true);
    await expectRefused(agent, { url: `${official.url}/quote` }, 'mandate_daily_cap_exceeded', 403);
    const after = await server.request('GET', `/v0/payments/mandates/${mandate.mandateId}`, { key: agent.key });
    expect(after.body).toMatchObject({ spentTodayUsdc: '0.02', remainingTodayUsdc: '0.01', callCount: 1 });
  });

  it('insufficient balance', async () => {
    const agent = await fundedAgent(server, '0.015');
    const mandate = await createMandate(server, agent.key);
    await expectRefused(agent, { url: `${official.url}/quote` }, 'balance_insufficient', 402);
    // The reservation was given back.
    expect((await server.request('GET', `/v0/payments/mandates/${mandate.mandateId}`, { key: agent.key })).body.spentTodayUsdc).toBe('0');
  });

  it('a URL that is not x402, a network and an asset we do not pay', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const plain402 = express();
    plain402.get('/', (_req, res) => { res.status(402).json({ error: 'pay me somehow' }); });
    const notX402 = await serve(plain402);
    extras.push(notX402);
    await expectRefused(agent, { url: `${notX402.url}/` }, 'url_not_x402', 422);

    const mainnet = await officialExpressSeller({ network: 'eip155:8453' });
    const otherToken = await officialExpressSeller({ asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' });
    extras.push(mainnet, otherToken);
    const res = await expectRefused(agent, { url: `${mainnet.url}/quote` }, 'network_unsupported', 422);
    expect(res.body.message).toContain('eip155:8453');
    await expectRefused(agent, { url: `${otherToken.url}/quote` }, 'asset_unsupported', 422);
  });

  it('a seller that takes the signature but does not settle: settle_failed, the authorization is cancelled, the cap given back', async () => {
    const agent = await fundedAgent(server, '1');
    const mandate = await createMandate(server, agent.key);
    const { usdc } = testChain();
    let presented: string | undefined;
    const requirement = {
      scheme: 'exact', network: 'base-sepolia', maxAmountRequired: '10000', resource: 'http://127.0.0.1/flaky', description: 'flaky',
      mimeType: 'application/json', payTo: '0x000000000000000000000000000000000000dEaD', maxTimeoutSeconds: 60, asset: usdc, extra: { name: 'USD Coin', version: '2' },
    };
    const flaky = express();
    flaky.get('/flaky', (req, res) => {
      presented ??= req.header('x-payment');
      res.status(402).json({ x402Version: 1, error: 'facilitator down', accepts: [requirement] });
    });
    const running = await serve(flaky);
    extras.push(running);
    const res = await expectRefused(agent, { url: `${running.url}/flaky` }, 'settle_failed', 502);
    expect(res.body.message).toContain('facilitator down');
    // The signature the seller saw can no longer move money.
    const nonce = JSON.parse(Buffer.from(presented!, 'base64').toString()).payload.authorization.nonce;
    expect(await authorizationState({ client: testChain().publicClient as never, token: usdc, authorizer: agent.address, nonce })).toBe(true);
    const after = await server.request('GET', `/v0/payments/mandates/${mandate.mandateId}`, { key: agent.key });
    expect(after.body).toMatchObject({ spentTodayUsdc: '0', callCount: 0 });
    expect((await outgoingOf(agent.identity.identityId))[0]).toMatchObject({ status: 'failed' });
  });
});

describe('caps under concurrency', () => {
  it('lets exactly 10 of 30 concurrent payments through a daily cap that allows 10', async () => {
    const agent = await fundedAgent(server, '1');
    const mandate = await createMandate(server, agent.key, { maxPerCallUsdc: '0.01', dailyCapUsdc: '0.1' });
    const sellerBefore = await usdcBalance(ours.payTo);
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => pay(server, agent.key, { url: `${ours.url}/weather?city=c${i}` })));
    const paid = results.filter((r) => r.status === 200 && r.body.paid);
    expect(paid).toHaveLength(10);
    expect(results.filter((r) => r.body.code === 'mandate_daily_cap_exceeded')).toHaveLength(20);
    // Ten distinct payments; concurrent settlements may share one batch transaction, so count records, not hashes.
    expect(new Set(paid.map((r) => r.body.paymentId)).size).toBe(10);
    expect(paid.every((r) => /^0x[0-9a-f]{64}$/.test(r.body.txHash))).toBe(true);
    expect(await usdcBalance(agent.address)).toBe(1_000_000n - 100_000n);
    expect(await usdcBalance(ours.payTo)).toBe(sellerBefore + 100_000n);
    const after = await server.request('GET', `/v0/payments/mandates/${mandate.mandateId}`, { key: agent.key });
    expect(after.body).toMatchObject({ spentTodayUsdc: '0.1', remainingTodayUsdc: '0', totalSpentUsdc: '0.1', callCount: 10 });
  });
});

describe('outbound requests go through the SSRF guard', () => {
  it('refuses link-local metadata addresses and a redirect to a private address', async () => {
    const agent = await fundedAgent(server, '0');
    await createMandate(server, agent.key);
    const metadata = await pay(server, agent.key, { url: 'http://169.254.169.254/latest/meta-data/' });
    expect(metadata.body).toMatchObject({ ok: false, code: 'url_blocked' });
    expect(metadata.status).toBe(400);
    const redirector = express();
    redirector.get('/go', (_req, res) => { res.redirect(302, 'http://10.0.0.7/internal'); });
    const running = await serve(redirector);
    extras.push(running);
    const redirected = await pay(server, agent.key, { url: `${running.url}/go` });
    expect(redirected.body).toMatchObject({ ok: false, code: 'url_blocked', message: expect.stringContaining('10.0.0.7') });
  });

  it('refuses loopback in production mode', async () => {
    const prod = await startTestServer({ TRUST_PROXY: 'true', AGENTGATE_MODE: 'production' });
    try {
      const { signUp } = await import('../support/agents.js');
      const agent = await signUp(prod);
      const key = agent.identity.rawKey;
      expect((await prod.request('POST', '/v0/payments/mandates', { key, body: { maxPerCallUsdc: '1', dailyCapUsdc: '1', validUntil: inDays(1) } })).status).toBe(201);
      const res = await prod.request('POST', '/v0/payments/pay', { key, body: { url: `${ours.url}/weather` } });
      expect(res.body).toMatchObject({ ok: false, code: 'url_blocked', message: expect.stringContaining('127.0.0.1') });
    } finally {
      await prod.close();
    }
  });
});

describe('GET /v0/payments/activity', () => {
  it('merges money in (the org as seller) and out (the identity as buyer), newest first, paged', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    // The agent's own org sells the weather too; another agent buys from it.
    expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo: agent.address } })).status).toBe(200);
    const sellerKey = (await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} })).body.apiKey;
    const { createWeatherApp } = await import('../../examples/express-seller/server.js');
    const shop = await serve(createWeatherApp({ backendUrl: server.url, apiKey: sellerKey }));
    extras.push(shop);
    expect((await server.request('POST', '/v0/payments/endpoints', { key: agent.platform_key, body: { url: `${shop.url}/weather`, priceUsdc: '0.01' } })).status).toBe(201);
    const customer = await fundedAgent(server, '1');
    await createMandate(server, customer.key);

    expect((await pay(server, agent.key, { url: `${official.url}/quote` })).body.ok).toBe(true);
    const incoming = await pay(server, customer.key, { url: `${shop.url}/weather` });
    expect(incoming.body.ok).toBe(true);
    expect((await pay(server, agent.key, { url: `${ours.url}/weather` })).body.ok).toBe(true);

    const all = await server.request('GET', '/v0/payments/activity', { key: agent.key });
    expect(all.body.activity.map((a: any) => [a.direction, a.amountUsdc])).toEqual([['out', '0.01'], ['in', '0.01'], ['out', '0.02']]);
    expect(all.body.activity[1]).toMatchObject({ payerAddress: customer.address, recipientAddress: agent.address as Address, txHash: incoming.body.txHash });
    const first = await server.request('GET', '/v0/payments/activity?limit=2', { key: agent.key });
    expect(first.body.activity).toHaveLength(2);
    const second = await server.request('GET', `/v0/payments/activity?limit=2&pageToken=${first.body.nextPageToken}`, { key: agent.key });
    expect(second.body.activity.map((a: any) => a.id)).toEqual([all.body.activity[2].id]);
    expect(second.body.nextPageToken).toBeUndefined();
  });
});

describe('input', () => {
  it('validates the pay body and the scope', async () => {
    const agent = await fundedAgent(server, '0');
    for (const body of [{}, { url: 'ftp://x.example/' }, { url: 'https://x.example/', maxAmountUsdc: 0.5 }, { url: 'https://x.example/', method: 'TRACE' }, { url: 'https://x.example/', extra: 1 }]) {
      const res = await pay(server, agent.key, body);
      expect({ body, status: res.status, error: res.body.error }).toEqual({ body, status: 400, error: 'validation_error' });
    }
    await server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['payments:spend'] } });
    expect((await pay(server, agent.key, { url: 'https://x.example/' })).status).toBe(403);
    expect(encodeBase64Json({})).toBe('e30=');
  });
});
