// payments_pay through payment channels (x402 batch-settlement): an agent pays our own seller middleware's
// route sold by channel, from its smart-account wallet, under its mandate. The first call deposits into a
// channel, later calls send a voucher only (no transaction), a call the balance does not cover tops the
// channel up, caps refuse a call the mandate does not allow, concurrent calls (on two backend processes)
// never sign the same amount, and the seller's refund of an idle channel brings the rest back to the wallet.
import { randomBytes } from 'node:crypto';
import express from 'express';
import type { Hex } from 'viem';
import { paymentMiddleware } from '../../adapters/express.js';
import { BATCH_SETTLEMENT_ADDRESS, batchSettlementAbi, readChannelState } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { chooseOffer, readChallenge } from '../../server/buyer/challenge.js';
import { encodeBase64Json } from 'agentgate-x402-wire';
import { TOOLS } from '../../server/tools.js';
import { ToolRefusal } from '../../server/platform/mcp-tool.js';
import { sendUsdc, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { serve, setUpSeller, type RunningApp } from '../interop/seller.js';
import { createMandate, fundedAgent, pay } from './support.js';
import { vouchersOnceCaptured } from '../support/channel-captures.js';
import { buyerVoucherId } from '../../server/buyer/schemes/batch-settlement/evm/records.js';

const PRICE = 1_000n; // $0.001 a call
/** Shared with the second backend process (wallet keys are sealed under it). */
const MASTER_KEY = randomBytes(32).toString('hex');

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let shop: RunningApp;
beforeAll(async () => {
  // The seller's sweep runs when a test asks for it, never on its own.
  server = await startTestServer({ MASTER_KEY, CHANNEL_SWEEP_EVERY_MS: '600000' });
  seller = await setUpSeller(server);
  const app = express();
  app.use(paymentMiddleware({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /weather': { price: '$0.001', scheme: 'batch-settlement', description: 'Weather, per call' } } }));
  app.get('/weather', (req, res) => {
    if (req.query.fail) res.status(502).json({ error: 'upstream_down' });
    else res.json({ weather: 'sunny' });
  });
  shop = await serve(app);
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${shop.url}/weather`, priceUsdc: '0.001' } });
  expect(registered.status).toBe(201);
}, 60_000);
afterAll(async () => {
  await shop?.close();
  await server?.close();
});

const weather = () => `${shop.url}/weather`;
const deposits = (channelId: string) => testChain().publicClient.getContractEvents({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, eventName: 'Deposited', args: { channelId: channelId as Hex }, fromBlock: 0n });
const sellerVouchers = async (channelId: string) => (await server.app.db.collection('channel_vouchers').find({ channelId }).toArray()).map((v) => BigInt(v.cumulative)).sort((a, b) => (a < b ? -1 : 1));
const buyerVouchers = async (channelId: string) => (await server.app.db.collection('buyer_channel_vouchers').find({ channelId }).toArray()).map((v) => [BigInt(v.cumulative), v.status] as const).sort((a, b) => (a[0] < b[0] ? -1 : 1));
const amounts = (n: number, from = 1) => Array.from({ length: n }, (_, i) => BigInt(from + i) * PRICE);
let rounds = 0;
const sweep = (idleRefundMs: number) => server.app.payments.batchSettlement.sweep.run(
  { everyMs: 1, idleRefundMs, round: `buyer-test-${process.pid}-${Date.now()}-${++rounds}` }, (orgId) => server.app.payments.acceptance.accepting(orgId));

describe('payments_pay through a batch-settlement channel', () => {
  it('the first call deposits ten calls\' worth from the wallet; the next calls are vouchers only, with no transaction', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const before = await usdcBalance(agent.address);

    const first = await pay(server, agent.key, { url: weather() });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      ok: true, paid: true, status: 200, content: { weather: 'sunny' }, payer: agent.address, recipient: seller.payTo,
      cost: { amountUsdc: '0.001', scheme: 'batch-settlement', channel: { cumulativeUsdc: '0.001', depositUsdc: '0.01' } },
      txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });
    const channelId: string = first.body.cost.channel.channelId;
    for (let i = 2; i <= 4; i++) {
      const res = await pay(server, agent.key, { url: weather() });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ content: { weather: 'sunny' }, txHash: null, cost: { channel: { channelId, cumulativeUsdc: `0.00${i}`, depositUsdc: '0' } } });
    }

    // One transaction for four calls: the deposit. The wallet paid the deposit, nothing per call.
    expect(await deposits(channelId)).toHaveLength(1);
    expect(await usdcBalance(agent.address)).toBe(before - 10n * PRICE);
    expect(await readChannelState(testChain().publicClient as never, channelId as Hex)).toMatchObject({ balance: 10n * PRICE, totalClaimed: 0n });
    // The channel's payer is the wallet; its vouchers are the owner key's (the payerAuthorizer).
    const config = (await server.app.db.collection('buyer_channels').findOne({ _id: channelId as never }))!.config;
    const wallet = await server.app.db.collection('wallets').findOne({ identityId: agent.owner.identityId });
    expect(config).toMatchObject({ payer: agent.address, payerAuthorizer: wallet!.ownerAddress, receiver: seller.payTo });
    expect(await sellerVouchers(channelId)).toEqual(amounts(4));
    expect(await buyerVouchers(channelId)).toEqual(amounts(4).map((a) => [a, 'accepted']));

    // The mandate counts the calls, not the deposit.
    const mandates = await server.request('GET', '/v0/payments/mandates', { key: agent.key });
    expect(mandates.body.mandates[0]).toMatchObject({ spentTodayUsdc: '0.004', callCount: 4 });
    const activity = await server.request('GET', '/v0/payments/activity', { key: agent.key });
    expect(activity.body.activity.map((a: any) => [a.scheme, a.status, a.amountUsdcRaw, a.channel.cumulativeUsdcRaw, a.channel.depositUsdcRaw])).toEqual([
      ['batch-settlement', 'settled', '1000', '4000', '0'], ['batch-settlement', 'settled', '1000', '3000', '0'],
      ['batch-settlement', 'settled', '1000', '2000', '0'], ['batch-settlement', 'settled', '1000', '1000', '10000'],
    ]);
    const channels = await server.request('GET', '/v0/wallet/channels', { key: agent.key });
    expect(channels.body).toMatchObject({ count: 1, channels: [{ channelId, receiver: seller.payTo, calls: 4, depositedUsdc: '0.01', chargedUsdc: '0.004', claimedUsdc: '0', balanceUsdc: '0.01', availableUsdc: '0.006', refundedUsdc: '0' }] });
  });

  it('a deposit is sized within the mandate; a call the daily cap does not allow is refused before any voucher is signed', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key, { maxPerCallUsdc: '0.001', dailyCapUsdc: '0.003' });
    const before = await usdcBalance(agent.address);
    const first = await pay(server, agent.key, { url: weather() });
    expect(first.status).toBe(200);
    // Ten calls' worth would be 0.01; the mandate allows 0.003 today.
    expect(first.body.cost.channel.depositUsdc).toBe('0.003');
    const channelId: string = first.body.cost.channel.channelId;
    for (let i = 2; i <= 3; i++) expect((await pay(server, agent.key, { url: weather() })).status).toBe(200);

    const refused = await pay(server, agent.key, { url: weather() });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ ok: false, error: 'mandate_daily_cap_exceeded' });
    expect(await sellerVouchers(channelId)).toEqual(amounts(3));
    expect(await buyerVouchers(channelId)).toEqual(amounts(3).map((a) => [a, 'accepted']));
    expect(await usdcBalance(agent.address)).toBe(before - 3n * PRICE);
    expect(await deposits(channelId)).toHaveLength(1);
  });

  it('tops the channel up when its balance does not cover the call: the wallet\'s balance bounds a deposit, a short wallet is refused', async () => {
    const agent = await fundedAgent(server, '0.002');
    await createMandate(server, agent.key);
    const first = await pay(server, agent.key, { url: weather() });
    expect(first.status).toBe(200);
    expect(first.body.cost.channel.depositUsdc).toBe('0.002'); // all the wallet had
    const channelId: string = first.body.cost.channel.channelId;
    expect((await pay(server, agent.key, { url: weather() })).status).toBe(200);

    const short = await pay(server, agent.key, { url: weather() });
    expect(short.status).toBe(402);
    expect(short.body).toMatchObject({ ok: false, error: 'balance_insufficient' });
    expect(await buyerVouchers(channelId)).toEqual(amounts(2).map((a) => [a, 'accepted']));
    const mandates = await server.request('GET', '/v0/payments/mandates', { key: agent.key });
    expect(mandates.body.mandates[0]).toMatchObject({ spentTodayUsdc: '0.002', callCount: 2 });

    await sendUsdc(agent.address, 1_000_000n); // the owner tops the wallet up
    const topUp = await pay(server, agent.key, { url: weather() });
    expect(topUp.status).toBe(200);
    expect(topUp.body).toMatchObject({ txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), cost: { channel: { channelId, cumulativeUsdc: '0.003', depositUsdc: '0.01' } } });
    expect(await deposits(channelId)).toHaveLength(2);
    expect(await readChannelState(testChain().publicClient as never, channelId as Hex)).toMatchObject({ balance: 12n * PRICE });
    expect(await sellerVouchers(channelId)).toEqual(amounts(3));
  });

  it('a call whose handler fails is not charged: the mandate gets its price back and the next call signs the same amount', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const first = await pay(server, agent.key, { url: weather() });
    const channelId: string = first.body.cost.channel.channelId;
    const failed = await pay(server, agent.key, { url: `${weather()}?fail=1` });
    expect(failed.status).toBe(502);
    expect(failed.body).toMatchObject({ ok: false, error: 'settle_failed' });
    expect(await buyerVouchers(channelId)).toEqual([[PRICE, 'accepted']]);
    const next = await pay(server, agent.key, { url: weather() });
    expect(next.body).toMatchObject({ status: 200, cost: { channel: { cumulativeUsdc: '0.002' } } });
    const mandates = await server.request('GET', '/v0/payments/mandates', { key: agent.key });
    expect(mandates.body.mandates[0]).toMatchObject({ spentTodayUsdc: '0.002', callCount: 2 });
    expect(await sellerVouchers(channelId)).toEqual(amounts(2));
  });

  it('concurrent calls, on two backend processes and through the MCP tool, never sign the same amount: each is paid once, in order', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const first = await pay(server, agent.key, { url: weather() });
    const channelId: string = first.body.cost.channel.channelId;
    const second = await startTestServer({ MONGODB_DB: server.config.MONGODB_DB, MASTER_KEY, CHANNEL_SWEEP_EVERY_MS: '600000' });
    try {
      const tool = TOOLS.find((t) => t.name === 'payments_pay')!;
      const principal = { tier: 'identity' as const, keyId: 'k', orgId: agent.org_id, identityId: agent.identity.identityId, scopes: new Set(['payments:spend']) };
      const results = await Promise.all([
        ...[server, second, server, second, second].map(async (s) => (await pay(s, agent.key, { url: weather() })).body),
        ...[0, 1].map(() => tool.run(server.app, principal, tool.input.parse({ url: weather() })) as Promise<any>),
      ]);
      expect(results.filter((r) => r instanceof ToolRefusal)).toEqual([]);
      expect(results.map((r) => r.status)).toEqual(Array(7).fill(200));
      const cumulative = results.map((r) => r.cost.channel.cumulativeUsdc).sort();
      expect(new Set(cumulative).size).toBe(7);
    } finally {
      await second.stop();
    }
    expect(await sellerVouchers(channelId)).toEqual(amounts(8));
    expect(await buyerVouchers(channelId)).toEqual(amounts(8).map((a) => [a, 'accepted']));
    expect(await deposits(channelId)).toHaveLength(1);
    const mandates = await server.request('GET', '/v0/payments/mandates', { key: agent.key });
    expect(mandates.body.mandates[0]).toMatchObject({ spentTodayUsdc: '0.008', callCount: 8 });
  });

  it('a call whose process died with its amount taken: the next call learns from the seller whether its voucher went through, and the records and the mandate follow', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const first = await pay(server, agent.key, { url: weather() });
    const channelId: string = first.body.cost.channel.channelId;
    const vouchers = server.app.db.collection('buyer_channel_vouchers');
    const payments = server.app.db.collection('outgoing_payments');
    const aMinuteAndMoreAgo = new Date(Date.now() - 2 * 60_000);

    // Died after the seller accepted its voucher, before recording it: its records still say pending.
    const second = await pay(server, agent.key, { url: weather() });
    await vouchers.updateOne({ _id: buyerVoucherId(channelId, 2) as never }, { $set: { status: 'pending', createdAt: aMinuteAndMoreAgo } });
    await payments.updateOne({ _id: second.body.paymentId }, { $set: { status: 'pending' }, $unset: { settledAt: '' } });
    const third = await pay(server, agent.key, { url: weather() });
    expect(third.body).toMatchObject({ status: 200, cost: { channel: { cumulativeUsdc: '0.003' } } });
    expect(await payments.findOne({ _id: second.body.paymentId })).toMatchObject({ status: 'settled' });

    // Died after taking the next amount and reserving the price, before sending anything.
    const { reservation } = await server.app.mandates.reserve(agent.owner, new URL(weather()), PRICE) as any;
    await payments.insertOne({ _id: 'pay_dead' as never, identityId: agent.owner.identityId, orgId: agent.owner.orgId, status: 'pending', scheme: 'batch-settlement', createdAt: aMinuteAndMoreAgo });
    await vouchers.insertOne({ _id: buyerVoucherId(channelId, 4) as never, channelId, seq: 4, identityId: agent.owner.identityId, cumulative: '4000', price: '1000', status: 'pending', paymentId: 'pay_dead', reservation, createdAt: aMinuteAndMoreAgo });
    const fourth = await pay(server, agent.key, { url: weather() });
    // The seller has charged 0.003: the dead call's amount is this call's, and the dead call's price goes back.
    expect(fourth.body).toMatchObject({ status: 200, cost: { channel: { cumulativeUsdc: '0.004' } } });
    expect(await payments.findOne({ _id: 'pay_dead' as never })).toMatchObject({ status: 'failed' });
    expect(await sellerVouchers(channelId)).toEqual(amounts(4));
    expect(await buyerVouchers(channelId)).toEqual(amounts(4).map((a) => [a, 'accepted']));
    const mandates = await server.request('GET', '/v0/payments/mandates', { key: agent.key });
    expect(mandates.body.mandates[0]).toMatchObject({ spentTodayUsdc: '0.004', callCount: 4 });
  });

  it('a paid answer that does not say whether the voucher was taken: the call stays counted and pending until the next call settles it', async () => {
    // A proxy in front of the seller that drops the settlement header from paid answers.
    const proxy = express();
    proxy.get('/weather', async (req, res) => {
      const answer = await fetch(weather(), { headers: Object.fromEntries(Object.entries(req.headers).filter(([name]) => name === 'payment-signature')) as Record<string, string> });
      for (const [name, value] of answer.headers) if (!['payment-response', 'x-payment-response'].includes(name) && name !== 'content-length' && name !== 'transfer-encoding') res.setHeader(name, value);
      res.status(answer.status).send(Buffer.from(await answer.arrayBuffer()));
    });
    const front = await serve(proxy);
    try {
      const agent = await fundedAgent(server, '1');
      await createMandate(server, agent.key);
      const first = await pay(server, agent.key, { url: weather() });
      const channelId: string = first.body.cost.channel.channelId;
      const unsure = await pay(server, agent.key, { url: `${front.url}/weather` });
      expect([unsure.status, unsure.body.error]).toEqual([502, 'settle_failed']);
      expect(await buyerVouchers(channelId)).toEqual([[PRICE, 'accepted'], [2n * PRICE, 'unknown']]);
      const pending = await server.app.db.collection('outgoing_payments').findOne({ identityId: agent.owner.identityId, 'channel.cumulativeUsdcRaw': '2000' });
      expect(pending).toMatchObject({ status: 'pending' });
      let mandates = await server.request('GET', '/v0/payments/mandates', { key: agent.key });
      expect(mandates.body.mandates[0]).toMatchObject({ spentTodayUsdc: '0.002' });

      const next = await pay(server, agent.key, { url: weather() });
      expect(next.body).toMatchObject({ status: 200, cost: { channel: { cumulativeUsdc: '0.003' } } });
      expect(await buyerVouchers(channelId)).toEqual(amounts(3).map((a) => [a, 'accepted']));
      expect(await server.app.db.collection('outgoing_payments').findOne({ _id: pending!._id })).toMatchObject({ status: 'settled' });
      mandates = await server.request('GET', '/v0/payments/mandates', { key: agent.key });
      expect(mandates.body.mandates[0]).toMatchObject({ spentTodayUsdc: '0.003', callCount: 3 });
    } finally {
      await front.close();
    }
  });

  it('an idle channel: the seller claims its calls and refunds the rest to the wallet; the next call deposits again', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const before = await usdcBalance(agent.address);
    const first = await pay(server, agent.key, { url: weather() });
    const channelId: string = first.body.cost.channel.channelId;
    expect((await pay(server, agent.key, { url: weather() })).status).toBe(200);
    expect(await usdcBalance(agent.address)).toBe(before - 10n * PRICE);
    // Our middleware takes no refund request from a buyer (its backend refunds idle channels itself): a clear refusal, nothing moves.
    const asked = await server.request('POST', `/v0/wallet/channels/${channelId}/refund`, { key: agent.key });
    expect([asked.status, asked.body.error]).toEqual([502, 'settle_failed']);
    expect(await usdcBalance(agent.address)).toBe(before - 10n * PRICE);
    // The wallet's own idle round asks the same and is refused: the channel is not asked again for a day,
    // and the wallet starts withdrawing it (test/buyer/pay-channel-withdraw.test.ts follows that through).
    const asking = await server.app.buyer.channels.refundIdle({ idleMs: 0, round: `buyer-idle-${Date.now()}` });
    expect(asking!.refused).toBeGreaterThanOrEqual(1);
    expect(asking!.withdrawalsStarted).toBeGreaterThanOrEqual(1);
    expect(await server.app.db.collection('buyer_channels').findOne({ _id: channelId as never })).toMatchObject({ refundRefusedAt: expect.any(Date) });
    expect(await server.app.buyer.channels.refundIdle({ idleMs: 0, round: `buyer-idle-again-${Date.now()}` })).toEqual({ refunded: 0, refused: 0, withdrawalsStarted: 0, withdrawalsFinished: 0 });

    await vouchersOnceCaptured(server.app.db, channelId);
    const totals = await sweep(0);
    expect(totals!.refunded).toBeGreaterThanOrEqual(1);
    expect(await usdcBalance(agent.address)).toBe(before - 2n * PRICE);
    // The seller's refund ended the wallet's pending withdrawal of the same remainder.
    const channels = await server.request('GET', '/v0/wallet/channels', { key: agent.key });
    expect(channels.body.channels[0]).toMatchObject({ channelId, depositedUsdc: '0.01', chargedUsdc: '0.002', claimedUsdc: '0.002', balanceUsdc: '0.002', availableUsdc: '0', refundedUsdc: '0.008', withdrawalPending: false });

    const again = await pay(server, agent.key, { url: weather() });
    expect(again.body).toMatchObject({ status: 200, txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), cost: { channel: { channelId, cumulativeUsdc: '0.003', depositUsdc: '0.01' } } });
    expect(await deposits(channelId)).toHaveLength(2);
  });
});

describe('choosing a channel', () => {
  const ours = { network: 'base-sepolia', caip2: 'eip155:84532', usdc: testChain().usdc };
  const resource = { url: 'https://api.example.com/weather', description: '', mimeType: 'application/json' };
  const exact = { scheme: 'exact', network: 'eip155:84532', amount: '1000', asset: ours.usdc, payTo: '0x000000000000000000000000000000000000dEaD', maxTimeoutSeconds: 60, extra: { name: 'USDC', version: '2' } };
  const channel = { ...exact, scheme: 'batch-settlement', extra: { ...exact.extra, receiverAuthorizer: '0x000000000000000000000000000000000000bEEF', withdrawDelay: 900 } };
  /** A seller's 402 as payments_pay reads it (the PAYMENT-REQUIRED header). */
  const challengeOf = (...accepts: Array<Record<string, unknown>>) => readChallenge({
    status: 402, url: resource.url, body: Buffer.from(''), bodyText: '',
    headers: { 'payment-required': encodeBase64Json({ x402Version: 2, resource, accepts }) },
  })!;

  it('prefers a channel offered beside exact, and pays exact when it is the only offer', () => {
    expect(chooseOffer(challengeOf(exact, channel), ours)).toMatchObject({ ok: true, offer: { scheme: 'batch-settlement' } });
    expect(chooseOffer(challengeOf(exact), ours)).toMatchObject({ ok: true, offer: { scheme: 'exact' } });
  });

  it('passes over a channel it would not pay: a withdrawal delay over a day, no receiver authorizer, an unknown deposit method', () => {
    for (const extra of [{ withdrawDelay: 2 * 86_400 }, { receiverAuthorizer: '0x0000000000000000000000000000000000000000' }, { assetTransferMethod: 'erc20Approval' }]) {
      expect(chooseOffer(challengeOf(exact, { ...channel, extra: { ...channel.extra, ...extra } }), ours)).toMatchObject({ ok: true, offer: { scheme: 'exact' } });
    }
  });
});
