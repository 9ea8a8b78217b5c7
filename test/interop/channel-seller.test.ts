// Selling through payment channels: our middleware on Express, Koa, Hono and Fastify with a route sold by
// `batch-settlement`, on the real backend and chain, paid by the official client (@x402/fetch with the
// batch-settlement client scheme). The channel's state is in the backend's database: a deposit with the
// first call, then a voucher per call accepted once (a unique insert), even when the same voucher reaches
// two seller processes at the same instant; the backend's sweep claims the calls, many channels in one
// transaction, settles them to the seller, and refunds idle channels.
import { randomBytes } from 'node:crypto';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import Router from '@koa/router';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { createWalletClient, http, parseUnits, zeroAddress, type Hex } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { paymentMiddleware as koaPayments } from '../../adapters/koa.js';
import { paymentMiddleware as honoPayments } from '../../adapters/hono.js';
import { paymentMiddleware as fastifyPayments } from '../../adapters/fastify.js';
import type { RouteConfig } from '../../middleware/index.js';
import { BATCH_SETTLEMENT_ADDRESS, batchSettlementAbi, channelIdOf, readChannelState, voucherTypedData, type ChannelConfig } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { fundedBuyer, setEthBalance, testChain, usdcBalance } from '../support/chain.js';
import { vouchersOnceCaptured as vouchersLanded } from '../support/channel-captures.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { serve, setUpSeller } from './seller.js';
import { officialChannelClient } from '../support/official-channel-client.js';

const NETWORK = 'eip155:84532';
const PRICE = 1_000n; // $0.001 a call
/** Shared by the backend processes (the receiver authorizer is sealed under it). */
const MASTER_KEY = randomBytes(32).toString('hex');

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let receiverAuthorizer: string;
beforeAll(async () => {
  // The sweep runs when a test asks for it (one round each), never on its own during a test.
  server = await startTestServer({ MASTER_KEY, CHANNEL_SWEEP_EVERY_MS: '600000' });
  seller = await setUpSeller(server);
  receiverAuthorizer = (await server.request('GET', '/v0/x402/supported')).body.kinds.find((k: any) => k.scheme === 'batch-settlement').extra.receiverAuthorizer;
}, 60_000);
afterAll(async () => { await server?.close(); });

const ROUTE: RouteConfig = { price: '$0.001', scheme: 'batch-settlement', description: 'Weather, per call' };

type Framework = 'Express' | 'Koa' | 'Hono' | 'Fastify';
/** Handlers waiting for the test (Express's `?gate=<name>`), by name. */
const gates = new Map<string, () => void>();
/** What a test changes of the seller's middleware options (the route's config, how it reaches the backend, its warnings). */
type ShopOptions = { route?: Partial<RouteConfig>; fetch?: typeof fetch; warn?: (message: string) => void };
function app(framework: Framework, backendUrl = server.url, shop: ShopOptions = {}) {
  const options = { backendUrl, apiKey: seller.sellerKey, routes: { 'GET /weather': { ...ROUTE, ...shop.route } as RouteConfig }, ...(shop.fetch ? { fetch: shop.fetch } : {}), ...(shop.warn ? { warn: shop.warn } : {}) };
  switch (framework) {
    case 'Express': {
      const a = express();
      a.use(expressPayments(options));
      a.get('/weather', async (req, res) => {
        // ?gate=<name>: the handler answers once the test opens that gate (a call still being answered).
        if (typeof req.query.gate === 'string') await new Promise<void>((open) => gates.set(req.query.gate as string, open));
        if (req.query.fail) res.status(502).json({ error: 'upstream_down' });
        else res.json({ weather: 'sunny' });
      });
      return a;
    }
    case 'Koa': {
      const a = new Koa();
      const router = new Router();
      router.get('/weather', (ctx) => { ctx.body = { weather: 'sunny' }; });
      a.use(koaPayments(options)).use(router.routes());
      return a;
    }
    case 'Hono': {
      const a = new Hono();
      a.use(honoPayments(options));
      a.get('/weather', (c) => c.json({ weather: 'sunny' }));
      return a;
    }
    case 'Fastify': {
      const a = Fastify();
      void a.register(fastifyPayments(options));
      a.get('/weather', async () => ({ weather: 'sunny' }));
      return a;
    }
  }
}

async function withShop<T>(framework: Framework, run: (url: string) => Promise<T>, backendUrl?: string, shop?: ShopOptions): Promise<T> {
  const running = await serve(app(framework, backendUrl, shop) as never);
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${running.url}/weather`, priceUsdc: '0.001' } });
  expect(registered.status).toBe(201);
  try {
    return await run(running.url);
  } finally {
    await running.close();
  }
}

const channelClient = officialChannelClient;

/**
 * PAYMENT-SIGNATURE headers the official client would not send, for the channel `scheme` opened at `url`
 * (after its first paid call): a voucher for `max`, signed by `signer` (the buyer by default).
 */
async function handSigned(url: string, buyer: PrivateKeyAccount, scheme: ReturnType<typeof channelClient>['scheme']) {
  const accept = { ...decodePaymentRequiredHeader((await fetch(`${url}/weather`)).headers.get('payment-required')!).accepts[0]! };
  const config = scheme.buildChannelConfig(accept) as ChannelConfig;
  const channelId = channelIdOf(config, 84532);
  const voucher = async (max: bigint, signer = buyer) => {
    const signature = await signer.signTypedData(voucherTypedData(channelId, max, 84532) as never);
    return Buffer.from(JSON.stringify({ x402Version: 2, accepted: accept, payload: { type: 'voucher', channelConfig: config, voucher: { channelId, maxClaimableAmount: max.toString(), signature } } })).toString('base64');
  };
  return { channelId, voucher };
}

/** `calls` paid calls in a row, each answered 200; the channel they paid through. */
async function payCalls(url: string, paying: typeof fetch, calls: number): Promise<Hex> {
  let id: Hex | undefined;
  for (let i = 0; i < calls; i++) {
    const res = await paying(`${url}/weather`);
    expect(res.status).toBe(200);
    id ??= (decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as any).channelState.channelId;
  }
  await vouchersLanded(server.app.db, id!);
  return id!;
}
const channelState = (id: Hex) => readChannelState(testChain().publicClient as never, id);

/** A channel's vouchers as [cumulative, status], once its captures landed (all but `heldStill`). */
const vouchersOnceCaptured = async (channelId: string, heldStill = 0) =>
  (await vouchersLanded(server.app.db, channelId, heldStill)).map((v) => [v.cumulative, v.status]);

/** One sweep round now (its own round id: the sweep runs each round once across processes). */
let rounds = 0;
async function sweep(options: { idleRefundMs?: number } = {}) {
  return server.app.payments.batchSettlement.sweep.run({ everyMs: 1, idleRefundMs: options.idleRefundMs ?? 24 * 3_600_000, round: `test-${process.pid}-${Date.now()}-${++rounds}` }, (orgId) => server.app.payments.acceptance.accepting(orgId));
}

describe.each(['Express', 'Koa', 'Hono', 'Fastify'] as const)('%s: a route sold by batch-settlement', (framework) => {
  it('answers 402 offering a channel with agentgate\'s receiver authorizer; the official client deposits once and pays each call with a voucher', async () => {
    await withShop(framework, async (url) => {
      const unpaid = await fetch(`${url}/weather`);
      expect([unpaid.status, unpaid.status === 402 ? '' : await unpaid.text()]).toEqual([402, '']);
      const required = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!);
      expect(required.accepts).toEqual([expect.objectContaining({ scheme: 'batch-settlement', network: NETWORK, amount: '1000', payTo: seller.payTo, extra: expect.objectContaining({ receiverAuthorizer, withdrawDelay: 900 }) })]);

      const buyer = await fundedBuyer('1');
      const before = await usdcBalance(buyer.address);
      const { paying } = channelClient(buyer);
      let channelId: Hex | undefined;
      for (let i = 1; i <= 4; i++) {
        const res = await paying(`${url}/weather`);
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ weather: 'sunny' });
        const settlement = decodePaymentResponseHeader(res.headers.get('payment-response')!);
        expect(settlement).toMatchObject({ success: true, network: NETWORK, extra: { chargedAmount: '1000', channelState: { chargedCumulativeAmount: String(BigInt(i) * PRICE) } } });
        // The deposit is a transaction; a voucher sends nothing.
        if (i === 1) expect(settlement.transaction).toMatch(/^0x[0-9a-f]{64}$/);
        else expect(settlement.transaction).toBe('');
        channelId ??= (settlement.extra as any).channelState.channelId;
      }
      expect(await usdcBalance(buyer.address)).toBe(before - 10n * PRICE);
      const vouchers = await server.app.db.collection('channel_vouchers').find({ channelId: channelId!.toLowerCase() }).toArray();
      expect(vouchers.map((v) => v.cumulative).sort()).toEqual(['1000', '2000', '3000', '4000']);
    });
  });
});

describe('the sweep and the guarantees (Express)', () => {
  it('claims every channel\'s calls in one transaction and settles them to the seller', async () => {
    await withShop('Express', async (url) => {
      const buyers = await Promise.all([fundedBuyer('1'), fundedBuyer('1'), fundedBuyer('1')]);
      const ids: Hex[] = [];
      for (const [n, buyer] of buyers.entries()) {
        const { paying } = channelClient(buyer);
        for (let i = 0; i <= n; i++) {
          const res = await paying(`${url}/weather`);
          expect(res.status).toBe(200);
          if (i === 0) ids.push((decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as any).channelState.channelId);
        }
      }
      await sweep(); // claims everything the earlier tests left too
      const sellerBefore = await usdcBalance(seller.payTo);
      const claimsBefore = await server.app.db.collection('channel_actions').countDocuments({ kind: 'claim' });
      // More calls on each channel, then one round: one claim for the three channels, one settle.
      for (const buyer of buyers) {
        const { paying } = channelClient(buyer);
        expect((await paying(`${url}/weather`)).status).toBe(200);
      }
      for (const id of ids) await vouchersLanded(server.app.db, id);
      const totals = await sweep();
      expect(totals).toMatchObject({ claimed: 3, settled: 1 });
      expect(await server.app.db.collection('channel_actions').countDocuments({ kind: 'claim' })).toBe(claimsBefore + 1);
      for (const [n, id] of ids.entries()) expect(await channelState(id)).toMatchObject({ totalClaimed: BigInt(n + 2) * PRICE });
      expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + 3n * PRICE);
      // Nothing new: the next round sends nothing.
      expect(await sweep()).toMatchObject({ claimed: 0, refunded: 0 });
    });
  });

  it('claims 60 channels in one transaction (its record names them all)', async () => {
    await withShop('Express', async (url) => {
      await sweep(); // claims what the earlier tests left
      const buyers: PrivateKeyAccount[] = [];
      for (let i = 0; i < 60; i++) buyers.push(await fundedBuyer('1'));
      const ids = await Promise.all(buyers.map(async (buyer) => {
        const res = await channelClient(buyer).paying(`${url}/weather`);
        expect(res.status).toBe(200);
        return ((decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as any).channelState.channelId as string).toLowerCase();
      }));
      for (const id of ids) await vouchersLanded(server.app.db, id);
      const totals = await sweep();
      expect(totals).toMatchObject({ claimed: 60 });
      const claim = await server.app.db.collection('channel_actions').findOne({ kind: 'claim', channelIds: ids[0] });
      expect(claim).toMatchObject({ status: 'succeeded' });
      expect([...claim!.channelIds].sort()).toEqual([...ids].sort());
      for (const id of ids) expect(await channelState(id as Hex)).toMatchObject({ totalClaimed: PRICE });
    });
  }, 120_000);

  it('a round reads the channels written to since the last round, not every channel the seller ever had: 300 channels claimed long ago are never read', async () => {
    await withShop('Express', async (url) => {
      // The earlier tests' channels claimed and refunded (idle), then found done: the work set is empty.
      await sweep({ idleRefundMs: 0 });
      await sweep();
      const workSet = server.app.db.collection('channel_sweep_work');
      expect(await workSet.countDocuments({ chainId: 84532 })).toBe(0);
      // A year of history, as the records keep it: channels whose calls were claimed long ago (written before
      // the sweep kept its work set, so their vouchers carry no minute).
      const longAgo = new Date(Date.now() - 300 * 86_400_000);
      const history = Array.from({ length: 300 }, () => `0x${randomBytes(32).toString('hex')}`);
      await server.app.db.collection('channels').insertMany(history.map((id) => ({
        _id: id as never, orgId: seller.orgId, chainId: 84532, payer: seller.payTo, receiver: seller.payTo,
        config: { payer: seller.payTo, payerAuthorizer: zeroAddress, receiver: seller.payTo, receiverAuthorizer, token: testChain().usdc, withdrawDelay: 900, salt: `0x${'00'.repeat(32)}` },
        balance: '1000', totalClaimed: '1000', withdrawRequestedAt: 0, refundNonce: '0', syncedAt: longAgo, createdAt: longAgo,
      })));
      await server.app.db.collection('channel_vouchers').insertMany(history.map((id) => ({
        _id: `${id}:000000000001` as never, seq: 1, channelId: id, orgId: seller.orgId, cumulative: '1000', price: '1000', signature: '0x', resource: `${url}/weather`,
        status: 'captured', response: {}, createdAt: longAgo,
      })));
      const buyer = await fundedBuyer('1');
      const channelId = (await payCalls(url, channelClient(buyer).paying, 2)).toLowerCase();

      // Every command of the round, with what it answered.
      const commands: Array<{ name: string; asked: string; answered: string; docs: number }> = [];
      const started = new Map<number, { name: string; asked: string }>();
      const client = server.app.db.getClient();
      const onStart = (e: { requestId: number; commandName: string; command: unknown }) => started.set(e.requestId, { name: e.commandName, asked: JSON.stringify(e.command) });
      const onDone = (e: { requestId: number; reply: any }) => {
        const command = started.get(e.requestId);
        if (command) commands.push({ ...command, answered: JSON.stringify(e.reply), docs: (e.reply?.cursor?.firstBatch ?? e.reply?.cursor?.nextBatch ?? []).length });
      };
      client.on('commandStarted', onStart);
      client.on('commandSucceeded', onDone);
      let totals;
      try {
        totals = await sweep();
      } finally {
        client.off('commandStarted', onStart);
        client.off('commandSucceeded', onDone);
      }
      expect(totals).toMatchObject({ claimed: 1 });
      expect(await channelState(channelId as Hex)).toMatchObject({ totalClaimed: 2n * PRICE });
      // No command asked for a channel of the history or answered with one, and none answered with as many
      // documents as the history holds (the minutes since the last round hold the earlier tests' calls).
      const namesHistory = (text: string) => history.some((id) => text.includes(id.slice(2)));
      expect(commands.filter((c) => namesHistory(c.asked) || namesHistory(c.answered)).map((c) => c.asked.slice(0, 200))).toEqual([]);
      expect(commands.filter((c) => c.docs >= history.length).map((c) => c.asked.slice(0, 200))).toEqual([]);
      expect(commands.some((c) => c.asked.includes(channelId.slice(2)))).toBe(true);
      // The channel stays in the set until its payer's rest is refunded (idle) or withdrawn: the history never enters it.
      expect(await sweep()).toMatchObject({ claimed: 0, refunded: 0 });
      expect((await workSet.find({ chainId: 84532 }).toArray()).map((w) => w._id)).toEqual([channelId]);
    });
  });

  it('the same voucher sent to two seller processes on two backend processes at the same instant is accepted once; sent again, it gets a 402 saying where the channel stands', async () => {
    const buyer = await fundedBuyer('1');
    const { paying, scheme } = channelClient(buyer);
    const first = await withShop('Express', async (url) => {
      const res = await paying(`${url}/weather`);
      expect(res.status).toBe(200);
      return { url, required: decodePaymentRequiredHeader((await fetch(`${url}/weather`)).headers.get('payment-required')!) };
    });
    // Two seller apps of the same seller, each on its own backend process (one database).
    const second = await startTestServer({ MONGODB_DB: server.config.MONGODB_DB, MASTER_KEY, CHANNEL_SWEEP_EVERY_MS: '600000' });
    try {
      await withShop('Express', async (urlA) => withShop('Express', async (urlB) => {
        const accept = { ...decodePaymentRequiredHeader((await fetch(`${urlA}/weather`)).headers.get('payment-required')!).accepts[0]! };
        const config = scheme.buildChannelConfig(accept) as ChannelConfig;
        const channelId = channelIdOf(config, 84532);
        const max = 2n * PRICE;
        const signature = await buyer.signTypedData(voucherTypedData(channelId, max, 84532) as never);
        const header = Buffer.from(JSON.stringify({ x402Version: 2, accepted: accept, payload: { type: 'voucher', channelConfig: config, voucher: { channelId, maxClaimableAmount: max.toString(), signature } } })).toString('base64');
        const [a, b] = await Promise.all([urlA, urlB].map((u) => fetch(`${u}/weather`, { headers: { 'PAYMENT-SIGNATURE': header } })));
        expect([a!.status, b!.status].sort()).toEqual([200, 402]);
        const again = await fetch(`${urlA}/weather`, { headers: { 'PAYMENT-SIGNATURE': header } });
        expect(again.status).toBe(402);
        const corrective = decodePaymentRequiredHeader(again.headers.get('payment-required')!);
        expect(corrective.error).toBe('invalid_batch_settlement_evm_cumulative_amount_mismatch');
        expect(corrective.accepts[0]!.extra).toMatchObject({ channelState: { channelId, chargedCumulativeAmount: '2000' }, voucherState: { signedMaxClaimable: '2000' } });
        const vouchers = await server.app.db.collection('channel_vouchers').find({ channelId: channelId.toLowerCase() }).toArray();
        expect(vouchers.map((v) => v.cumulative).sort()).toEqual(['1000', '2000']);
      }, second.url));
    } finally {
      await second.stop();
    }
    expect(first.required.accepts[0]!.scheme).toBe('batch-settlement');
  });

  it('a channel\'s calls through two backend processes in turn: each finds the vouchers the other accepted, reading vouchers by `_id` only (FerretDB scans the whole collection for a range or a sort), numbered without gaps; the next call on the same process reads neither', async () => {
    const second = await startTestServer({ MONGODB_DB: server.config.MONGODB_DB, MASTER_KEY, CHANNEL_SWEEP_EVERY_MS: '600000' });
    const filters: unknown[] = [];
    const reads: string[] = [];
    let watching = true;
    for (const backend of [server, second]) {
      backend.app.db.getClient().on('commandStarted', (e) => {
        if (watching && e.commandName === 'find' && e.command.find === 'channel_vouchers') filters.push(e.command.filter);
        if (watching && e.commandName === 'find' && ['channels', 'channel_vouchers'].includes(e.command.find)) reads.push(e.command.find);
      });
    }
    try {
      const buyer = await fundedBuyer('1');
      const { paying } = channelClient(buyer);
      const channelId = await withShop('Express', (urlA) => withShop('Express', async (urlB) => {
        let id: string | undefined;
        for (let i = 1; i <= 8; i++) {
          // Turns, then twice on the first process; the last call is timed by its reads.
          if (i === 8) reads.length = 0;
          const res = await paying(`${i >= 7 || i % 2 ? urlA : urlB}/weather`);
          expect(res.status).toBe(200);
          const settlement = decodePaymentResponseHeader(res.headers.get('payment-response')!);
          expect(settlement).toMatchObject({ extra: { channelState: { chargedCumulativeAmount: String(BigInt(i) * PRICE) } } });
          id ??= (settlement.extra as any).channelState.channelId;
        }
        // The channel's record and its newest voucher (captured: it never changes) are the process's own.
        expect(reads).toEqual([]);
        return id!.toLowerCase();
      }, second.url));
      watching = false;
      expect(filters.length).toBeGreaterThan(0);
      for (const filter of filters) expect(filter).toEqual({ _id: expect.any(String) });
      const vouchers = await vouchersLanded(server.app.db, channelId);
      expect(vouchers.map((v) => [v.seq, v.cumulative, v.status])).toEqual([1, 2, 3, 4, 5, 6, 7, 8].map((n) => [n, String(BigInt(n) * PRICE), 'captured']));
    } finally {
      await second.stop();
    }
  });

  it('refused with nothing accepted: a voucher signed by someone else, a voucher that skips a call', async () => {
    const buyer = await fundedBuyer('1');
    const { paying, scheme } = channelClient(buyer);
    await withShop('Express', async (url) => {
      expect((await paying(`${url}/weather`)).status).toBe(200);
      const { channelId, voucher } = await handSigned(url, buyer, scheme);
      const send = async (signer: PrivateKeyAccount, max: bigint) => {
        const res = await fetch(`${url}/weather`, { headers: { 'PAYMENT-SIGNATURE': await voucher(max, signer) } });
        return { status: res.status, error: res.status === 402 ? decodePaymentRequiredHeader(res.headers.get('payment-required')!).error : undefined };
      };
      const stranger = (await import('viem/accounts')).privateKeyToAccount((await import('viem/accounts')).generatePrivateKey());
      expect(await send(stranger, 2n * PRICE)).toEqual({ status: 402, error: 'invalid_batch_settlement_evm_voucher_signature' });
      expect(await send(buyer, 3n * PRICE)).toEqual({ status: 402, error: 'invalid_batch_settlement_evm_cumulative_amount_mismatch' });
      const vouchers = await server.app.db.collection('channel_vouchers').find({ channelId: channelId.toLowerCase() }).toArray();
      expect(vouchers.map((v) => v.cumulative)).toEqual(['1000']);
    });
  });

  it('a voucher building on a call still being answered does not charge that call: the channel is busy until its handler succeeds, then the same voucher pays', async () => {
    const buyer = await fundedBuyer('1');
    const { paying, scheme } = channelClient(buyer);
    await withShop('Express', async (url) => {
      expect((await paying(`${url}/weather`)).status).toBe(200);
      const { channelId, voucher } = await handSigned(url, buyer, scheme);
      const refusal = (res: Response) => (res.status === 402 ? decodePaymentRequiredHeader(res.headers.get('payment-required')!).error : undefined);
      // The second call is held while its handler waits; a third voucher, signed on top of it ahead of its answer, comes in.
      const second = fetch(`${url}/weather?gate=second`, { headers: { 'PAYMENT-SIGNATURE': await voucher(2n * PRICE) } });
      while (!gates.has('second')) await new Promise((r) => setTimeout(r, 10));
      const third = await voucher(3n * PRICE);
      const early = await fetch(`${url}/weather`, { headers: { 'PAYMENT-SIGNATURE': third } });
      expect([early.status, refusal(early)]).toEqual([402, 'invalid_batch_settlement_evm_channel_busy']);
      expect(await vouchersOnceCaptured(channelId.toLowerCase(), 1)).toEqual([['1000', 'captured'], ['2000', 'held']]);
      gates.get('second')!();
      expect((await second).status).toBe(200);
      const late = await fetch(`${url}/weather`, { headers: { 'PAYMENT-SIGNATURE': third } });
      expect(late.status).toBe(200);
      expect(await vouchersOnceCaptured(channelId.toLowerCase())).toEqual([['1000', 'captured'], ['2000', 'captured'], ['3000', 'captured']]);
    });
  });

  it('a capture the backend cannot take at first is asked again and the call is charged; one that never lands while the hold lasts leaves the call free and tells the seller', async () => {
    const buyer = await fundedBuyer('1');
    const { paying } = channelClient(buyer);
    let failCaptures = 0;
    const warnings: string[] = [];
    // The seller's way to the backend, cut for capture requests while failCaptures lasts (the backend itself runs as ever).
    const cutting: typeof fetch = async (input, init) => {
      if (String(input instanceof Request ? input.url : input).endsWith('/capture') && failCaptures > 0) {
        failCaptures--;
        throw new TypeError('fetch failed: connection reset (cut by the test)');
      }
      return fetch(input, init);
    };
    await withShop('Express', async (url) => {
      const pay = async () => {
        const res = await paying(`${url}/weather`);
        expect(res.status).toBe(200);
        return decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as any;
      };
      const channelId = ((await pay()).channelState.channelId as string).toLowerCase();
      // Cut once: asked again a moment later, captured.
      failCaptures = 1;
      expect((await pay()).channelState.chargedCumulativeAmount).toBe('2000');
      expect(await vouchersOnceCaptured(channelId)).toEqual([['1000', 'captured'], ['2000', 'captured']]);
      expect([failCaptures, warnings]).toEqual([0, []]);
      // Cut for good: the call was answered, its hold (2 s) runs out uncaptured, and the seller is told.
      failCaptures = 1_000;
      expect((await pay()).channelState.chargedCumulativeAmount).toBe('3000');
      const deadline = Date.now() + 20_000;
      while (warnings.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(warnings).toEqual([expect.stringMatching(/was answered but its voucher could not be captured while its hold lasted .*it was not charged/)]);
      failCaptures = 0;
      // That call was free: once its hold has expired, the channel stands at 2000, and the buyer's client,
      // told so by a corrective 402, pays its next call from there.
      const lapsed = (await vouchersLanded(server.app.db, channelId, 1)).at(-1)!;
      while (lapsed.holdExpiresAt > new Date()) await new Promise((r) => setTimeout(r, 100));
      // Its capture, arriving now that the hold has ended, is refused: the call stays free.
      const late = await server.request('POST', `/v0/payments/channels/vouchers/${encodeURIComponent(`${lapsed._id}:${lapsed.holdToken}`)}/capture`, { key: seller.sellerKey });
      expect([late.status, late.body.error]).toEqual([409, 'hold_expired']);
      expect((await pay()).channelState.chargedCumulativeAmount).toBe('3000');
      expect(await vouchersOnceCaptured(channelId)).toEqual([['1000', 'captured'], ['2000', 'captured'], ['3000', 'captured']]);
    }, undefined, { route: { holdSeconds: 2 }, fetch: cutting, warn: (message) => warnings.push(message) });
  });

  it('a hold another process took as run out while its call was answered (their clocks apart): the capture puts the voucher back, the call stays charged; a release after the capture changes nothing', async () => {
    const buyer = await fundedBuyer('1');
    const { paying } = channelClient(buyer);
    await withShop('Express', async (url) => {
      const channelId = await payCalls(url, paying, 1);
      const answering = paying(`${url}/weather?gate=skewed`);
      while (!gates.has('skewed')) await new Promise((r) => setTimeout(r, 10));
      const held = (await vouchersLanded(server.app.db, channelId, 1)).at(-1)!;
      expect([held.seq, held.status]).toEqual([2, 'held']);
      // What a process whose clock runs ahead does with a hold it takes as run out: its voucher deleted.
      expect((await server.app.db.collection('channel_vouchers').deleteOne({ _id: held._id as never })).deletedCount).toBe(1);
      gates.get('skewed')!();
      const res = await answering;
      expect(res.status).toBe(200);
      expect(decodePaymentResponseHeader(res.headers.get('payment-response')!)).toMatchObject({ extra: { channelState: { chargedCumulativeAmount: '2000' } } });
      // Written so close to its hold's end, the capture (sent after the answer) looked for its voucher and put it back.
      let vouchers = await vouchersLanded(server.app.db, channelId);
      for (const deadline = Date.now() + 30_000; vouchers.length < 2 && Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 20));
        vouchers = await vouchersLanded(server.app.db, channelId);
      }
      expect(vouchers.map((v) => [v.cumulative, v.status])).toEqual([['1000', 'captured'], ['2000', 'captured']]);
      const release = await server.request('POST', `/v0/payments/channels/vouchers/${encodeURIComponent(`${held._id}:${held.holdToken}`)}/release`, { key: seller.sellerKey });
      expect([release.status, release.body]).toEqual([200, { released: false }]);
      expect((await paying(`${url}/weather`)).status).toBe(200);
      expect((await vouchersLanded(server.app.db, channelId)).map((v) => [v.cumulative, v.status])).toEqual([['1000', 'captured'], ['2000', 'captured'], ['3000', 'captured']]);
      await sweep();
      expect((await channelState(channelId)).totalClaimed).toBe(3n * PRICE);
    }, undefined, { route: { holdSeconds: 5 } });
  });

  it('a payer who starts withdrawing: the next round claims every accepted call before the withdrawal can complete', async () => {
    const buyer = await fundedBuyer('1');
    await setEthBalance(buyer.address, parseUnits('1', 18));
    const { paying, scheme } = channelClient(buyer);
    const { channelId, config } = await withShop('Express', async (url) => {
      const channelId = await payCalls(url, paying, 3);
      const accept = decodePaymentRequiredHeader((await fetch(`${url}/weather`)).headers.get('payment-required')!).accepts[0]!;
      return { channelId, config: scheme.buildChannelConfig(accept) as ChannelConfig };
    });
    const { chain, rpcUrl, publicClient } = testChain();
    const hash = await createWalletClient({ chain, transport: http(rpcUrl), account: buyer }).writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'initiateWithdraw', args: [config, 10n * PRICE] });
    expect((await publicClient.waitForTransactionReceipt({ hash })).status).toBe('success');
    const pending = await channelState(channelId);
    expect(pending.withdrawRequestedAt).toBeGreaterThan(0);
    await sweep();
    // Claimed while the withdrawal waits out its delay: what it can take back is only what no call paid for.
    expect(await channelState(channelId)).toMatchObject({ totalClaimed: 3n * PRICE, balance: 10n * PRICE, withdrawRequestedAt: pending.withdrawRequestedAt });
  });

  it('a seller sets how often its channels are claimed: a round before it is due claims nothing, unless a payer started withdrawing; due again, it claims', async () => {
    const acceptance = (body: Record<string, unknown>) => server.request('PUT', '/v0/payments/acceptance', { key: seller.platformKey, body: { enabled: true, payTo: seller.payTo, ...body } });
    const lastClaims = server.app.db.collection('channel_last_claims');
    expect((await acceptance({ channelClaimEverySeconds: 5 })).status).toBe(400);
    const hourly = await acceptance({ channelClaimEverySeconds: 3600 });
    expect([hourly.status, hourly.body.channelClaimEverySeconds]).toEqual([200, 3600]);
    expect((await server.request('GET', '/v0/payments/acceptance', { key: seller.sellerKey })).body).toMatchObject({ channelClaimEverySeconds: 3600 });
    try {
      await sweep(); // what earlier tests left
      await lastClaims.deleteOne({ _id: seller.orgId as never }); // a seller that never claimed: due at once
      const [first, second] = [await fundedBuyer('1'), await fundedBuyer('1')];
      await setEthBalance(second.address, parseUnits('1', 18));
      const { paying: payingFirst } = channelClient(first);
      const { paying: payingSecond, scheme } = channelClient(second);
      const { a, b, config } = await withShop('Express', async (url) => {
        const a = await payCalls(url, payingFirst, 1);
        const b = await payCalls(url, payingSecond, 1);
        return { a, b, config: scheme.buildChannelConfig(decodePaymentRequiredHeader((await fetch(`${url}/weather`)).headers.get('payment-required')!).accepts[0]!) as ChannelConfig };
      });
      expect(await sweep()).toMatchObject({ claimed: 2 });
      await withShop('Express', async (url) => {
        await payCalls(url, payingFirst, 2);
        await payCalls(url, payingSecond, 2);
      });
      // Within the hour: nothing claimed.
      expect(await sweep()).toMatchObject({ claimed: 0 });
      expect(await channelState(a)).toMatchObject({ totalClaimed: PRICE });
      // The second payer starts withdrawing: its channel is claimed now, the other waits for the schedule.
      const { chain, rpcUrl, publicClient } = testChain();
      const hash = await createWalletClient({ chain, transport: http(rpcUrl), account: second }).writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'initiateWithdraw', args: [config, 9n * PRICE] });
      expect((await publicClient.waitForTransactionReceipt({ hash })).status).toBe('success');
      expect(await sweep()).toMatchObject({ claimed: 1 });
      expect([(await channelState(a)).totalClaimed, (await channelState(b)).totalClaimed]).toEqual([PRICE, 3n * PRICE]);
      // An hour later (the last claim moved back), the schedule is due: the rest is claimed.
      await lastClaims.updateOne({ _id: seller.orgId as never }, { $set: { at: new Date(Date.now() - 3_601_000) } });
      expect(await sweep()).toMatchObject({ claimed: 1 });
      expect(await channelState(a)).toMatchObject({ totalClaimed: 3n * PRICE });
    } finally {
      const reset = await acceptance({});
      expect(reset.body.channelClaimEverySeconds).toBeNull();
    }
  });

  it('a deposit whose call died after the deposit went through: presented again, the deposit is not sent again and the call is paid', async () => {
    const buyer = await fundedBuyer('1');
    const before = await usdcBalance(buyer.address);
    const { paying, sent } = channelClient(buyer);
    await withShop('Express', async (url) => {
      const first = await paying(`${url}/weather`);
      expect(first.status).toBe(200);
      const deposit = decodePaymentResponseHeader(first.headers.get('payment-response')!);
      const channelId = (deposit.extra as any).channelState.channelId as string;
      // The state a process killed between recording the deposit and accepting its voucher leaves.
      await vouchersLanded(server.app.db, channelId);
      expect((await server.app.db.collection('channel_vouchers').deleteMany({ channelId: channelId.toLowerCase() })).deletedCount).toBe(1);
      const again = await fetch(`${url}/weather`, { headers: { 'PAYMENT-SIGNATURE': sent[0]! } });
      expect(again.status).toBe(200);
      expect(decodePaymentResponseHeader(again.headers.get('payment-response')!)).toMatchObject({ success: true, transaction: deposit.transaction, extra: { channelState: { chargedCumulativeAmount: '1000' } } });
      expect(await usdcBalance(buyer.address)).toBe(before - 10n * PRICE);
      // And once more: now a replay, refused.
      expect((await fetch(`${url}/weather`, { headers: { 'PAYMENT-SIGNATURE': sent[0]! } })).status).toBe(402);
      expect(await usdcBalance(buyer.address)).toBe(before - 10n * PRICE);
    });
  });

  it('a deposit presented again carries a voucher like any call: one the payer did not sign is refused, though the deposit went through', async () => {
    const buyer = await fundedBuyer('1');
    const { paying, sent } = channelClient(buyer);
    await withShop('Express', async (url) => {
      expect((await paying(`${url}/weather`)).status).toBe(200);
      // The deposit's header again, its voucher moved on to the next call's amount and signed by someone else.
      const forged = JSON.parse(Buffer.from(sent[0]!, 'base64').toString('utf8'));
      const stranger = (await import('viem/accounts')).privateKeyToAccount((await import('viem/accounts')).generatePrivateKey());
      forged.payload.voucher.maxClaimableAmount = (2n * PRICE).toString();
      forged.payload.voucher.signature = await stranger.signTypedData(voucherTypedData(forged.payload.voucher.channelId, 2n * PRICE, 84532) as never);
      const res = await fetch(`${url}/weather`, { headers: { 'PAYMENT-SIGNATURE': Buffer.from(JSON.stringify(forged)).toString('base64') } });
      expect({ status: res.status, error: res.status === 402 ? decodePaymentRequiredHeader(res.headers.get('payment-required')!).error : undefined })
        .toEqual({ status: 402, error: 'invalid_batch_settlement_evm_voucher_signature' });
      const vouchers = await server.app.db.collection('channel_vouchers').find({ channelId: forged.payload.voucher.channelId.toLowerCase() }).toArray();
      expect(vouchers.map((v) => v.cumulative)).toEqual(['1000']);
    });
  });

  it('claim records left `sending` (a process killed after sending the claim; a copy of the same rows): the next round finishes both from the chain, nothing sent twice', async () => {
    const buyer = await fundedBuyer('1');
    const { paying } = channelClient(buyer);
    const channelId = await withShop('Express', async (url) => {
      return payCalls(url, paying, 2);
    });
    await sweep();
    const actions = server.app.db.collection('channel_actions');
    const claim = await actions.findOne({ kind: 'claim', channelIds: channelId.toLowerCase() });
    expect(claim).toMatchObject({ status: 'succeeded' });
    // Killed after sending: the claim is on chain, its record still says `sending`.
    await actions.updateOne({ _id: claim!._id }, { $set: { status: 'sending', createdAt: new Date(Date.now() - 3_600_000) }, $unset: { answer: '', txHash: '' } });
    // A second record of the same rows, under another key, never sent.
    const unsent = { ...claim!, _id: `${claim!._id}:unsent`, status: 'sending', createdAt: new Date(Date.now() - 3_600_000), work: { ...claim!.work, actionId: `${claim!._id}:unsent` } };
    delete (unsent as any).answer;
    delete (unsent as any).txHash;
    await actions.insertOne(unsent as never);
    const totals = await sweep();
    expect(totals!.finished).toBeGreaterThanOrEqual(2);
    expect(await actions.findOne({ _id: claim!._id })).toMatchObject({ status: 'succeeded', txHash: claim!.txHash });
    expect(await actions.findOne({ _id: unsent._id as never })).toMatchObject({ status: 'succeeded' });
    const claimed = await testChain().publicClient.getContractEvents({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, eventName: 'Claimed', args: { channelId }, fromBlock: 0n });
    expect(claimed).toHaveLength(1);
    expect(await channelState(channelId)).toMatchObject({ totalClaimed: 2n * PRICE });
  });

  it('a call whose handler fails is not charged: its voucher is released, and the next call pays the same amount', async () => {
    const buyer = await fundedBuyer('1');
    const { paying } = channelClient(buyer);
    await withShop('Express', async (url) => {
      const first = await paying(`${url}/weather`);
      expect(first.status).toBe(200);
      const channelId = ((decodePaymentResponseHeader(first.headers.get('payment-response')!).extra as any).channelState.channelId as string).toLowerCase();
      const failed = await paying(`${url}/weather?fail=1`);
      expect([failed.status, failed.headers.get('payment-response')]).toEqual([502, null]);
      expect(await vouchersOnceCaptured(channelId)).toEqual([['1000', 'captured']]);
      const next = await paying(`${url}/weather`);
      expect(next.status).toBe(200);
      expect(decodePaymentResponseHeader(next.headers.get('payment-response')!)).toMatchObject({ extra: { channelState: { chargedCumulativeAmount: '2000' } } });
      expect(await vouchersOnceCaptured(channelId)).toEqual([['1000', 'captured'], ['2000', 'captured']]);
      // A capture of the failed call's hold arriving late (its process stalled) finds the channel's second voucher is another call's now: refused.
      const late = await server.request('POST', `/v0/payments/channels/vouchers/${encodeURIComponent(`${channelId}:${'2'.padStart(12, '0')}:0123456789abcdef`)}/capture`, { key: seller.sellerKey });
      expect([late.status, late.body.error]).toEqual([409, 'hold_expired']);
    });
  });

  it('a price computed per request: each voucher adds that call\'s price', async () => {
    const running = await serve((() => {
      const a = express();
      a.use(expressPayments({ backendUrl: server.url, apiKey: seller.sellerKey, routes: {
        'GET /report': { price: (req) => (req.query.get('size') === 'large' ? '$0.003' : '$0.001'), maxPrice: '$0.005', scheme: 'batch-settlement' },
      } }));
      a.get('/report', (_req, res) => { res.json({ report: 'ok' }); });
      return a;
    })() as never);
    try {
      expect((await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${running.url}/report`, maxPriceUsdc: '0.005' } })).status).toBe(201);
      const buyer = await fundedBuyer('1');
      const { paying } = channelClient(buyer);
      const charged: string[] = [];
      for (const size of ['small', 'large', 'small']) {
        const res = await paying(`${running.url}/report?size=${size}`);
        expect(res.status).toBe(200);
        const extra = decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as any;
        charged.push(`${extra.chargedAmount}/${extra.channelState.chargedCumulativeAmount}`);
      }
      expect(charged).toEqual(['1000/1000', '3000/4000', '1000/5000']);
    } finally {
      await running.close();
    }
  });

  it('an idle channel is claimed and the rest refunded to the payer in one transaction', async () => {
    const buyer = await fundedBuyer('1');
    const before = await usdcBalance(buyer.address);
    const { paying } = channelClient(buyer);
    const channelId = await withShop('Express', async (url) => {
      return payCalls(url, paying, 2);
    });
    const totals = await sweep({ idleRefundMs: 0 });
    expect(totals!.refunded).toBeGreaterThanOrEqual(1);
    expect(await channelState(channelId)).toMatchObject({ balance: 2n * PRICE, totalClaimed: 2n * PRICE, refundNonce: 1n });
    expect(await usdcBalance(buyer.address)).toBe(before - 2n * PRICE);
  });
});
