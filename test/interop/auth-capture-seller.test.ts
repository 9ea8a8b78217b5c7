// Selling with buyer protection: our middleware on Express, Koa, Hono and Fastify with a route offering
// `scheme: 'auth-capture'`, on the real backend and chain, paid by the official @x402/fetch + @x402/evm
// auth-capture client. The payment is authorized into the escrow before the handler runs; a handler that
// succeeds is captured (once), one that fails is voided (the buyer is whole), and a captured payment can
// be refunded on chain.
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { parseUnits, type Address } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import type { RequestPayment, RouteConfig } from '../../middleware/index.js';
import { AUTH_CAPTURE_ESCROW_ADDRESS, escrowState } from '../../server/payments/schemes/auth-capture/evm/chain.js';
import { fundedBuyer, sendUsdc, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { paidApp, serve, setUpSeller, type Framework } from './seller.js';
import { createServer } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { verifyReceipt, verifyWebhook } from 'agentgate-x402-wire';

const NETWORK = 'eip155:84532';
const PRICE = 250_000n; // $0.25

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let operator: Address;
beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
  operator = (await server.request('GET', '/v0/x402/supported')).body.kinds.find((k: any) => k.scheme === 'auth-capture').extra.captureAuthorizer;
  await sendUsdc(operator, parseUnits('10', 6)); // the operator funds refunds
}, 60_000);
afterAll(async () => { await server?.close(); });

type Outcome = 'ok' | 'fail' | 'throw';
const handled: Array<RequestPayment | undefined> = [];
function report(outcome: Outcome, payment: RequestPayment): { status: number; body: unknown } {
  handled.push(payment);
  if (outcome === 'throw') throw new Error('the report generator crashed');
  if (outcome === 'fail') return { status: 503, body: { error: 'report_unavailable' } };
  return { status: 200, body: { report: 'quarterly', scheme: payment.scheme, paymentId: payment.paymentId } };
}

function app(framework: Framework, route: RouteConfig, outcome: () => Outcome) {
  const options = { backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /report': route } };
  return paidApp(framework, options, 'GET', '/report', (_query, payment) => report(outcome(), payment));
}

const officialFetch = (buyer: PrivateKeyAccount) => wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, new AuthCaptureEvmScheme(buyer))
  .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] }));

async function withSeller(framework: Framework, outcome: () => Outcome, run: (url: string, webhookSecret?: string) => Promise<void>, webhookUrl?: string) {
  const running = await serve(app(framework, { price: '$0.25', scheme: 'auth-capture', description: 'Quarterly report' }, outcome));
  // Checked against the route's 402, whose offer is in the v2 PAYMENT-REQUIRED header only (x402 v1 has
  // no auth-capture): a wrong price is refused, the right one registered.
  const register = (priceUsdc: string) => server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${running.url}/report`, priceUsdc, ...(webhookUrl ? { webhookUrl } : {}) } });
  expect((await register('0.30')).body).toMatchObject({ error: 'endpoint_check_failed', message: expect.stringContaining('asks for 250000 atomic units, not the price 0.30') });
  const registered = await register('0.25');
  expect([registered.status, registered.text]).toEqual([201, expect.anything()]);
  try {
    await run(running.url, registered.body.webhookSecret);
  } finally {
    await running.close();
  }
}

async function recordOf(buyer: Address) {
  const list = await server.request('GET', '/v0/payments', { key: seller.platformKey });
  return list.body.payments.find((p: any) => p.payerAddress === buyer);
}

describe.each(['Express', 'Koa', 'Hono', 'Fastify'] as const)('%s: a route offering auth-capture', (framework) => {
  it('offers the escrow in its 402; a handler that succeeds is captured once, and a refund returns the money on chain', async () => {
    await withSeller(framework, () => 'ok', async (url) => {
      const unpaid = await fetch(`${url}/report`);
      expect([unpaid.status, unpaid.status === 402 ? '' : await unpaid.text()]).toEqual([402, '']);
      const required = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!);
      expect(required.accepts).toEqual([expect.objectContaining({
        scheme: 'auth-capture', network: NETWORK, amount: String(PRICE), payTo: seller.payTo,
        extra: expect.objectContaining({ captureAuthorizer: operator, authCaptureEscrow: AUTH_CAPTURE_ESCROW_ADDRESS, minFeeBps: 0, maxFeeBps: 0, captureMode: 'deferred' }),
      })]);

      const buyer = await fundedBuyer('1');
      const [buyerBefore, sellerBefore] = [await usdcBalance(buyer.address), await usdcBalance(seller.payTo)];
      const res = await officialFetch(buyer)(`${url}/report`);
      const body = await res.json() as any;
      expect([res.status, body]).toEqual([200, expect.anything()]);
      expect(body).toMatchObject({ report: 'quarterly', scheme: 'auth-capture' });
      const settlement = decodePaymentResponseHeader(res.headers.get('payment-response')!);
      expect(settlement).toMatchObject({ success: true, payer: buyer.address, network: NETWORK });
      expect(await usdcBalance(buyer.address)).toBe(buyerBefore - PRICE);
      expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + PRICE);
      const record = await recordOf(buyer.address);
      expect(record).toMatchObject({ id: body.paymentId, status: 'settled', scheme: 'auth-capture', amountUsdcRaw: String(PRICE), txHash: settlement.transaction });

      // Captured once: the escrow holds nothing more to capture, and a second capture answers the first.
      const again = await server.request('POST', `/v0/payments/holds/${record.id}/capture`, { key: seller.sellerKey, body: {} });
      expect(again.body.paymentResponse.transaction).toBe(settlement.transaction);
      expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + PRICE);

      const refund = await server.request('POST', `/v0/payments/${record.id}/refund`, { key: seller.platformKey, body: { reason: 'customer asked' } });
      expect(refund.body).toMatchObject({ status: 'refunded', amountUsdcRaw: String(PRICE) });
      expect(await usdcBalance(buyer.address)).toBe(buyerBefore);
      const [capturable, refundable] = await escrowStateOf(record.id);
      expect([capturable, refundable]).toEqual([0n, 0n]);
    });
  });

  it('a handler that fails (503, or throws) leaves the buyer whole: the authorization is voided', async () => {
    for (const outcome of ['fail', 'throw'] as const) {
      await withSeller(framework, () => outcome, async (url) => {
        const buyer = await fundedBuyer('1');
        const [buyerBefore, sellerBefore] = [await usdcBalance(buyer.address), await usdcBalance(seller.payTo)];
        const res = await officialFetch(buyer)(`${url}/report`);
        const text = await res.text();
        // The body is shown when no payment was made at all (a 503 of the backend looks like the handler's).
        const made = await recordOf(buyer.address);
        expect({ outcome, status: res.status, made: !!made, body: made ? '' : text }).toEqual({ outcome, status: outcome === 'fail' ? 503 : 500, made: true, body: '' });
        expect(res.headers.get('payment-response')).toBeNull();
        expect(await usdcBalance(buyer.address)).toBe(buyerBefore);
        expect(await usdcBalance(seller.payTo)).toBe(sellerBefore);
        const record = await recordOf(buyer.address);
        expect(record).toMatchObject({ status: 'voided', scheme: 'auth-capture' });
        const [capturable, refundable] = await escrowStateOf(record.id);
        expect([capturable, refundable]).toEqual([0n, 0n]);
      });
    }
  });
});

async function escrowStateOf(paymentId: string): Promise<[bigint, bigint]> {
  const doc = await server.app.payments.records.payments.findById(paymentId).lean();
  const state = await escrowState(testChain().publicClient as never, doc!.escrow!.hash as never);
  return [state.capturable, state.refundable];
}

describe('route tables that cannot sell with auth-capture', () => {
  it('are refused at start-up', () => {
    const options = (route: RouteConfig) => ({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /x': route } });
    expect(() => expressPayments(options({ price: '$1', scheme: 'auth-capture', settle: 'before-handler' }))).toThrow(/captured after the handler/);
    expect(() => expressPayments(options({ price: { upto: '$1' }, scheme: 'auth-capture' }))).toThrow(/has a price, not \{ upto \}/);
    expect(() => expressPayments(options({ price: '$1', scheme: 'auth-capture', refundSeconds: 5 }))).toThrow(/refundSeconds must be/);
  });
});

describe('payment.refunded and payment.voided webhooks (Express)', () => {
  it('are delivered signed like payment.received; a refund carries its own signed receipt', async () => {
    const received: Array<{ raw: string; signature: string | undefined; body: any }> = [];
    const hooks = createServer((req, res) => {
      let raw = '';
      req.on('data', (chunk) => { raw += chunk; });
      req.on('end', () => { received.push({ raw, signature: req.headers['x-service-signature'] as string | undefined, body: JSON.parse(raw) }); res.end('ok'); });
    });
    hooks.listen(0, '127.0.0.1');
    await once(hooks, 'listening');
    const hookUrl = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/hook`;
    const waitFor = async (event: string, paymentId: string) => {
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline) {
        const hit = received.find((h) => h.body.event === event && h.body.paymentId === paymentId);
        if (hit) return hit;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`no ${event} for ${paymentId}`);
    };
    try {
      let next: Outcome = 'ok';
      await withSeller('Express', () => next, async (url, secret) => {
        const buyer = await fundedBuyer('1');
        const paid = await officialFetch(buyer)(`${url}/report`);
        const { paymentId } = await paid.json() as { paymentId: string };
        await server.request('POST', `/v0/payments/${paymentId}/refund`, { key: seller.platformKey, body: { amount: '0.1', reason: 'partial' } });
        const refunded = await waitFor('payment.refunded', paymentId);
        expect(verifyWebhook(refunded.raw, refunded.signature, secret!)).toBe(true);
        expect(refunded.body).toMatchObject({ event: 'payment.refunded', paymentId, amountUsdcRaw: '100000', reason: 'partial', body: { kind: 'refund', refundedUsdcRaw: '100000' } });
        expect(await verifyReceipt(refunded.body, (await server.request('GET', '/.well-known/did.json')).body)).toEqual({ ok: true });

        next = 'fail';
        const other = await fundedBuyer('1');
        expect((await officialFetch(other)(`${url}/report`)).status).toBe(503);
        const voidedId = (await recordOf(other.address)).id;
        const voided = await waitFor('payment.voided', voidedId);
        expect(verifyWebhook(voided.raw, voided.signature, secret!)).toBe(true);
        expect(voided.body).toMatchObject({ event: 'payment.voided', paymentId: voidedId, amountUsdcRaw: String(PRICE), payerAddress: other.address });
      }, hookUrl);
    } finally {
      hooks.closeAllConnections();
      await new Promise((r) => hooks.close(r));
    }
  });
});
