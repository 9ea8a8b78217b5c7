// An MCP tool sold by `exact` through Permit2 (assetTransferMethod 'permit2'), paid with payloads the
// official @x402/evm exact client makes from the tool's payment-required answer: a buyer that approved
// Permit2 signs the witness transfer; a buyer with no gas and no allowance signs its USDC permit too (the
// answer declares the gas sponsoring extensions) and the backend sends it with the settlement. A failed
// tool costs nothing; the same payment presented again moves nothing more.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { x402Client } from '@x402/core/client';
import { toClientEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { type Address } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { mcpPaywall } from '../../adapters/mcp.js';
import { permit2Allowance } from '../../server/chain/permit2.js';
import { EXACT_PROXY_ADDRESS } from '../../server/payments/schemes/exact/evm/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { setUpSeller, type TestSeller } from '../support/payments.js';
import { serveMcp, type ServedMcp } from './support.js';
import { fundedBuyer, testChain, usdcBalance, permit2ApprovedBuyer } from '../support/chain.js';

const NETWORK = 'eip155:84532';
const PRICE = 10_000n; // $0.01

let server: TestServer;
let seller: TestSeller;
let mcp: ServedMcp;
/** Whether the tool fails on its next call. */
let failing = false;

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  seller = await setUpSeller(server, { resource: 'mcp://tool/report' });
  const paid = mcpPaywall({ backendUrl: server.url, apiKey: seller.sellerKey });
  mcp = await serveMcp(() => {
    const tools = new McpServer({ name: 'reports', version: '1.0.0' });
    paid.tool(tools, 'report', { price: '$0.01', assetTransferMethod: 'permit2', description: 'A report' }, async () => (
      failing ? { isError: true, content: [{ type: 'text' as const, text: 'no data today' }] } : { content: [{ type: 'text' as const, text: 'the report' }] }
    ));
    return tools;
  });
});
afterAll(async () => {
  await mcp?.close();
  await server?.close();
});

const call = (meta?: Record<string, unknown>) => mcp.client.callTool({ name: 'report', arguments: {}, ...(meta ? { _meta: meta } : {}) }) as Promise<any>;

/** The official client's payment for the tool's payment-required answer (it reads the chain for the allowance). */
async function officialPayment(buyer: PrivateKeyAccount) {
  const required = (await call()).structuredContent;
  const client = new x402Client().register(NETWORK, new ExactEvmScheme(toClientEvmSigner(buyer, testChain().publicClient as never)))
    .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] });
  return client.createPaymentPayload(required);
}

it('answers an unpaid call with an exact offer through Permit2, declaring both gas sponsoring extensions', async () => {
  const required = (await call()).structuredContent;
  expect(required.accepts).toEqual([expect.objectContaining({ scheme: 'exact', network: NETWORK, amount: String(PRICE), payTo: seller.payTo, extra: expect.objectContaining({ assetTransferMethod: 'permit2' }) })]);
  expect(Object.keys(required.extensions).sort()).toEqual(['eip2612GasSponsoring', 'erc20ApprovalGasSponsoring']);
});

it('a buyer that approved Permit2 pays once through the proxy; the same payment again moves nothing more', async () => {
  const buyer = await permit2ApprovedBuyer();
  const before = await usdcBalance(seller.payTo);
  const payment = await officialPayment(buyer);
  expect(payment.payload).toHaveProperty('permit2Authorization');
  const paid = await call({ 'x402/payment': payment });
  expect(paid.isError).toBeFalsy();
  expect(paid.content[0].text).toBe('the report');
  const settlement = paid._meta['x402/payment-response'];
  expect(settlement).toMatchObject({ success: true, payer: buyer.address, network: NETWORK });
  const tx = await testChain().publicClient.getTransaction({ hash: settlement.transaction });
  expect(tx.to?.toLowerCase()).toBe(EXACT_PROXY_ADDRESS.toLowerCase());
  expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
  expect(await usdcBalance(seller.payTo)).toBe(before + PRICE);

  const again = await call({ 'x402/payment': payment });
  expect(again.isError).toBe(true);
  expect(again.structuredContent.accepts).toHaveLength(1);
  expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
});

it('a buyer with no gas and no allowance pays with its USDC permit (eip2612GasSponsoring)', async () => {
  const buyer = await fundedBuyer('1');
  const ethOf = (address: Address) => testChain().publicClient.getBalance({ address });
  expect([await ethOf(buyer.address), await permit2Allowance(testChain().publicClient as never, testChain().usdc, buyer.address)]).toEqual([0n, 0n]);
  const payment = await officialPayment(buyer);
  expect(Object.keys(payment.extensions ?? {})).toContain('eip2612GasSponsoring');
  const paid = await call({ 'x402/payment': payment });
  expect(paid.isError).toBeFalsy();
  expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
  expect(await ethOf(buyer.address)).toBe(0n);
});

it('a failed tool is not charged: the held payment is released and nothing moves', async () => {
  const buyer = await permit2ApprovedBuyer();
  failing = true;
  try {
    const result = await call({ 'x402/payment': await officialPayment(buyer) });
    expect(result.isError).toBe(true);
    expect(result.content[0].text).toBe('no data today');
  } finally {
    failing = false;
  }
  expect(await usdcBalance(buyer.address)).toBe(1_000_000n);
});

it('refuses Permit2 for a tool priced by usage, in escrow or through a channel, when the tool is declared', () => {
  const paid = mcpPaywall({ backendUrl: server.url, apiKey: seller.sellerKey });
  const tools = new McpServer({ name: 'x', version: '1.0.0' });
  const handler = async () => ({ content: [] });
  expect(() => paid.tool(tools, 'a', { price: { upto: '$0.50' }, assetTransferMethod: 'permit2' }, handler)).toThrow(/permit2' is for exact tools/);
  expect(() => paid.tool(tools, 'b', { price: '$0.01', scheme: 'batch-settlement', assetTransferMethod: 'permit2' }, handler)).toThrow(/permit2' is for exact tools/);
  expect(() => paid.tool(tools, 'c', { price: '$0.01', assetTransferMethod: 'sideways' as never }, handler)).toThrow(/'eip3009' or 'permit2'/);
});
