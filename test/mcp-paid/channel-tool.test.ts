// An MCP tool sold through a payment channel (`scheme: 'batch-settlement'`): the official @x402/evm
// batch-settlement client signs the deposit with the first call and a voucher per call after it; the
// backend accepts each voucher once, before the tool runs, and its sweep claims the calls.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { BatchSettlementEvmScheme, InMemoryClientChannelStorage, updateChannelFromSettle } from '@x402/evm/batch-settlement/client';
import { toClientEvmSigner } from '@x402/evm';
import express from 'express';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { mcpPaywall, type ToolUsage } from '../../adapters/mcp.js';
import { readChannelState } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { fundedBuyer, testChain, usdcBalance } from '../support/chain.js';
import { vouchersOnceCaptured } from '../support/channel-captures.js';

let server: TestServer;
let http: Server;
let client: Client;
let payTo: Address;
let runs = 0;

beforeAll(async () => {
  server = await startTestServer({ CHANNEL_SWEEP_EVERY_MS: '600000' });
  const agent = await signUp(server);
  payTo = privateKeyToAccount(generatePrivateKey()).address;
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const sellerKey = (await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} })).body.apiKey;
  expect((await server.request('POST', '/v0/payments/endpoints', { key: agent.platform_key, body: { url: 'mcp://tool/forecast', priceUsdc: '0.001' } })).status).toBe(201);
  expect((await server.request('POST', '/v0/payments/endpoints', { key: agent.platform_key, body: { url: 'mcp://tool/complete', maxPriceUsdc: '0.01' } })).status).toBe(201);
  const paid = mcpPaywall({ backendUrl: server.url, apiKey: sellerKey });
  const app = express();
  app.use(express.json());
  app.post('/mcp', async (req, res) => {
    const mcp = new McpServer({ name: 'weather', version: '1.0.0' });
    paid.tool(mcp, 'forecast', { price: '$0.001', scheme: 'batch-settlement', settle: 'before-handler', inputSchema: { city: z.string() } }, async ({ city }) => {
      runs++;
      return { content: [{ type: 'text' as const, text: `sunny in ${city}` }] };
    });
    // Priced by usage: the tool reports the tokens it used (100 atomic units each), at most $0.01.
    paid.tool(mcp, 'complete', { price: { upto: '$0.01' }, scheme: 'batch-settlement', inputSchema: { tokens: z.number() } }, async ({ tokens }, extra) => {
      (extra as unknown as { x402: ToolUsage }).x402.charge({ atomic: BigInt(tokens) * 100n });
      return { content: [{ type: 'text' as const, text: `${tokens} tokens` }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { void transport.close(); void mcp.close(); });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  http = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
  client = new Client({ name: 'buyer', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`)));
});
afterAll(async () => {
  await client?.close();
  http?.closeAllConnections();
  await new Promise<void>((resolve) => (http ? http.close(() => resolve()) : resolve()));
  await server?.close();
});

const call = (meta?: Record<string, unknown>) => client.callTool({ name: 'forecast', arguments: { city: 'Oslo' }, ...(meta ? { _meta: meta } : {}) }) as Promise<any>;

it('the official client deposits with the first call and pays the next ones with vouchers; a replayed voucher is refused with where the channel stands; the sweep claims the calls', async () => {
  const unpaid = await call();
  expect(unpaid.isError).toBe(true);
  const accepted = unpaid.structuredContent.accepts[0];
  expect(accepted).toMatchObject({ scheme: 'batch-settlement', amount: '1000', payTo, extra: { receiverAuthorizer: expect.stringMatching(/^0x/), withdrawDelay: 900 } });

  const buyer = await fundedBuyer('1');
  const before = await usdcBalance(buyer.address);
  const storage = new InMemoryClientChannelStorage();
  const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(buyer, testChain().publicClient as never), { depositPolicy: { depositMultiplier: 10 }, storage });
  let channelId: Hex | undefined;
  let last: Record<string, unknown> | undefined;
  for (let i = 1; i <= 3; i++) {
    const signed = await scheme.createPaymentPayload(2, accepted);
    last = { x402Version: 2, resource: { url: 'mcp://tool/forecast' }, accepted, payload: signed.payload };
    const result = await call({ 'x402/payment': last });
    expect(result.isError).toBeFalsy();
    expect(result.content[0].text).toBe('sunny in Oslo');
    const response = result._meta['x402/payment-response'];
    expect(response).toMatchObject({ success: true, extra: { chargedAmount: '1000', channelState: { chargedCumulativeAmount: String(i * 1000) } } });
    channelId ??= response.extra.channelState.channelId;
    // What the official client's HTTP hooks do with PAYMENT-RESPONSE, done with its own function here.
    const payload = signed.payload as { type: string; deposit?: { amount: string } };
    await updateChannelFromSettle(storage, {
      server: { chargedAmount: response.extra.chargedAmount, chargedCumulativeAmount: response.extra.channelState.chargedCumulativeAmount },
      local: { channelId: channelId!, requestAmount: accepted.amount, ...(payload.type === 'deposit' ? { depositAmount: payload.deposit!.amount } : {}) },
    });
  }
  expect(runs).toBe(3);
  expect(await usdcBalance(buyer.address)).toBe(before - 10_000n);

  const replay = await call({ 'x402/payment': last });
  expect(replay.isError).toBe(true);
  expect(replay.structuredContent).toMatchObject({ error: 'invalid_batch_settlement_evm_cumulative_amount_mismatch', accepts: [{ extra: { channelState: { chargedCumulativeAmount: '3000' } } }] });
  expect(runs).toBe(3);

  await vouchersOnceCaptured(server.app.db, channelId!);
  await server.app.payments.batchSettlement.sweep.run({ everyMs: 1, idleRefundMs: 24 * 3_600_000, round: `mcp-${Date.now()}` }, (orgId) => server.app.payments.acceptance.accepting(orgId));
  expect(await readChannelState(testChain().publicClient as never, channelId!)).toMatchObject({ totalClaimed: 3000n, balance: 10_000n });
  expect(await usdcBalance(payTo)).toBe(3000n);
});

it('a tool priced by usage: each call is charged what the tool reported, the client bases its next voucher on the charged total, and the sweep claims that total', async () => {
  const complete = (tokens: number, meta?: Record<string, unknown>) => client.callTool({ name: 'complete', arguments: { tokens }, ...(meta ? { _meta: meta } : {}) }) as Promise<any>;
  const accepted = (await complete(0)).structuredContent.accepts[0];
  expect(accepted).toMatchObject({ scheme: 'batch-settlement', amount: '10000', payTo });

  const buyer = await fundedBuyer('1');
  const storage = new InMemoryClientChannelStorage();
  const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(buyer, testChain().publicClient as never), { depositPolicy: { depositMultiplier: 10 }, storage });
  let channelId: Hex | undefined;
  let total = 0n;
  for (const tokens of [20, 55, 0]) {
    const signed = await scheme.createPaymentPayload(2, accepted);
    const payload = signed.payload as { type: string; deposit?: { amount: string }; voucher: { maxClaimableAmount: string } };
    // The voucher allows the charged total so far plus the maximum.
    expect(BigInt(payload.voucher.maxClaimableAmount)).toBe(total + 10_000n);
    const result = await complete(tokens, { 'x402/payment': { x402Version: 2, resource: { url: 'mcp://tool/complete' }, accepted, payload } });
    expect(result.isError).toBeFalsy();
    const charged = BigInt(tokens) * 100n;
    const response = result._meta['x402/payment-response'];
    expect(response).toMatchObject({ success: true, extra: { chargedAmount: String(charged), channelState: { chargedCumulativeAmount: String(total + charged) } } });
    channelId ??= response.extra.channelState.channelId;
    await updateChannelFromSettle(storage, {
      server: { chargedAmount: response.extra.chargedAmount, chargedCumulativeAmount: response.extra.channelState.chargedCumulativeAmount },
      local: { channelId: channelId!, requestAmount: accepted.amount, ...(payload.type === 'deposit' ? { depositAmount: payload.deposit!.amount } : {}) },
    });
    total += charged;
  }
  await vouchersOnceCaptured(server.app.db, channelId!);
  await server.app.payments.batchSettlement.sweep.run({ everyMs: 1, idleRefundMs: 24 * 3_600_000, round: `mcp-usage-${Date.now()}` }, (orgId) => server.app.payments.acceptance.accepting(orgId));
  expect((await readChannelState(testChain().publicClient as never, channelId!)).totalClaimed).toBe(total);
});
