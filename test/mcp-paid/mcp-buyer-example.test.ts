// The MCP buyer example (examples/mcp-buyer/buyer.ts, `npm run example:mcp-buyer`) pays the paid-tool
// example (examples/mcp-paid-tool/server.ts) through a real backend on the test chain.
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { sendUsdc, usdcBalance } from '../support/chain.js';
import { startWeatherMcp, PAID_TOOL } from '../../examples/mcp-paid-tool/server.js';
import { payMcpTool } from '../../examples/mcp-buyer/buyer.js';

let server: TestServer;
let mcp: Awaited<ReturnType<typeof startWeatherMcp>>;
let sellerKey: string;
const payTo = privateKeyToAccount(generatePrivateKey()).address;
const paidCalls: string[] = [];

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  const agent = await signUp(server);
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} });
  sellerKey = key.body.apiKey;
  const endpoint = await server.request('POST', '/v0/payments/endpoints', { key: agent.platform_key, body: { url: `mcp://tool/${PAID_TOOL}`, priceUsdc: '0.01' } });
  expect(endpoint.status).toBe(201);
  mcp = await startWeatherMcp({ backendUrl: server.url, apiKey: sellerKey, onPaidCall: (city) => paidCalls.push(city) });
});
afterAll(async () => {
  await mcp?.close();
  await server?.close();
});

async function fundedKey(atomic: bigint) {
  const privateKey = generatePrivateKey();
  const address = privateKeyToAccount(privateKey).address;
  await sendUsdc(address, atomic);
  return { privateKey, address };
}

describe('the MCP buyer example', () => {
  it('gets the requirement from the refusal, signs with viem, retries with _meta["x402/payment"] and returns the result and the settlement', async () => {
    const buyer = await fundedKey(1_000_000n);
    const sellerBefore = await usdcBalance(payTo);
    const paid = await payMcpTool({ url: mcp.url, tool: PAID_TOOL, arguments: { city: 'Lima' }, privateKey: buyer.privateKey });

    expect(paid.result.isError).toBeFalsy();
    expect(JSON.parse(paid.result.content[0]!.text!)).toMatchObject({ city: 'Lima', temperatureC: expect.any(Number) });
    expect(paid.requirement).toMatchObject({ scheme: 'exact', amount: '10000', payTo });
    expect(paid.settlement).toMatchObject({ success: true, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/), payer: buyer.address });
    expect(paidCalls).toEqual(['Lima']);
    expect(await usdcBalance(buyer.address)).toBe(990_000n);
    expect(await usdcBalance(payTo)).toBe(sellerBefore + 10_000n);

    // The seller's backend recorded the settlement the buyer was handed.
    const payments = await server.request('GET', '/v0/payments', { key: sellerKey });
    expect(payments.body.payments.find((p: any) => p.txHash === paid.settlement!.transaction)).toMatchObject({ status: 'settled', payerAddress: buyer.address });
  });

  it('calls a free tool without paying, and refuses a price over its limit before signing anything', async () => {
    const buyer = await fundedKey(1_000_000n);
    const free = await payMcpTool({ url: mcp.url, tool: 'cities', privateKey: buyer.privateKey });
    expect(free.result.isError).toBeFalsy();
    expect(free.settlement).toBeUndefined();

    const calls = paidCalls.length;
    await expect(payMcpTool({ url: mcp.url, tool: PAID_TOOL, arguments: { city: 'Oslo' }, privateKey: buyer.privateKey, maxAmountAtomic: 9_999n }))
      .rejects.toThrow(/more than the limit/);
    expect(paidCalls).toHaveLength(calls);
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n);
  });

  it('hands back the refused settlement when the payment cannot settle (an empty wallet)', async () => {
    const calls = paidCalls.length;
    const refused = await payMcpTool({ url: mcp.url, tool: PAID_TOOL, arguments: { city: 'Oslo' }, privateKey: generatePrivateKey() });
    expect(refused.result.isError).toBe(true);
    expect(refused.settlement).toMatchObject({ success: false, errorReason: expect.any(String) });
    expect(paidCalls).toHaveLength(calls);
  });
});
