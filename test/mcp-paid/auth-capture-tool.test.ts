// An MCP tool offering auth-capture: the official @x402/evm auth-capture client signs from the tool's
// payment-required answer; the payment is authorized into escrow while the tool runs, captured when the
// tool succeeds, voided when it fails (the buyer whole).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import { z } from 'zod';
import type { Address } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { mcpPaywall } from '../../adapters/mcp.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { setUpSeller } from '../support/payments.js';
import { serveMcp, type ServedMcp } from './support.js';
import { fundedBuyer, usdcBalance } from '../support/chain.js';

let server: TestServer;
let mcp: ServedMcp;
let payTo: Address;
let fail = false;

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  const seller = await setUpSeller(server, { resource: 'mcp://tool/summarize', priceUsdc: '0.05' });
  payTo = seller.payTo;
  const paid = mcpPaywall({ backendUrl: server.url, apiKey: seller.sellerKey });
  mcp = await serveMcp(() => {
    const tools = new McpServer({ name: 'docs', version: '1.0.0' });
    paid.tool(tools, 'summarize', { price: '$0.05', scheme: 'auth-capture', inputSchema: { text: z.string() } }, async ({ text }) => (
      fail ? { isError: true, content: [{ type: 'text' as const, text: 'model overloaded' }] } : { content: [{ type: 'text' as const, text: `summary of ${text.length} characters` }] }
    ));
    return tools;
  });
});
afterAll(async () => {
  await mcp?.close();
  await server?.close();
});

const call = (meta?: Record<string, unknown>) =>
  mcp.client.callTool({ name: 'summarize', arguments: { text: 'a long text' }, ...(meta ? { _meta: meta } : {}) }) as Promise<any>;

async function payment(buyer: PrivateKeyAccount) {
  const required = (await call()).structuredContent;
  const accepted = required.accepts[0];
  expect(accepted).toMatchObject({ scheme: 'auth-capture', amount: '50000', payTo, extra: { captureAuthorizer: expect.stringMatching(/^0x/), minFeeBps: 0 } });
  const result = await new AuthCaptureEvmScheme(buyer).createPaymentPayload(2, accepted);
  return { x402Version: 2, resource: { url: 'mcp://tool/summarize' }, accepted, payload: result.payload };
}

it('a tool that succeeds is captured: the seller is paid once', async () => {
  fail = false;
  const buyer = await fundedBuyer('1');
  const [buyerBefore, sellerBefore] = [await usdcBalance(buyer.address), await usdcBalance(payTo)];
  const result = await call({ 'x402/payment': await payment(buyer) });
  expect(result.isError ?? false).toBe(false);
  expect(result._meta['x402/payment-response']).toMatchObject({ success: true, payer: buyer.address });
  expect(await usdcBalance(buyer.address)).toBe(buyerBefore - 50_000n);
  expect(await usdcBalance(payTo)).toBe(sellerBefore + 50_000n);
});

it('a tool that fails is voided: the buyer is whole', async () => {
  fail = true;
  const buyer = await fundedBuyer('1');
  const before = await usdcBalance(buyer.address);
  const result = await call({ 'x402/payment': await payment(buyer) });
  expect(result.isError).toBe(true);
  expect(await usdcBalance(buyer.address)).toBe(before);
  const voided = await server.app.payments.records.payments.findOne({ payerAddress: buyer.address }).lean();
  expect(voided).toMatchObject({ scheme: 'auth-capture', status: 'voided' });
});
