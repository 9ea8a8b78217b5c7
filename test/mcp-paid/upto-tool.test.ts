// An MCP tool sold by usage: priced { upto: '$0.50' }, it reports what the call used through
// `extra.x402.charge(...)`, and exactly that is settled after it (the official @x402/evm upto client signs
// the permit). Nothing reported costs nothing; a failed tool costs nothing.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { z } from 'zod';
import type { PrivateKeyAccount } from 'viem/accounts';
import { mcpPaywall, type ToolUsage } from '../../adapters/mcp.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { setUpSeller } from '../support/payments.js';
import { serveMcp, type ServedMcp } from './support.js';
import { usdcBalance, permit2ApprovedBuyer } from '../support/chain.js';

let server: TestServer;
let mcp: ServedMcp;
/** What the tool does next: report its tokens, report nothing, or fail. */
let next: 'tokens' | 'nothing' | 'fail' = 'tokens';

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  const seller = await setUpSeller(server, { resource: 'mcp://tool/complete', maxPriceUsdc: '0.50' });
  const paid = mcpPaywall({ backendUrl: server.url, apiKey: seller.sellerKey });
  mcp = await serveMcp(() => {
    const tools = new McpServer({ name: 'llm', version: '1.0.0' });
    paid.tool(tools, 'complete', { price: { upto: '$0.50' }, inputSchema: { prompt: z.string() } }, async ({ prompt }, extra) => {
      const tokens = prompt.split(' ').length * 100;
      if (next === 'fail') return { isError: true, content: [{ type: 'text' as const, text: 'model overloaded' }] };
      if (next === 'tokens') (extra as unknown as { x402: ToolUsage }).x402.charge({ atomic: BigInt(tokens) * 100n });
      return { content: [{ type: 'text' as const, text: `completion of ${tokens} tokens` }] };
    });
    return tools;
  });
});
afterAll(async () => {
  await mcp?.close();
  await server?.close();
});

const call = (meta?: Record<string, unknown>) =>
  mcp.client.callTool({ name: 'complete', arguments: { prompt: 'two words' }, ...(meta ? { _meta: meta } : {}) }) as Promise<any>;

/** The official upto client's payload for the tool's payment-required answer. */
async function uptoPayment(buyer: PrivateKeyAccount) {
  const required = (await call()).structuredContent;
  const accepted = required.accepts[0];
  expect(accepted).toMatchObject({ scheme: 'upto', amount: '500000', extra: { facilitatorAddress: expect.stringMatching(/^0x/) } });
  const result = await new UptoEvmScheme(buyer).createPaymentPayload(2, accepted);
  return { x402Version: 2, resource: { url: 'mcp://tool/complete' }, accepted, payload: result.payload };
}

it('charges what the tool reported (200 tokens at $0.0001: $0.02), and the settlement says so', async () => {
  const buyer = await permit2ApprovedBuyer();
  const before = await usdcBalance(buyer.address);
  next = 'tokens';
  const result = await call({ 'x402/payment': await uptoPayment(buyer) });
  expect(result.isError).toBeFalsy();
  expect(result.content[0].text).toBe('completion of 200 tokens');
  expect(result._meta['x402/payment-response']).toMatchObject({ success: true, payer: buyer.address, amount: '20000' });
  expect(await usdcBalance(buyer.address)).toBe(before - 20_000n);
});

it('nothing reported is charged nothing; a failed tool is not charged', async () => {
  const buyer = await permit2ApprovedBuyer();
  const before = await usdcBalance(buyer.address);
  next = 'fail';
  const failed = await call({ 'x402/payment': await uptoPayment(buyer) });
  expect(failed.isError).toBe(true);
  next = 'nothing';
  const free = await call({ 'x402/payment': await uptoPayment(buyer) });
  expect(free._meta['x402/payment-response']).toMatchObject({ success: true, transaction: '', amount: '0' });
  expect(await usdcBalance(buyer.address)).toBe(before);
});
