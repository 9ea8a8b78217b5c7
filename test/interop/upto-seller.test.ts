// Selling by usage: our middleware on Express, Koa, Hono and Fastify with a route priced
// `{ upto: '$0.50' }`, on the real backend and chain, paid by the official @x402/fetch + @x402/evm upto
// client. The handler reports what the request used (an LLM's tokens) and exactly that is settled after
// it; nothing reported costs the route's `unreported` charge (0 by default); a charge above the maximum
// or a failed handler charges nothing.
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { toClientEvmSigner } from '@x402/evm';
import type { Address } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import type { RequestPayment, RouteConfig } from '../../middleware/index.js';
import { fundedBuyer, testChain, usdcBalance, permit2ApprovedBuyer } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { paidApp, serve, setUpSeller, type Framework } from './seller.js';

const NETWORK = 'eip155:84532';
/** $0.0001 a token, as an LLM API might charge. */
const PER_TOKEN = 100n;

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
}, 60_000);
afterAll(async () => { await server?.close(); });

/** The model's work: `tokens` from the query; `report` says how the handler reports it. */
type Report = 'tokens' | 'nothing' | 'too-much' | 'fail';
function completion(tokensParam: string | undefined, report: Report, payment: RequestPayment): { status: number; body: unknown } {
  const tokens = BigInt(tokensParam ?? '0');
  if (report === 'fail') return { status: 502, body: { error: 'model_unavailable' } };
  if (report === 'tokens') payment.charge({ atomic: tokens * PER_TOKEN });
  if (report === 'too-much') payment.charge('$0.51'); // throws: above the maximum
  return { status: 200, body: { text: 'Hello from the model', usage: { tokens: Number(tokens) }, maxAtomic: String(payment.maxAmountAtomic) } };
}

function app(framework: Framework, route: RouteConfig, report: () => Report) {
  const options = { backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'POST /complete': route } };
  return paidApp(framework, options, 'POST', '/complete', (query, payment) => completion(query.tokens, report(), payment));
}

const officialUptoFetch = (buyer: PrivateKeyAccount) => wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, new UptoEvmScheme(buyer))
  .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] }));

async function withSeller(framework: Framework, route: RouteConfig, report: () => Report, run: (url: string) => Promise<void>) {
  const running = await serve(app(framework, route, report));
  // A route that answers only POST answers GET with the app's 404: checked with GET, it is refused, saying why.
  const byGet = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${running.url}/complete`, maxPriceUsdc: '0.50' } });
  expect(byGet.body).toMatchObject({ error: 'endpoint_check_failed', message: expect.stringContaining('answered 404 to GET, not 402 from the agentgate middleware (a route that answers only another method: give it as body.method)') });
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${running.url}/complete`, maxPriceUsdc: '0.50', method: 'POST' } });
  expect([registered.status, registered.text]).toEqual([201, expect.any(String)]);
  try {
    await run(running.url);
  } finally {
    await running.close();
  }
}

async function recordOf(buyer: Address) {
  const list = await server.request('GET', '/v0/payments', { key: seller.platformKey });
  return list.body.payments.find((p: any) => p.payerAddress === buyer);
}

describe.each(['Express', 'Koa', 'Hono', 'Fastify'] as const)('%s: a route priced { upto: "$0.50" }', (framework) => {
  it('answers 402 with an upto requirement naming the facilitator; the official client pays what the handler reported', async () => {
    await withSeller(framework, { price: { upto: '$0.50' }, description: 'LLM completion' }, () => 'tokens', async (url) => {
      const unpaid = await fetch(`${url}/complete?tokens=123`, { method: 'POST' });
      expect([unpaid.status, unpaid.status === 402 ? '' : await unpaid.text()]).toEqual([402, '']);
      const required = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!);
      const facilitatorAddress = (await server.request('GET', '/v0/x402/supported')).body.kinds.find((k: any) => k.scheme === 'upto').extra.facilitatorAddress;
      expect(required.accepts).toEqual([expect.objectContaining({ scheme: 'upto', network: NETWORK, amount: '500000', payTo: seller.payTo, extra: expect.objectContaining({ facilitatorAddress }) })]);

      const buyer = await permit2ApprovedBuyer('2');
      const [buyerBefore, sellerBefore] = [await usdcBalance(buyer.address), await usdcBalance(seller.payTo)];
      const res = await officialUptoFetch(buyer)(`${url}/complete?tokens=123`, { method: 'POST' });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ text: 'Hello from the model', usage: { tokens: 123 }, maxAtomic: '500000' });
      const settlement = decodePaymentResponseHeader(res.headers.get('payment-response')!);
      expect(settlement).toMatchObject({ success: true, payer: buyer.address, network: NETWORK, amount: '12300' });
      expect(await usdcBalance(buyer.address)).toBe(buyerBefore - 12_300n);
      expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + 12_300n);
      expect(await recordOf(buyer.address)).toMatchObject({ status: 'settled', scheme: 'upto', amountUsdcRaw: '12300', maxAmountUsdcRaw: '500000', txHash: settlement.transaction });
    });
  });
});

describe('what a request that reports no usage, too much, or fails is charged (Express)', () => {
  it('nothing reported: charged 0 (the default), no transaction, the permit used up', async () => {
    await withSeller('Express', { price: { upto: '$0.50' } }, () => 'nothing', async (url) => {
      const buyer = await permit2ApprovedBuyer('2');
      const before = await usdcBalance(buyer.address);
      const res = await officialUptoFetch(buyer)(`${url}/complete?tokens=5`, { method: 'POST' });
      expect(res.status).toBe(200);
      expect(decodePaymentResponseHeader(res.headers.get('payment-response')!)).toMatchObject({ success: true, transaction: '', amount: '0' });
      expect(await usdcBalance(buyer.address)).toBe(before);
      expect(await recordOf(buyer.address)).toMatchObject({ status: 'settled', amountUsdcRaw: '0', maxAmountUsdcRaw: '500000', txHash: null });
    });
  });

  it('nothing reported on a route with `unreported: "$0.01"`: charged $0.01', async () => {
    await withSeller('Express', { price: { upto: '$0.50', unreported: '$0.01' } }, () => 'nothing', async (url) => {
      const buyer = await permit2ApprovedBuyer('2');
      const before = await usdcBalance(buyer.address);
      const res = await officialUptoFetch(buyer)(`${url}/complete`, { method: 'POST' });
      expect(res.status).toBe(200);
      expect(decodePaymentResponseHeader(res.headers.get('payment-response')!)).toMatchObject({ success: true, amount: '10000' });
      expect(await usdcBalance(buyer.address)).toBe(before - 10_000n);
    });
  });

  it('a handler charging above the maximum gets a RangeError: the request fails (500) and nothing is charged', async () => {
    await withSeller('Express', { price: { upto: '$0.50' } }, () => 'too-much', async (url) => {
      const buyer = await permit2ApprovedBuyer('2');
      const before = await usdcBalance(buyer.address);
      const res = await officialUptoFetch(buyer)(`${url}/complete`, { method: 'POST' });
      expect(res.status).toBe(500);
      expect(await usdcBalance(buyer.address)).toBe(before);
      expect(await recordOf(buyer.address)).toBeUndefined();
    });
  });

  it('a failing handler (502) is not charged, whatever it had used', async () => {
    await withSeller('Express', { price: { upto: '$0.50' } }, () => 'fail', async (url) => {
      const buyer = await permit2ApprovedBuyer('2');
      const before = await usdcBalance(buyer.address);
      const res = await officialUptoFetch(buyer)(`${url}/complete?tokens=100`, { method: 'POST' });
      expect([res.status, await res.text()]).toEqual([502, JSON.stringify({ error: 'model_unavailable' })]);
      expect(await usdcBalance(buyer.address)).toBe(before);
    });
  });

  it('a buyer without a Permit2 allowance whose client can sign the EIP-2612 permit (the 402 declares eip2612GasSponsoring) pays without gas', async () => {
    await withSeller('Express', { price: { upto: '$0.50' } }, () => 'tokens', async (url) => {
      const buyer = await fundedBuyer('1');
      const before = await usdcBalance(buyer.address);
      const signer = toClientEvmSigner(buyer, testChain().publicClient as never);
      const paying = wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, new UptoEvmScheme(signer))
        .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] }));
      const res = await paying(`${url}/complete?tokens=7`, { method: 'POST' });
      expect(res.status).toBe(200);
      expect(decodePaymentResponseHeader(res.headers.get('payment-response')!)).toMatchObject({ success: true, amount: '700' });
      expect(await usdcBalance(buyer.address)).toBe(before - 700n);
    });
  });

  it('a buyer who never approved Permit2 and sends no EIP-2612 permit is refused with the reason (402 permit2_allowance_required), nothing charged, handler not run', async () => {
    let runs = 0;
    await withSeller('Express', { price: { upto: '$0.50' } }, () => { runs++; return 'tokens'; }, async (url) => {
      const buyer = await fundedBuyer('1');
      const before = await usdcBalance(buyer.address);
      const res = await officialUptoFetch(buyer)(`${url}/complete?tokens=1`, { method: 'POST' });
      expect(res.status).toBe(402);
      expect(decodePaymentRequiredHeader(res.headers.get('payment-required')!).error).toBe('permit2_allowance_required');
      expect(runs).toBe(0);
      expect(await usdcBalance(buyer.address)).toBe(before);
    });
  });

  it('refuses a route table that cannot sell by usage', () => {
    const options = (route: RouteConfig) => ({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'POST /x': route } });
    expect(() => expressPayments(options({ price: { upto: '$0.50' }, settle: 'before-handler' }))).toThrow(/settled after the handler/);
    expect(() => expressPayments(options({ price: { upto: '$0.50', unreported: '$1' } }))).toThrow(/unreported charge is above/);
    expect(() => expressPayments(options({ price: { upto: '0' } }))).toThrow(/more than 0/);
  });
});
