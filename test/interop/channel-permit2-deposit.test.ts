// A channel route that asks for Permit2 deposits (`assetTransferMethod: 'permit2'` on a batch-settlement
// route), paid by the official client (@x402/fetch with @x402/evm's batch-settlement client scheme): its
// 402 says `extra.assetTransferMethod: "permit2"`, the buyer (who approved Permit2 once, as a wallet does)
// deposits through the Permit2 deposit collector with its first voucher, and later calls are vouchers only.
import express from 'express';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { parseEventLogs, type Hex } from 'viem';
import { paymentMiddleware } from '../../adapters/express.js';
import { BATCH_SETTLEMENT_ADDRESS, batchSettlementAbi, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, readChannelState } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { permit2NonceUsed } from '../../server/chain/permit2.js';
import { permit2ApprovedBuyer, testChain, usdcBalance } from '../support/chain.js';
import { officialChannelClient } from '../support/official-channel-client.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { serve, setUpSeller, type RunningApp } from './seller.js';

const PRICE = 1_000n; // $0.001 a call

let server: TestServer;
let shop: RunningApp;
beforeAll(async () => {
  server = await startTestServer({ CHANNEL_SWEEP_EVERY_MS: '600000' });
  const seller = await setUpSeller(server);
  const app = express();
  app.use(paymentMiddleware({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /weather': { price: '$0.001', scheme: 'batch-settlement', assetTransferMethod: 'permit2', description: 'Weather, per call' } } }));
  app.get('/weather', (_req, res) => { res.json({ weather: 'sunny' }); });
  shop = await serve(app);
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${shop.url}/weather`, priceUsdc: '0.001' } });
  expect(registered.status).toBe(201);
}, 60_000);
afterAll(async () => {
  await shop?.close();
  await server?.close();
});

it('the official client deposits through the Permit2 collector, then pays with vouchers only', async () => {
  const unpaid = await fetch(`${shop.url}/weather`);
  expect(unpaid.status).toBe(402);
  const offer = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!).accepts[0]!;
  expect(offer).toMatchObject({ scheme: 'batch-settlement', extra: { assetTransferMethod: 'permit2' } });

  const buyer = await permit2ApprovedBuyer('1');
  const before = await usdcBalance(buyer.address);
  const { paying, sent } = officialChannelClient(buyer);
  for (let i = 0; i < 3; i++) {
    const res = await paying(`${shop.url}/weather`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ weather: 'sunny' });
  }
  const payloads = sent.map((h) => JSON.parse(Buffer.from(h, 'base64').toString()).payload);
  expect(payloads.map((p) => p.type)).toEqual(['deposit', 'voucher', 'voucher']);
  expect(payloads[0].deposit.authorization.permit2Authorization).toMatchObject({ from: buyer.address, spender: PERMIT2_DEPOSIT_COLLECTOR_ADDRESS });
  const channelId = payloads[0].voucher.channelId as Hex;

  // One deposit on chain, of ten calls, by the Permit2 collector; the buyer paid nothing per call.
  const deposited = await testChain().publicClient.getContractEvents({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, eventName: 'Deposited', args: { channelId }, fromBlock: 0n });
  expect(deposited).toHaveLength(1);
  const receipt = await testChain().publicClient.getTransactionReceipt({ hash: deposited[0]!.transactionHash });
  expect(parseEventLogs({ abi: batchSettlementAbi, logs: receipt.logs, eventName: 'Deposited' })[0]!.args).toMatchObject({ channelId, amount: 10n * PRICE });
  // The money moved by that permit: its Permit2 nonce is spent.
  expect(await permit2NonceUsed(testChain().publicClient as never, buyer.address, BigInt(payloads[0].deposit.authorization.permit2Authorization.nonce))).toBe(true);
  expect(await usdcBalance(buyer.address)).toBe(before - 10n * PRICE);
  expect(await readChannelState(testChain().publicClient as never, channelId)).toMatchObject({ balance: 10n * PRICE, totalClaimed: 0n });
});
