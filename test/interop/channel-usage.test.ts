// A route priced by usage sold through payment channels: our Express middleware with
// `{ price: { upto, unreported }, scheme: 'batch-settlement' }` on the real backend and chain, paid by the
// official client (@x402/fetch with the batch-settlement client scheme). The 402 asks for the maximum; the
// buyer's voucher allows the channel's charged total plus that; the handler reports what it used
// (`payment.charge(...)`) and the call is charged that: the answer says the charged amount and the
// channel's charged total, on which the official client bases its next voucher. The sweep claims exactly
// the charged total; the call records and receipts say what each call was charged.
import { randomBytes } from 'node:crypto';
import express from 'express';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { verifyTypedData, type Hex } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import type { RequestPayment } from '../../middleware/index.js';
import { formatUsdc, verifyReceipt } from 'agentgate-x402-wire';
import { readChannelState, voucherTypedData } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { fundedBuyer, testChain, usdcBalance } from '../support/chain.js';
import { channelVouchers, heldVoucher, vouchersOnceCaptured } from '../support/channel-captures.js';
import { consoleGet, signIn } from '../console/http-client.js';
import { startReceiver } from '../webhooks/receiver.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { serve, setUpSeller, type RunningApp } from './seller.js';
import { officialChannelClient } from '../support/official-channel-client.js';

const MAX = 10_000n; // $0.01, the most one call may cost
const UNREPORTED = 1_000n; // $0.001, charged when the handler reports nothing
/** Shared by the backend processes (the receiver authorizer is sealed under it). */
const MASTER_KEY = randomBytes(32).toString('hex');

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let shop: RunningApp;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
/** Handlers waiting for the test (`?gate=<name>`), by name. */
const gates = new Map<string, () => void>();

beforeAll(async () => {
  // The sweep runs when a test asks for it (one round each), never on its own during a test.
  server = await startTestServer({ MASTER_KEY, CHANNEL_SWEEP_EVERY_MS: '600000' });
  seller = await setUpSeller(server);
  receiver = await startReceiver();
  shop = await openShop(server.url, receiver.url);
}, 60_000);
afterAll(async () => {
  await shop?.close();
  await receiver?.close();
  await server?.close();
});

/** The seller's app (its backend at `backendUrl`), registered (its claims heard at `webhookUrl`). */
async function openShop(backendUrl: string, webhookUrl?: string): Promise<RunningApp> {
  const app = express();
  app.use(expressPayments({ backendUrl, apiKey: seller.sellerKey, routes: { 'GET /complete': { price: { upto: '$0.01', unreported: '$0.001' }, scheme: 'batch-settlement', description: 'A completion, by tokens' } } }));
  app.get('/complete', async (req, res) => {
    const payment = res.locals.payment as RequestPayment;
    if (typeof req.query.gate === 'string') await new Promise<void>((open) => gates.set(req.query.gate as string, open));
    // ?used=<atomic units>: what the call used; absent: nothing reported (charged `unreported`). More than
    // the maximum throws: the handler fails, and nothing is charged.
    try {
      if (typeof req.query.used === 'string') payment.charge({ atomic: BigInt(req.query.used) });
    } catch (error) {
      res.status(500).json({ error: (error as Error).message });
      return;
    }
    res.json({ text: 'done', maxAtomic: String(payment.maxAmountAtomic), scheme: payment.scheme });
  });
  const running = await serve(app);
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${running.url}/complete`, maxPriceUsdc: '0.01', ...(webhookUrl ? { webhookUrl } : {}) } });
  expect(registered.status).toBe(201);
  return running;
}

const channelClient = officialChannelClient;

/** The voucher's signed amount in a PAYMENT-SIGNATURE header. */
const signedMax = (header: string) => BigInt(JSON.parse(Buffer.from(header, 'base64').toString()).payload.voucher.maxClaimableAmount);

let rounds = 0;
async function sweep(options: { idleRefundMs?: number } = {}) {
  return server.app.payments.batchSettlement.sweep.run({ everyMs: 1, idleRefundMs: options.idleRefundMs ?? 24 * 3_600_000, round: `usage-${process.pid}-${Date.now()}-${++rounds}` }, (orgId) => server.app.payments.acceptance.accepting(orgId));
}

describe('a route priced by usage sold through a channel', () => {
  let channelId: Hex;
  let buyer: PrivateKeyAccount;
  /** What each paid call used, in order. */
  const charged = [2_000n, 5_000n, UNREPORTED, 3_500n, 1_500n];

  it('asks for the maximum; each call is charged what its handler reported, and the official client bases its next voucher on the charged total', async () => {
    const unpaid = await fetch(`${shop.url}/complete`);
    expect(unpaid.status).toBe(402);
    expect(decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!).accepts).toEqual([expect.objectContaining({ scheme: 'batch-settlement', amount: String(MAX), payTo: seller.payTo })]);

    buyer = await fundedBuyer('1');
    const { paying, sent } = channelClient(buyer);
    let total = 0n;
    for (const [i, used] of charged.entries()) {
      const query = used === UNREPORTED && i === 2 ? '' : `?used=${used}`;
      const res = await paying(`${shop.url}/complete${query}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ text: 'done', maxAtomic: String(MAX), scheme: 'batch-settlement' });
      const settlement = decodePaymentResponseHeader(res.headers.get('payment-response')!);
      expect(settlement.extra).toMatchObject({ chargedAmount: String(used), channelState: { chargedCumulativeAmount: String(total + used) } });
      channelId ??= (settlement.extra as any).channelState.channelId;
      // One payment per call (no corrective 402 and retry): each voucher was the charged total so far plus the maximum.
      expect(sent).toHaveLength(i + 1);
      expect(signedMax(sent[i]!)).toBe(total + MAX);
      total += used;
    }

    // A handler reporting more than the maximum fails; nothing is charged, and the next call builds on the same total.
    const over = await paying(`${shop.url}/complete?used=${MAX + 1n}`);
    expect([over.status, await over.json()]).toEqual([500, { error: expect.stringContaining('above this route\'s maximum of 10000') }]);
    expect(over.headers.get('payment-response')).toBeNull();
    const after = await paying(`${shop.url}/complete?used=0`);
    expect(after.status).toBe(200);
    expect(decodePaymentResponseHeader(after.headers.get('payment-response')!).extra).toMatchObject({ chargedAmount: '0', channelState: { chargedCumulativeAmount: String(total) } });
    charged.push(0n);

    const vouchers = (await vouchersOnceCaptured(server.app.db, channelId)).map((v) => v.status);
    expect(vouchers).toEqual(charged.map(() => 'captured'));
  });

  it('the call records and their receipts say what each call was charged', async () => {
    const listed = await server.request('GET', `/v0/payments/channels/${channelId}/calls`, { key: seller.sellerKey });
    expect(listed.status).toBe(200);
    const cumulative = charged.map((_, i) => charged.slice(0, i + 1).reduce((a, b) => a + b, 0n));
    expect(listed.body.calls.map((c: any) => [c.amountUsdcRaw, c.cumulativeAmountUsdcRaw, c.maxAmountUsdcRaw, c.status]))
      .toEqual(charged.map((used, i) => [String(used), String(cumulative[i]), String(MAX), 'accepted']).reverse());
    const channel = await server.request('GET', `/v0/payments/channels/${channelId}`, { key: seller.sellerKey });
    expect(channel.body).toMatchObject({ acceptedUsdcRaw: String(cumulative.at(-1)), callCount: charged.length });

    const document = (await server.request('GET', '/.well-known/did.json')).body;
    for (const [i, call] of [...listed.body.calls].reverse().entries()) {
      const record = await server.request('GET', `/v0/payments/${call.id}`, { key: seller.platformKey });
      expect(record.status).toBe(200);
      const receipt = record.body.signedReceipt;
      const signed = (i === 0 ? 0n : cumulative[i - 1]!) + MAX;
      expect(receipt.body).toMatchObject({ paymentId: call.id, amountUsdcRaw: String(charged[i]), cumulativeAmountUsdcRaw: String(cumulative[i]), maxClaimableAmountUsdcRaw: String(signed), payerAddress: buyer.address, recipientAddress: seller.payTo });
      await expect(verifyReceipt(receipt, document)).resolves.toEqual({ ok: true });
      // The voucher the receipt names is the buyer's signature over what it allowed.
      const typed = voucherTypedData(channelId, signed, 84532);
      await expect(verifyTypedData({ address: buyer.address, ...(typed as any), signature: receipt.body.voucherSignature })).resolves.toBe(true);
    }

    // The console's call page says the charge, the maximum and the charged total, and checks the receipt.
    const session = await signIn(server, seller.platformKey);
    const second = listed.body.calls.at(-2);
    const page = await consoleGet(server, `/console/payments/${second.id}`, session.cookie);
    expect(page.status).toBe(200);
    expect(page.text).toContain(`${formatUsdc(charged[1]!)} USDC (${charged[1]} atomic units)`);
    expect(page.text).toContain(`at most ${formatUsdc(MAX)} USDC`);
    expect(page.text).toContain(`${formatUsdc(cumulative[1]!)} USDC: what the channel owes after this call`);
    expect(page.text).toContain('data-receipt-check="valid"');
  });

  it('the sweep claims exactly the charged total on chain, and the seller\'s balance rises by it', async () => {
    const total = charged.reduce((a, b) => a + b, 0n);
    const sellerBefore = await usdcBalance(seller.payTo);
    expect(await sweep()).toMatchObject({ claimed: 1, settled: 1 });
    const state = await readChannelState(testChain().publicClient as never, channelId);
    expect(state.totalClaimed).toBe(total);
    expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + total);
    const listed = await server.request('GET', `/v0/payments/channels/${channelId}/calls`, { key: seller.sellerKey });
    expect(listed.body.calls.map((c: any) => c.status)).toEqual(charged.map(() => 'claimed'));
    expect(await sweep()).toMatchObject({ claimed: 0 });
    // The seller's webhook hears of the claim with each call's charge.
    await receiver.next(1);
    const event = receiver.received[0]!.json;
    expect(event).toMatchObject({ event: 'channel.claimed', amountUsdcRaw: String(total) });
    expect(event.calls.map((c: any) => c.amountUsdcRaw)).toEqual(charged.map(String));
  });

  it('a capture names at most the call\'s maximum: more, or a malformed amount, is a 400 and the call stays held', async () => {
    const { paying } = channelClient(buyer);
    // The client's new storage starts from the chain's claimed total (a corrective 402), then the call is held at the gate.
    const answering = paying(`${shop.url}/complete?gate=capture&used=4000`);
    // Held at the gate: by then its voucher is the channel's newest.
    while (!gates.has('capture')) await new Promise((r) => setTimeout(r, 20));
    const held = await heldVoucher(server.app.db, channelId);
    const capture = (body: unknown) => server.request('POST', `/v0/payments/channels/vouchers/${held._id}:${held.holdToken}/capture`, { key: seller.sellerKey, body });
    const over = await capture({ amount: '0.010001' });
    expect([over.status, over.body.error]).toEqual([400, 'settlement_exceeds_amount']);
    const malformed = await capture({ amount: 'lots' });
    expect([malformed.status, malformed.body.error]).toEqual([400, 'validation_error']);
    const extra = await capture({ amount: '0.001', also: 1 });
    expect(extra.status).toBe(400);
    expect((await channelVouchers(server.app.db, channelId)).find((v) => v._id === held._id)?.status).toBe('held');

    gates.get('capture')!();
    const res = await answering;
    expect(res.status).toBe(200);
    const total = charged.reduce((a, b) => a + b, 0n);
    expect(decodePaymentResponseHeader(res.headers.get('payment-response')!).extra).toMatchObject({ chargedAmount: '4000', channelState: { chargedCumulativeAmount: String(total + 4_000n) } });
    const record = (await vouchersOnceCaptured(server.app.db, channelId)).find((v) => v._id === held._id);
    expect(record).toMatchObject({ status: 'captured', amount: '4000', charged: String(total + 4_000n), cumulative: String(total + MAX) });
  });

  it('through two backend processes in turn, each call builds on the charged total the other wrote; a capture sent to the process that did not accept the call charges the same', async () => {
    const second = await startTestServer({ MONGODB_DB: server.config.MONGODB_DB, MASTER_KEY, CHANNEL_SWEEP_EVERY_MS: '600000' });
    const other = await openShop(second.url);
    await sweep(); // what the earlier tests left unclaimed
    try {
      const payer = await fundedBuyer('1');
      const { paying, sent } = channelClient(payer);
      const used = [3_000n, 7_000n, 0n, 9_000n, 250n, 10_000n];
      let total = 0n;
      let id: Hex | undefined;
      for (const [i, amount] of used.entries()) {
        // No wait between calls: a call may come in before the other process's capture is written.
        const res = await paying(`${(i % 2 === 0 ? shop : other).url}/complete?used=${amount}`);
        expect(res.status).toBe(200);
        const extra = decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as any;
        expect(extra).toMatchObject({ chargedAmount: String(amount), channelState: { chargedCumulativeAmount: String(total + amount) } });
        id ??= extra.channelState.channelId;
        expect(signedMax(sent.at(-1)!)).toBe(total + MAX);
        total += amount;
      }
      expect(sent).toHaveLength(used.length);

      // A call held on the first process, captured through the second (which reads the hold from the database).
      const answering = paying(`${shop.url}/complete?gate=elsewhere&used=4000`);
      // Held at the gate: by then its voucher is the channel's newest.
      while (!gates.has('elsewhere')) await new Promise((r) => setTimeout(r, 20));
      const held = await heldVoucher(server.app.db, id!);
      const captured = await second.request('POST', `/v0/payments/channels/vouchers/${held._id}:${held.holdToken}/capture`, { key: seller.sellerKey, body: { amount: '0.004' } });
      expect(captured.status).toBe(200);
      expect(captured.body.paymentResponse.extra).toMatchObject({ chargedAmount: '4000', channelState: { chargedCumulativeAmount: String(total + 4_000n) } });
      gates.get('elsewhere')!();
      expect((await answering).status).toBe(200);
      total += 4_000n;
      const landed = await vouchersOnceCaptured(server.app.db, id!);
      expect(landed).toHaveLength(used.length + 1);
      const record = landed.find((v) => v._id === held._id);
      expect(record).toMatchObject({ status: 'captured', amount: '4000', charged: String(total), signedReceipt: { body: { amountUsdcRaw: '4000', cumulativeAmountUsdcRaw: String(total) } } });

      expect(await sweep()).toMatchObject({ claimed: 1 });
      expect((await readChannelState(testChain().publicClient as never, id!)).totalClaimed).toBe(total);
    } finally {
      await other.close();
      await second.stop();
    }
  });

  it('an idle channel is claimed for what its calls were charged and the rest refunded to the payer', async () => {
    const payer = await fundedBuyer('1');
    const before = await usdcBalance(payer.address);
    const { paying } = channelClient(payer);
    let id: Hex | undefined;
    for (const used of [2_500n, 0n]) {
      const res = await paying(`${shop.url}/complete?used=${used}`);
      expect(res.status).toBe(200);
      id ??= (decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as any).channelState.channelId;
    }
    await vouchersOnceCaptured(server.app.db, id!);
    expect((await sweep({ idleRefundMs: 0 }))!.refunded).toBeGreaterThanOrEqual(1);
    expect(await readChannelState(testChain().publicClient as never, id!)).toMatchObject({ balance: 2_500n, totalClaimed: 2_500n, refundNonce: 1n });
    expect(await usdcBalance(payer.address)).toBe(before - 2_500n);
  });
});
