// Issue 15: an agent that only speaks MCP. After signing up over HTTP (the one step that has no key yet),
// it sets itself up, pays and reads its receipt with the official MCP client alone: mandate, dev faucet,
// payments_pay against our Express example seller, activity. Refusals reach it as tool errors.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Address } from 'viem';
import { startTestServer, type TestServer } from '../support/server.js';
import { startServer } from '../../server/server.js';
import { signUp } from '../support/agents.js';
import { faucetConfig, usdcBalance } from '../support/chain.js';
import { inDays, ourExpressSeller } from '../buyer/support.js';

let server: TestServer;
let seller: Awaited<ReturnType<typeof ourExpressSeller>>;

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true', ...(await faucetConfig('100')) });
  seller = await ourExpressSeller(server);
});
afterAll(async () => {
  await seller?.close();
  await server?.close();
});

type ToolResult = { isError: boolean; body: any };

async function connect(key: string) {
  const client = new Client({ name: 'mcp-only-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  const call = async (name: string, args: Record<string, unknown> = {}): Promise<ToolResult> => {
    const result = await client.callTool({ name, arguments: args });
    const text = (result.content as Array<{ text: string }>)[0]!.text;
    // Our tools answer JSON; the SDK's own argument check (against the tool's input schema) answers text.
    let body: unknown = text;
    try { body = JSON.parse(text); } catch { /* the SDK's text */ }
    return { isError: result.isError === true, body };
  };
  /** A call that must succeed: its parsed JSON. */
  const ok = async (name: string, args: Record<string, unknown> = {}) => {
    const result = await call(name, args);
    if (result.isError) throw new Error(`${name} failed: ${JSON.stringify(result.body)}`);
    return result.body;
  };
  return { client, call, ok };
}

describe('an agent that only speaks MCP', () => {
  it('creates a mandate, funds its wallet from the dev faucet, pays a paid API and reads the receipt; refusals are tool errors', async () => {
    const agent = await signUp(server);
    const { client, call, ok } = await connect(agent.identity.rawKey);
    const weather = `${seller.url}/weather?city=Oslo`;

    // No mandate yet: refused as a tool error that names the tool to fix it.
    const noMandate = await call('payments_pay', { url: weather });
    expect(noMandate.isError).toBe(true);
    expect(noMandate.body).toMatchObject({ ok: false, error: 'mandate_not_found', code: 'mandate_not_found', status: 403 });
    expect(noMandate.body.message).toContain('payments_create_mandate');

    // A cap of 0.015 per day: one 0.01 call fits, a second does not.
    const mandate = await ok('payments_create_mandate', { maxPerCallUsdc: '0.01', dailyCapUsdc: '0.015', validUntil: inDays(1) });
    expect(mandate).toMatchObject({ mandateId: expect.stringMatching(/^mdt_/), status: 'active', dailyCapUsdc: '0.015', spentTodayUsdc: '0' });
    expect(await ok('payments_list_mandates')).toMatchObject({ count: 1, mandates: [{ mandateId: mandate.mandateId }] });
    expect(await ok('payments_get_mandate', { id: mandate.mandateId })).toMatchObject({ mandateId: mandate.mandateId, callCount: 0 });

    // An empty wallet is refused too, and the message points at the faucet.
    const wallet = await ok('wallet_get');
    expect(wallet).toMatchObject({ address: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/), balanceUsdc: '0' });
    const broke = await call('payments_pay', { url: weather });
    expect(broke.isError).toBe(true);
    expect(broke.body).toMatchObject({ error: 'balance_insufficient', status: 402 });
    expect(broke.body.message).toContain('wallet_faucet');

    const funded = await ok('wallet_faucet', { amountUsdc: '1' });
    expect(funded).toMatchObject({ txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), amountUsdc: '1', wallet: { address: wallet.address, balanceUsdc: '1' } });
    expect(await usdcBalance(wallet.address as Address)).toBe(1_000_000n);

    const sellerBefore = await usdcBalance(seller.payTo);
    const paid = await ok('payments_pay', { url: weather });
    expect(paid).toMatchObject({
      ok: true, paid: true, status: 200, content: { city: 'Oslo', paidBy: wallet.address },
      cost: { amountUsdc: '0.01' }, payer: wallet.address, recipient: seller.payTo, txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });
    expect(paid.paymentResponse.offerReceipt).toMatchObject({ format: 'jws' });
    expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + 10_000n);
    expect(await usdcBalance(wallet.address as Address)).toBe(990_000n);

    // The receipt, read back later through the activity feed.
    const activity = await ok('payments_list_activity', { limit: 10 });
    expect(activity.activity[0]).toMatchObject({
      id: paid.paymentId, direction: 'out', status: 'settled', amountUsdc: '0.01', txHash: paid.txHash, offerReceipt: paid.paymentResponse.offerReceipt,
    });
    // It is the receipt the seller's record holds.
    const sellerPayments = await server.request('GET', '/v0/payments', { key: seller.platformKey });
    const received = sellerPayments.body.payments.find((p: any) => p.txHash === paid.txHash);
    const detail = await server.request('GET', `/v0/payments/${received.id}`, { key: seller.platformKey });
    expect(activity.activity[0].offerReceipt).toEqual(detail.body.offerReceipt);

    // Over the daily cap: a tool error, and no money moves.
    const overCap = await call('payments_pay', { url: weather });
    expect(overCap.isError).toBe(true);
    expect(overCap.body).toMatchObject({ ok: false, error: 'mandate_daily_cap_exceeded', status: 403, message: expect.stringContaining('daily cap') });
    expect(await usdcBalance(wallet.address as Address)).toBe(990_000n);

    // Revoked: refused again, with the way out named.
    expect(await ok('payments_revoke_mandate', { id: mandate.mandateId })).toMatchObject({ status: 'revoked', callCount: 1 });
    const revoked = await call('payments_pay', { url: weather });
    expect(revoked).toMatchObject({ isError: true, body: { error: 'mandate_revoked' } });
    expect(revoked.body.message).toContain('payments_create_mandate');

    // A bad argument is a tool error naming the problem, not a crash (the SDK checks the tool's schema first).
    const invalid = await call('payments_get_mandate', { id: 'nope' });
    expect(invalid).toMatchObject({ isError: true, body: expect.stringContaining('malformed mandate id') });
    const missing = await call('payments_get_mandate', { id: 'mdt_doesnotexist' });
    expect(missing).toMatchObject({ isError: true, body: { status: 404 } });
    await client.close();
  });

  it('is not offered the faucet by a server started without the dev extension (as agentgate serve starts it)', async () => {
    // Same database as the test server, so the key signed up there works here.
    const production = await startServer({ ...server.config, PORT: 0 }, { workers: false });
    try {
      const agent = await signUp(server);
      const client = new Client({ name: 'mcp-only-agent', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${production.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.identity.rawKey}` } } }));
      const names = (await client.listTools()).tools.map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['wallet_get', 'payments_create_mandate']));
      expect(names).not.toContain('wallet_faucet');
      const refused = await client.callTool({ name: 'wallet_faucet', arguments: { amountUsdc: '1' } }).catch((err: Error) => ({ isError: true, error: err.message }));
      expect(refused.isError).toBe(true);
      await client.close();
    } finally {
      await production.close();
    }
  });
});
