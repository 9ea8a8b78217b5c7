// Paid MCP tools settle after the tool by default: a tool result with isError, or a tool that throws, is
// not charged (the same signed payment works once the tool succeeds); a successful result is charged once
// and carries the settlement; a tool set to settle before-handler is charged whatever it returns.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { Address } from 'viem';
import { mcpPaywall } from '../../adapters/mcp.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { setUpSeller } from '../support/payments.js';
import { serveMcp, type ServedMcp } from './support.js';
import { createWalletClient, http as rpcTransport, parseEther } from 'viem';
import { usdcAbi } from '../../server/chain/usdc.js';
import { fundedBuyer, setEthBalance, signAuthorization, testChain, usdcBalance } from '../support/chain.js';

/** What the flaky tool does next: succeed, answer isError, or throw; `during` runs inside the tool first. */
let next: 'ok' | 'is-error' | 'throw' = 'ok';
let during: (() => Promise<void>) | undefined;
let runs = 0;

let server: TestServer;
let mcp: ServedMcp;
let payTo: Address;

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  const seller = await setUpSeller(server, { resource: 'mcp://tool/flaky', priceUsdc: '0.01' });
  payTo = seller.payTo;
  expect((await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: 'mcp://tool/prepaid', priceUsdc: '0.01' } })).status).toBe(201);
  const paid = mcpPaywall({ backendUrl: server.url, apiKey: seller.sellerKey });
  mcp = await serveMcp(() => {
    const tools = new McpServer({ name: 'flaky', version: '1.0.0' });
    const body = async ({ q }: { q: string }) => {
      runs++;
      await during?.();
      if (next === 'throw') throw new Error('the model is down');
      if (next === 'is-error') return { isError: true, content: [{ type: 'text' as const, text: 'no answer for that' }] };
      return { content: [{ type: 'text' as const, text: `answer to ${q}` }] };
    };
    paid.tool(tools, 'flaky', { price: '$0.01', inputSchema: { q: z.string() } }, body);
    paid.tool(tools, 'prepaid', { price: '$0.01', settle: 'before-handler', inputSchema: { q: z.string() } }, body);
    return tools;
  });
});
afterAll(async () => {
  await mcp?.close();
  await server?.close();
});

const call = (tool: string, meta?: Record<string, unknown>) =>
  mcp.client.callTool({ name: tool, arguments: { q: 'weather' }, ...(meta ? { _meta: meta } : {}) }) as Promise<any>;

async function signedPayment(tool: string, buyer: Awaited<ReturnType<typeof fundedBuyer>>) {
  const accepted = (await call(tool)).structuredContent.accepts[0];
  const signed = await signAuthorization(buyer, { to: accepted.payTo, value: BigInt(accepted.amount) }, { verifyingContract: accepted.asset });
  const a = signed.authorization;
  return {
    x402Version: 2, resource: { url: `mcp://tool/${tool}` }, accepted,
    payload: { signature: signed.signature, authorization: { from: a.from, to: a.to, value: a.value.toString(), validAfter: a.validAfter.toString(), validBefore: a.validBefore.toString(), nonce: a.nonce } },
  };
}

it('a tool result with isError is not charged, nor a tool that throws; the same payment is charged once the tool succeeds', async () => {
  const buyer = await fundedBuyer('1');
  const payment = await signedPayment('flaky', buyer);
  const before = await usdcBalance(buyer.address);

  next = 'is-error';
  const failed = await call('flaky', { 'x402/payment': payment });
  expect(failed.isError).toBe(true);
  expect(failed.content[0].text).toBe('no answer for that');
  expect(failed._meta?.['x402/payment-response']).toBeUndefined();
  expect(await usdcBalance(buyer.address)).toBe(before);

  next = 'throw';
  const thrown = await call('flaky', { 'x402/payment': payment });
  expect(thrown.isError).toBe(true);
  expect(thrown.content[0].text).toMatch(/not charged/);
  expect(await usdcBalance(buyer.address)).toBe(before);

  next = 'ok';
  const runsBefore = runs;
  const ok = await call('flaky', { 'x402/payment': payment });
  expect(ok.isError).toBeFalsy();
  expect(ok.content[0].text).toBe('answer to weather');
  expect(ok._meta['x402/payment-response']).toMatchObject({ success: true, payer: buyer.address });
  expect(await usdcBalance(buyer.address)).toBe(before - 10_000n);
  expect(await usdcBalance(payTo)).toBeGreaterThanOrEqual(10_000n);
  expect(runs).toBe(runsBefore + 1);

  // Used up: presented again, it is refused and the tool does not run.
  const replay = await call('flaky', { 'x402/payment': payment });
  expect(replay.structuredContent).toMatchObject({ error: 'nonce_already_used' });
  expect(runs).toBe(runsBefore + 1);
});

it('concurrent calls with one payment run the tool once', async () => {
  const buyer = await fundedBuyer('1');
  const payment = await signedPayment('flaky', buyer);
  next = 'ok';
  const runsBefore = runs;
  const results = await Promise.all(Array.from({ length: 6 }, () => call('flaky', { 'x402/payment': payment })));
  expect(results.filter((r) => !r.isError)).toHaveLength(1);
  expect(runs).toBe(runsBefore + 1);
  expect(await usdcBalance(buyer.address)).toBe(1_000_000n - 10_000n);
});

it('a settlement that fails after the tool withholds its output: a payment-required result with the reason', async () => {
  const buyer = await fundedBuyer('1');
  const payment = await signedPayment('flaky', buyer);
  next = 'ok';
  // The buyer spends everything while the tool runs: the held payment can no longer settle.
  during = async () => {
    await setEthBalance(buyer.address, parseEther('1'));
    const { chain, rpcUrl, usdc, publicClient } = testChain();
    const wallet = createWalletClient({ chain, transport: rpcTransport(rpcUrl), account: buyer });
    const hash = await wallet.writeContract({ address: usdc, abi: usdcAbi, functionName: 'transfer', args: ['0x000000000000000000000000000000000000dEaD', await usdcBalance(buyer.address)] });
    await publicClient.waitForTransactionReceipt({ hash });
  };
  try {
    const result = await call('flaky', { 'x402/payment': payment });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ error: 'insufficient_funds' });
    expect(JSON.stringify(result)).not.toContain('answer to weather');
  } finally {
    during = undefined;
  }
});

it('a tool set to settle before-handler is charged even when it answers isError', async () => {
  // Its 402 says so: x402 v2 paymentFlow upfront; the default tool's says nothing (authorization).
  expect((await call('prepaid')).structuredContent.accepts[0].extra).toMatchObject({ paymentFlow: 'upfront' });
  expect((await call('flaky')).structuredContent.accepts[0].extra).not.toHaveProperty('paymentFlow');
  const buyer = await fundedBuyer('1');
  const payment = await signedPayment('prepaid', buyer);
  next = 'is-error';
  const result = await call('prepaid', { 'x402/payment': payment });
  expect(result.isError).toBe(true);
  expect(result._meta['x402/payment-response']).toMatchObject({ success: true });
  expect(await usdcBalance(buyer.address)).toBe(1_000_000n - 10_000n);
});
