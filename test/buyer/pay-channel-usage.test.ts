// payments_pay on a route priced by usage and sold through payment channels: our Express middleware with
// `{ price: { upto, unreported }, scheme: 'batch-settlement' }`. Each voucher allows the channel's charged
// total plus the route's maximum; the seller charges what the handler used and says the charged total, on
// which the wallet's next voucher builds. A call charged nothing is followed by a voucher for the same
// amount as the one before it, and is paid. The mandate counts what the vouchers commit (the highest amount
// signed: the seller may claim any voucher it holds), the records what each call was charged; a call whose
// answer was lost is settled from the seller's word on its next 402.
import { randomBytes } from 'node:crypto';
import express from 'express';
import type { Hex } from 'viem';
import { paymentMiddleware } from '../../adapters/express.js';
import type { RequestPayment } from '../../middleware/index.js';
import { formatUsdc } from 'agentgate-x402-wire';
import { readChannelState } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { serve, setUpSeller, type RunningApp } from '../interop/seller.js';
import { createMandate, fundedAgent, pay } from './support.js';
import { vouchersOnceCaptured } from '../support/channel-captures.js';

const MAX = 5_000n; // $0.005, the most one call may cost
const MASTER_KEY = randomBytes(32).toString('hex');

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let shop: RunningApp;
beforeAll(async () => {
  // The seller's sweep runs when a test asks for it, never on its own.
  server = await startTestServer({ MASTER_KEY, CHANNEL_SWEEP_EVERY_MS: '600000' });
  seller = await setUpSeller(server);
  const app = express();
  app.use(paymentMiddleware({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /complete': { price: { upto: '$0.005', unreported: '$0.001' }, scheme: 'batch-settlement', description: 'A completion, by tokens' } } }));
  app.get('/complete', (req, res) => {
    // ?used=<atomic units>: what the call used; absent: nothing reported (charged `unreported`).
    if (typeof req.query.used === 'string') (res.locals.payment as RequestPayment).charge({ atomic: BigInt(req.query.used) });
    res.json({ text: 'done' });
  });
  shop = await serve(app);
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${shop.url}/complete`, maxPriceUsdc: '0.005' } });
  expect(registered.status).toBe(201);
}, 60_000);
afterAll(async () => {
  await shop?.close();
  await server?.close();
});

const complete = (used?: bigint) => `${shop.url}/complete${used === undefined ? '' : `?used=${used}`}`;
/** The seller's vouchers on the channel as it charged them: [signed maximum, charged total], in order. */
const sellerCharges = async (channelId: string) => (await vouchersOnceCaptured(server.app.db, channelId))
  .filter((v) => v.status === 'captured').map((v) => [BigInt(v.cumulative), BigInt(v.charged ?? v.cumulative)]);
/**
 * A proxy in front of the seller's route: it keeps the payment headers it forwards (`seen`), and with
 * `dropSettlement` drops the settlement header from the answers (the buyer never learns what was charged).
 */
async function proxyOf(options: { dropSettlement?: boolean; seen?: string[] }): Promise<RunningApp> {
  const proxy = express();
  proxy.get('/complete', async (req, res) => {
    const header = req.headers['payment-signature'];
    if (typeof header === 'string') options.seen?.push(header);
    const answer = await fetch(`${shop.url}${req.url}`, { headers: typeof header === 'string' ? { 'payment-signature': header } : {} });
    const dropped = ['content-length', 'transfer-encoding', ...(options.dropSettlement ? ['payment-response', 'x-payment-response'] : [])];
    for (const [name, value] of answer.headers) if (!dropped.includes(name)) res.setHeader(name, value);
    res.status(answer.status).send(Buffer.from(await answer.arrayBuffer()));
  });
  return serve(proxy);
}

let rounds = 0;
const sweep = () => server.app.payments.batchSettlement.sweep.run(
  { everyMs: 1, idleRefundMs: 3_600_000, round: `buyer-usage-${process.pid}-${Date.now()}-${++rounds}` }, (orgId) => server.app.payments.acceptance.accepting(orgId));
const spentToday = async (key: string) => (await server.request('GET', '/v0/payments/mandates', { key })).body.mandates[0].spentTodayUsdc;

describe('payments_pay on a usage-priced channel route', () => {
  it('each call is charged what it used; the next voucher builds on the charged total; a call charged nothing is paid too; the claim is the sum of the charges', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const charges: Array<[bigint | undefined, bigint]> = [[2_000n, 2_000n], [5_000n, 5_000n], [0n, 0n], [undefined, 1_000n], [1_500n, 1_500n]];
    let channelId = '';
    let total = 0n;
    for (const [used, charged] of charges) {
      const res = await pay(server, agent.key, { url: complete(used) });
      expect(res.status).toBe(200);
      total += charged;
      expect(res.body).toMatchObject({ paid: true, content: { text: 'done' }, cost: { amountUsdcRaw: charged.toString(), scheme: 'batch-settlement', channel: { cumulativeUsdc: formatUsdc(total) } } });
      // The voucher allowed the charged total before the call plus the maximum.
      expect(res.body.cost.channel.signedUsdc).toBe(formatUsdc(total - charged + MAX));
      channelId ||= res.body.cost.channel.channelId;
    }
    // One payment per call: no voucher was refused and signed again.
    const records = await server.app.db.collection('outgoing_payments').find({ identityId: agent.owner.identityId }).sort({ createdAt: 1 }).toArray();
    expect(records.map((r) => [r.status, r.amountUsdcRaw])).toEqual(charges.map(([, c]) => ['settled', c.toString()]));
    expect((await sellerCharges(channelId)).map(([, c]) => c)).toEqual([2_000n, 7_000n, 7_000n, 8_000n, 9_500n]);

    // The wallet signed at most 13_000 (the last call: 8_000 charged before it plus the maximum): that is what the mandate counts.
    expect(await spentToday(agent.key)).toBe('0.013');
    const listed = await server.request('GET', '/v0/wallet/channels', { key: agent.key });
    expect(listed.body.channels[0]).toMatchObject({ channelId, calls: 5, chargedUsdc: '0.0095' });

    // The seller claims exactly what it charged.
    const before = await usdcBalance(seller.payTo);
    await sweep();
    expect(await readChannelState(testChain().publicClient as never, channelId as Hex)).toMatchObject({ totalClaimed: total });
    expect(await usdcBalance(seller.payTo)).toBe(before + total);
  });

  it('a call whose answer was lost: the next call assumes its maximum, the seller says what it charged, and the lost call is settled for that', async () => {
    const front = await proxyOf({ dropSettlement: true });
    try {
      const agent = await fundedAgent(server, '1');
      await createMandate(server, agent.key);
      const first = await pay(server, agent.key, { url: complete(2_000n) });
      const channelId: string = first.body.cost.channel.channelId;
      const lost = await pay(server, agent.key, { url: `${front.url}/complete?used=1000` });
      expect([lost.status, lost.body.error]).toEqual([502, 'settle_failed']);
      // Not known yet: its whole maximum stays reserved (0.005 for each call so far).
      expect(await spentToday(agent.key)).toBe('0.01');

      const next = await pay(server, agent.key, { url: complete(3_000n) });
      expect(next.status).toBe(200);
      expect(next.body).toMatchObject({ cost: { amountUsdcRaw: '3000', channel: { cumulativeUsdc: '0.006', signedUsdc: '0.008' } } });
      const lostRecord = await server.app.db.collection('outgoing_payments').findOne({ identityId: agent.owner.identityId, requestUrl: `${front.url}/complete?used=1000` });
      expect(lostRecord).toMatchObject({ status: 'settled', amountUsdcRaw: '1000', channel: { cumulativeUsdcRaw: '3000' } });
      // The voucher refused on the way (built on the lost call's maximum) counts nothing: the highest amount signed and taken is 8_000.
      expect(await spentToday(agent.key)).toBe('0.008');
      expect((await sellerCharges(channelId)).map(([, c]) => c)).toEqual([2_000n, 3_000n, 6_000n]);
    } finally {
      await front.close();
    }
  });

  it('a voucher paid with twice (after a call charged nothing, the next voucher repeats it): the next call builds on the seller\'s total and is paid; the log says so', async () => {
    // A proxy that keeps the payment headers the wallet sends, as anyone on the path could.
    const seen: string[] = [];
    const front = await proxyOf({ seen });
    try {
      const agent = await fundedAgent(server, '1');
      await createMandate(server, agent.key);
      const first = await pay(server, agent.key, { url: complete(2_000n) });
      const channelId: string = first.body.cost.channel.channelId;
      const nothing = await pay(server, agent.key, { url: `${front.url}/complete?used=0` });
      expect(nothing.body).toMatchObject({ cost: { amountUsdcRaw: '0', channel: { cumulativeUsdc: '0.002', signedUsdc: '0.007' } } });
      // Someone sends that header again: the seller takes it (it is the voucher the channel's next call would sign) and charges 4_000.
      const replayed = await fetch(complete(4_000n), { headers: { 'payment-signature': seen.at(-1)! } });
      expect(replayed.status).toBe(200);
      await vouchersOnceCaptured(server.app.db, channelId);

      // The wallet's next voucher (0.007) is refused, the seller says 0.006: the next one builds on that, and the call is paid.
      const next = await pay(server, agent.key, { url: complete(1_000n) });
      expect(next.status).toBe(200);
      expect(next.body).toMatchObject({ cost: { amountUsdcRaw: '1000', channel: { cumulativeUsdc: '0.007', signedUsdc: '0.011' } } });
      const logs = (await server.request('GET', '/v0/logs', { key: agent.key })).body.logs;
      expect(logs.find((l: { action: string }) => l.action === 'payments.channel_overcharged')).toMatchObject({ severity: 'warning', targetId: channelId });
      // Committed: the highest amount signed (0.011), no more.
      expect(await spentToday(agent.key)).toBe('0.011');
    } finally {
      await front.close();
    }
  });
});
