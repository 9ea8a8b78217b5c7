// The official x402 Python SDK (PyPI `x402`, test/support/python-sdk.ts) pays a route of ours sold by
// `batch-settlement`: a buyer script (test/interop/python/buyer.py) on the SDK's `requests`
// integration with its batch-settlement client scheme deposits with its first call, then pays each call
// with a voucher, against our Express middleware on the real backend and chain. The channel and its
// vouchers are in the backend; the sweep claims them; the same voucher sent again is refused with its
// reason. The SDK's `exact` client pays another route of the same seller once.
import { randomBytes } from 'node:crypto';
import express from 'express';
import { parseUnits, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { readChannelState } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { sendUsdc, testChain, usdcBalance } from '../support/chain.js';
import { runPythonBuyer, x402Python } from '../support/python-sdk.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { serve, setUpSeller, type RunningApp } from './seller.js';
import { vouchersOnceCaptured } from '../support/channel-captures.js';

/** The dev chain's network as the 402 names it (the dev chain answers as Base Sepolia, chain id 84532). */
const NETWORK = 'eip155:84532';
const PRICE = 1_000n; // $0.001 a call
const CALLS = 4;

let python: string;
let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let shop: RunningApp;
beforeAll(async () => {
  // Installed by `.ci/run` before the tests; once here on a machine that skipped it.
  python = x402Python((line) => process.stderr.write(`[python-sdk] ${line}\n`));
  // The sweep runs when the test asks for it, never on its own during the test.
  server = await startTestServer({ MASTER_KEY: randomBytes(32).toString('hex'), CHANNEL_SWEEP_EVERY_MS: '600000' });
  seller = await setUpSeller(server);
  const app = express();
  app.use(expressPayments({ backendUrl: server.url, apiKey: seller.sellerKey, routes: {
    'GET /weather': { price: '$0.001', scheme: 'batch-settlement', description: 'Weather, per call' },
    'GET /forecast': { price: '$0.001', description: 'Forecast, paid by exact' },
  } }));
  app.get('/weather', (_req, res) => { res.json({ weather: 'sunny' }); });
  app.get('/forecast', (_req, res) => { res.json({ forecast: 'rain' }); });
  shop = await serve(app);
  for (const path of ['/weather', '/forecast']) {
    const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${shop.url}${path}`, priceUsdc: '0.001' } });
    expect(registered.status).toBe(201);
  }
}, 300_000);
afterAll(async () => {
  await shop?.close();
  await server?.close();
});

const runBuyer = (env: Record<string, string>) => runPythonBuyer(python, env);

/** A buyer key holding $1 of test USDC, and the environment the buyer script needs besides its routes. */
async function pythonBuyer() {
  const key = generatePrivateKey();
  const buyer = privateKeyToAccount(key);
  await sendUsdc(buyer.address, parseUnits('1', 6));
  return { buyer, env: { BUYER_PRIVATE_KEY: key, RPC_URL: testChain().rpcUrl, NETWORK, ASSET: testChain().usdc } };
}

describe('the x402 Python SDK pays our routes', () => {
  it('batch-settlement: a deposit with the first call, a voucher with each next; the seller sees the channel and its vouchers, the sweep claims them; a replayed voucher gets a 402 with its reason', async () => {
    const { buyer, env } = await pythonBuyer();
    const payToBefore = await usdcBalance(seller.payTo);
    const run = await runBuyer({ ...env, ROUTE_URL: `${shop.url}/weather`, CALLS: String(CALLS) });
    expect(run.buyer).toBe(buyer.address);

    // Each call answered with the paid content: a deposit (a transaction) with the first, a voucher (nothing sent) after.
    expect(run.calls.map((c) => [c.status, c.body, c.paymentType])).toEqual([
      [200, { weather: 'sunny' }, 'deposit'],
      ...Array.from({ length: CALLS - 1 }, () => [200, { weather: 'sunny' }, 'voucher']),
    ]);
    run.calls.forEach((call, i) => {
      expect(call.settlement).toMatchObject({ success: true, network: NETWORK, extra: { chargedAmount: '1000', channelState: { chargedCumulativeAmount: String(BigInt(i + 1) * PRICE) } } });
      if (i === 0) expect(call.settlement!.transaction).toMatch(/^0x[0-9a-f]{64}$/);
      else expect(call.settlement!.transaction).toBe('');
    });
    const channelId = run.calls[0]!.settlement!.extra.channelState.channelId as Hex;
    // The SDK's deposit: ten calls' worth (its deposit multiplier), taken once.
    expect(await usdcBalance(buyer.address)).toBe(parseUnits('1', 6) - 10n * PRICE);

    await vouchersOnceCaptured(server.app.db, channelId);
    // The last voucher sent again (after the four calls): refused with the reason the official clients resync from.
    expect(run.replay).toEqual({ status: 402, error: 'invalid_batch_settlement_evm_cumulative_amount_mismatch' });

    // The seller's view, read after the replay: the channel, and one voucher per call by cumulative amount.
    const channels = await server.request('GET', '/v0/payments/channels', { key: seller.sellerKey });
    expect(channels.body.channels).toEqual([expect.objectContaining({
      id: channelId, payerAddress: buyer.address, recipientAddress: seller.payTo, state: 'open', callCount: CALLS,
      depositedUsdcRaw: String(10n * PRICE), acceptedUsdcRaw: String(BigInt(CALLS) * PRICE), claimedUsdcRaw: '0',
    })]);
    const calls = await server.request('GET', `/v0/payments/channels/${channelId}/calls`, { key: seller.sellerKey });
    expect(calls.body.calls.map((c: any) => [c.cumulativeAmountUsdcRaw, c.amountUsdcRaw, c.status])).toEqual(
      ['4000', '3000', '2000', '1000'].map((cumulative) => [cumulative, '1000', 'accepted']),
    );

    // The sweep claims the calls on chain: the seller is paid what the vouchers allow.
    const totals = await server.app.payments.batchSettlement.sweep.run(
      { everyMs: 1, idleRefundMs: 24 * 3_600_000, round: `python-${process.pid}-${Date.now()}` },
      (orgId) => server.app.payments.acceptance.accepting(orgId),
    );
    expect(totals).toMatchObject({ claimed: 1, settled: 1 });
    expect(await readChannelState(testChain().publicClient as never, channelId)).toMatchObject({ balance: 10n * PRICE, totalClaimed: BigInt(CALLS) * PRICE });
    expect(await usdcBalance(seller.payTo)).toBe(payToBefore + BigInt(CALLS) * PRICE);
  });

  it('exact: one call, answered with the content once its transfer to the seller is on chain', async () => {
    const { buyer, env } = await pythonBuyer();
    const payToBefore = await usdcBalance(seller.payTo);
    const run = await runBuyer({ ...env, EXACT_URL: `${shop.url}/forecast` });
    expect(run.exact).toMatchObject({ status: 200, body: { forecast: 'rain' }, paymentType: 'authorization', settlement: { success: true, network: NETWORK, payer: buyer.address } });
    const transfer = await testChain().publicClient.getTransactionReceipt({ hash: run.exact!.settlement!.transaction as Hex });
    expect(transfer.status).toBe('success');
    expect(await usdcBalance(buyer.address)).toBe(parseUnits('1', 6) - PRICE);
    expect(await usdcBalance(seller.payTo)).toBe(payToBefore + PRICE);
  });
});
