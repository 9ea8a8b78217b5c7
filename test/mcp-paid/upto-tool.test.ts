// An MCP tool sold by usage: priced { upto: '$0.50' }, it reports what the call used through
// `extra.x402.charge(...)`, and exactly that is settled after it (the official @x402/evm upto client signs
// the permit). Nothing reported costs nothing; a failed tool costs nothing.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import express from 'express';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { createWalletClient, http as rpcTransport, maxUint256, parseEther, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { mcpPaywall, type ToolUsage } from '../../adapters/mcp.js';
import { erc20AllowanceAbi, PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { fundedBuyer, setEthBalance, testChain, usdcBalance } from '../support/chain.js';

let server: TestServer;
let http: Server;
let client: Client;
let payTo: Address;
/** What the tool does next: report its tokens, report nothing, or fail. */
let next: 'tokens' | 'nothing' | 'fail' = 'tokens';

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  const agent = await signUp(server);
  payTo = privateKeyToAccount(generatePrivateKey()).address;
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const sellerKey = (await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} })).body.apiKey;
  expect((await server.request('POST', '/v0/payments/endpoints', { key: agent.platform_key, body: { url: 'mcp://tool/complete', maxPriceUsdc: '0.50' } })).status).toBe(201);
  const paid = mcpPaywall({ backendUrl: server.url, apiKey: sellerKey });
  const app = express();
  app.use(express.json());
  app.post('/mcp', async (req, res) => {
    const mcp = new McpServer({ name: 'llm', version: '1.0.0' });
    paid.tool(mcp, 'complete', { price: { upto: '$0.50' }, inputSchema: { prompt: z.string() } }, async ({ prompt }, extra) => {
      const tokens = prompt.split(' ').length * 100;
      if (next === 'fail') return { isError: true, content: [{ type: 'text' as const, text: 'model overloaded' }] };
      if (next === 'tokens') (extra as unknown as { x402: ToolUsage }).x402.charge({ atomic: BigInt(tokens) * 100n });
      return { content: [{ type: 'text' as const, text: `completion of ${tokens} tokens` }] };
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

const call = (meta?: Record<string, unknown>) =>
  client.callTool({ name: 'complete', arguments: { prompt: 'two words' }, ...(meta ? { _meta: meta } : {}) }) as Promise<any>;

async function approvedBuyer(): Promise<PrivateKeyAccount> {
  const buyer = await fundedBuyer('1');
  await setEthBalance(buyer.address, parseEther('1'));
  const { chain, rpcUrl, usdc, publicClient } = testChain();
  const hash = await createWalletClient({ chain, transport: rpcTransport(rpcUrl), account: buyer }).writeContract({ address: usdc, abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
  await publicClient.waitForTransactionReceipt({ hash });
  return buyer;
}

/** The official upto client's payload for the tool's payment-required answer. */
async function uptoPayment(buyer: PrivateKeyAccount) {
  const required = (await call()).structuredContent;
  const accepted = required.accepts[0];
  expect(accepted).toMatchObject({ scheme: 'upto', amount: '500000', extra: { facilitatorAddress: expect.stringMatching(/^0x/) } });
  const result = await new UptoEvmScheme(buyer).createPaymentPayload(2, accepted);
  return { x402Version: 2, resource: { url: 'mcp://tool/complete' }, accepted, payload: result.payload };
}

it('charges what the tool reported (200 tokens at $0.0001: $0.02), and the settlement says so', async () => {
  const buyer = await approvedBuyer();
  const before = await usdcBalance(buyer.address);
  next = 'tokens';
  const result = await call({ 'x402/payment': await uptoPayment(buyer) });
  expect(result.isError).toBeFalsy();
  expect(result.content[0].text).toBe('completion of 200 tokens');
  expect(result._meta['x402/payment-response']).toMatchObject({ success: true, payer: buyer.address, amount: '20000' });
  expect(await usdcBalance(buyer.address)).toBe(before - 20_000n);
});

it('nothing reported is charged nothing; a failed tool is not charged', async () => {
  const buyer = await approvedBuyer();
  const before = await usdcBalance(buyer.address);
  next = 'fail';
  const failed = await call({ 'x402/payment': await uptoPayment(buyer) });
  expect(failed.isError).toBe(true);
  next = 'nothing';
  const free = await call({ 'x402/payment': await uptoPayment(buyer) });
  expect(free._meta['x402/payment-response']).toMatchObject({ success: true, transaction: '', amount: '0' });
  expect(await usdcBalance(buyer.address)).toBe(before);
});
