import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { getAddress, type Address } from 'viem';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { fundedBuyer, signAuthorization, testChain, usdcBalance } from '../support/chain.js';
import { startReceiver } from '../webhooks/receiver.js';
import { verifyWebhook } from '../../middleware/index.js';
import { startWeatherMcp, PAID_TOOL } from '../../examples/mcp-paid-tool/server.js';

let server: TestServer;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let mcp: Awaited<ReturnType<typeof startWeatherMcp>>;
let client: Client;
let seller: { platformKey: string; sellerKey: string; payTo: Address; webhookSecret: string; endpointId: string };
const paidCalls: string[] = [];

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  receiver = await startReceiver();
  const agent = await signUp(server);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} });
  // A tool is registered like an HTTP endpoint, under mcp://tool/<name>; no URL check applies to it.
  const endpoint = await server.request('POST', '/v0/payments/endpoints', { key: agent.platform_key, body: { url: `mcp://tool/${PAID_TOOL}`, priceUsdc: '0.01', description: 'forecast tool', webhookUrl: receiver.url } });
  expect(endpoint.status).toBe(201);
  seller = { platformKey: agent.platform_key, sellerKey: key.body.apiKey, payTo, webhookSecret: endpoint.body.webhookSecret, endpointId: endpoint.body.id };
  mcp = await startWeatherMcp({ backendUrl: server.url, apiKey: seller.sellerKey, onPaidCall: (city) => paidCalls.push(city) });
  client = new Client({ name: 'test-buyer', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcp.url)));
});
afterAll(async () => {
  await client?.close();
  await mcp?.close();
  await receiver?.close();
  await server?.close();
});

/** A v2 PaymentPayload for the requirement the tool asked for, signed by a local viem account. */
async function paymentFor(required: any, buyer: Awaited<ReturnType<typeof fundedBuyer>>, overrides: { value?: bigint } = {}) {
  const accepted = required.accepts[0];
  const signed = await signAuthorization(buyer, { to: accepted.payTo, value: overrides.value ?? BigInt(accepted.amount) }, { name: accepted.extra.name, verifyingContract: accepted.asset });
  const a = signed.authorization;
  return {
    x402Version: 2,
    resource: required.resource,
    accepted,
    payload: { signature: signed.signature, authorization: { from: a.from, to: a.to, value: a.value.toString(), validAfter: a.validAfter.toString(), validBefore: a.validBefore.toString(), nonce: a.nonce } },
  };
}

const callForecast = (meta?: Record<string, unknown>) =>
  client.callTool({ name: PAID_TOOL, arguments: { city: 'Oslo' }, ...(meta ? { _meta: meta } : {}) }) as Promise<any>;

describe('paid MCP tool', () => {
  it('lists the paid tool next to the free one', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['cities', PAID_TOOL]);
    const free = await client.callTool({ name: 'cities', arguments: {} }) as any;
    expect(free.isError).toBeFalsy();
  });

  it('answers an unpaid call with the payment-required object and does not run the tool', async () => {
    const result = await callForecast();
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toEqual({
      x402Version: 2,
      error: 'payment_required',
      resource: { url: `mcp://tool/${PAID_TOOL}`, description: 'Current weather for a city (paid: $0.01 per call, x402)', mimeType: 'application/json' },
      accepts: [{
        scheme: 'exact', network: 'eip155:84532', amount: '10000', asset: getAddress(testChain().usdc), payTo: seller.payTo,
        maxTimeoutSeconds: 60, extra: { name: 'USD Coin', version: '2' },
      }],
    });
    expect(result.content[0].type).toBe('text');
    expect(JSON.parse(result.content[0].text)).toEqual(result.structuredContent);
    expect(paidCalls).toEqual([]);
  });

  it('redeems _meta["x402/payment"], runs the tool, returns the payment response, records the payment and sends the webhook', async () => {
    const buyer = await fundedBuyer('1');
    const required = (await callForecast()).structuredContent;
    const before = await usdcBalance(seller.payTo);
    const result = await callForecast({ 'x402/payment': await paymentFor(required, buyer) });

    expect(result.isError).toBeFalsy();
    expect(JSON.parse(result.content[0].text)).toMatchObject({ city: 'Oslo', temperatureC: expect.any(Number) });
    const settlement = result._meta['x402/payment-response'];
    expect(settlement).toEqual({
      success: true, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/), network: 'eip155:84532', payer: buyer.address,
      // The offer-receipt extension's signed receipt rides along, as in the HTTP settlement headers.
      extensions: { 'offer-receipt': { info: { receipt: { format: 'jws', signature: expect.any(String) } } } },
    });
    expect(paidCalls).toEqual(['Oslo']);
    expect(await usdcBalance(seller.payTo)).toBe(before + 10_000n);

    const list = await server.request('GET', '/v0/payments', { key: seller.sellerKey });
    const record = list.body.payments.find((p: any) => p.txHash === settlement.transaction);
    expect(record).toMatchObject({ status: 'settled', resourceUrl: `mcp://tool/${PAID_TOOL}`, payerAddress: buyer.address, amountUsdcRaw: '10000', endpointId: seller.endpointId });

    await receiver.next(1);
    const hook = receiver.received[0]!;
    expect(verifyWebhook(hook.raw, hook.headers['x-service-signature'] as string, seller.webhookSecret)).toBe(true);
    expect(hook.json).toMatchObject({ event: 'payment.received', paymentId: record.id, body: { txHash: settlement.transaction, resourceUrl: `mcp://tool/${PAID_TOOL}` } });
  });

  it('never releases the output when settlement fails: replayed payment, wrong amount, garbage', async () => {
    const buyer = await fundedBuyer('1');
    const required = (await callForecast()).structuredContent;
    const payment = await paymentFor(required, buyer);
    expect((await callForecast({ 'x402/payment': payment })).isError).toBeFalsy();
    const callsAfterPaid = paidCalls.length;
    const balance = await usdcBalance(buyer.address);

    const replay = await callForecast({ 'x402/payment': payment });
    expect(replay.isError).toBe(true);
    expect(replay.structuredContent).toMatchObject({ x402Version: 2, error: 'nonce_already_used', 'x402/payment-response': { success: false, errorReason: 'nonce_already_used' } });
    expect(JSON.parse(replay.content[0].text)).toEqual(replay.structuredContent);
    expect(replay._meta?.['x402/payment-response']).toBeUndefined();

    const cheap = await callForecast({ 'x402/payment': await paymentFor(required, buyer, { value: 1n }) });
    expect(cheap.isError).toBe(true);
    expect(cheap.structuredContent.error).not.toBe('payment_required');

    const garbage = await callForecast({ 'x402/payment': 'not a payload' });
    expect(garbage.isError).toBe(true);
    expect(garbage.structuredContent.error).toBe('invalid_payload');

    expect(paidCalls.length).toBe(callsAfterPaid);
    expect(await usdcBalance(buyer.address)).toBe(balance);
  });
});
