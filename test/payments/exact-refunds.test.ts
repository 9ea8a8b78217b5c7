// Refunds of `exact` payments (no escrow) where the seller's payTo is an agentgate wallet of its own org:
// the wallet signs an EIP-3009 transfer back to the payer and the settlement engine sends it, under the
// wallet identity's mandate. On the real chain and database: partial then the rest, never more than was
// paid, 5 concurrent calls refunding once, the mandate's caps, another org's 404, a foreign payTo refused,
// a crash between sending and recording finished from the chain, and payment.refunded delivered signed.
import { createServer } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { openStorefront } from '../support/storefront.js';
import { fundedBuyer, signAuthorization, testChain, usdcBalance } from '../support/chain.js';
import { verifyReceipt, verifyWebhook } from 'agentgate-x402-wire';
import { DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';
import { authorizationState } from '../../server/chain/usdc.js';
import { consoleGet, consolePost, csrfIn, signIn } from '../console/http-client.js';

const PRICE = 1_000_000n; // $1

let server: TestServer;
const hooks: Array<{ raw: string; signature: string | undefined; body: any }> = [];
const hookServer = createServer((req, res) => {
  let raw = '';
  req.on('data', (chunk) => { raw += chunk; });
  req.on('end', () => { hooks.push({ raw, signature: req.headers['x-service-signature'] as string | undefined, body: JSON.parse(raw) }); res.end('ok'); });
});
let hookUrl: string;

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  hookServer.listen(0, '127.0.0.1');
  await once(hookServer, 'listening');
  hookUrl = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}/hook`;
}, 60_000);
afterAll(async () => {
  hookServer.closeAllConnections();
  await new Promise((r) => hookServer.close(r));
  await server?.close();
});

type Seller = { platformKey: string; sellerKey: string; identityKey: string; payTo: Address; resource: string; webhookSecret: string };

/**
 * A seller org taking exact payments to `payTo` (default: its identity's agentgate wallet), with an
 * endpoint whose webhooks reach this test, and the wallet identity's mandate (null: none).
 */
async function seller(options: { mandate?: { maxPerCallUsdc: string; dailyCapUsdc: string; allowedHosts?: string[] } | null; payTo?: Address } = {}): Promise<Seller> {
  const agent = await signUp(server);
  const identityKey = agent.identity.rawKey;
  const wallet = await server.request('GET', '/v0/wallet', { key: identityKey });
  expect(wallet.status).toBe(200);
  const payTo = options.payTo ?? wallet.body.address as Address;
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} });
  const shop = await openStorefront(server, { platformKey: agent.platform_key, sellerKey: key.body.apiKey }, { 'GET /report': { price: '$1', endpoint: { webhookUrl: hookUrl } } });
  const resource = shop.resource('/report');
  const mandate = options.mandate === undefined ? { maxPerCallUsdc: '5', dailyCapUsdc: '50' } : options.mandate;
  if (mandate) {
    const created = await server.request('POST', '/v0/payments/mandates', { key: identityKey, body: { ...mandate, validUntil: new Date(Date.now() + 86_400_000).toISOString() } });
    expect(created.status).toBe(201);
  }
  return { platformKey: agent.platform_key, sellerKey: key.body.apiKey, identityKey, payTo, resource, webhookSecret: shop.endpoint('/report').webhookSecret! };
}

/** A buyer (a plain account) pays the seller's exact route through the facilitator API; the payment's id. */
async function paid(s: Seller, amount = PRICE) {
  const buyer = await fundedBuyer('3');
  const auth = await signAuthorization(buyer, { to: s.payTo, value: amount });
  const requirements = { scheme: 'exact', network: 'base-sepolia', maxAmountRequired: amount.toString(), resource: s.resource, description: '', mimeType: 'application/json', payTo: s.payTo, maxTimeoutSeconds: 60, asset: testChain().usdc, extra: { name: DEV_USDC_NAME, version: DEV_USDC_VERSION } };
  const payload = { x402Version: 1, scheme: 'exact', network: 'base-sepolia', payload: { signature: auth.signature, authorization: { ...auth.authorization, value: amount.toString(), validAfter: auth.authorization.validAfter.toString(), validBefore: auth.authorization.validBefore.toString() } } };
  const settled = await server.request('POST', '/v0/x402/settle', { key: s.sellerKey, body: { x402Version: 1, paymentPayload: payload, paymentRequirements: requirements } });
  expect(settled.body.success).toBe(true);
  const id = (await server.request('GET', '/v0/payments', { key: s.platformKey })).body.payments.find((p: any) => p.payerAddress === buyer.address).id as string;
  return { buyer, id };
}

const refund = (s: Seller, id: string, body: object, key?: string) =>
  server.request('POST', `/v0/payments/${id}/refund`, { key: s.platformKey, body, ...(key ? { headers: { 'Idempotency-Key': key } } : {}) });

const mandateOf = async (s: Seller) => (await server.request('GET', '/v0/payments/mandates', { key: s.identityKey })).body.mandates[0];

async function hookFor(refundId: string) {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const hit = hooks.find((h) => h.body.event === 'payment.refunded' && h.body.refundId === refundId);
    if (hit) return hit;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no payment.refunded for ${refundId}`);
}

describe('refunds of exact payments paid to the seller\'s agentgate wallet', () => {
  it('refunds part, then the rest, from the wallet on chain, with a signed receipt and webhook each; more than is left is refused with nothing moved', async () => {
    const s = await seller();
    const { buyer, id } = await paid(s);
    const buyerBefore = await usdcBalance(buyer.address);
    const walletBefore = await usdcBalance(s.payTo);
    expect(walletBefore).toBe(PRICE);

    const first = await refund(s, id, { amount: '0.4', reason: 'late delivery' });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ status: 'refunded', amountUsdcRaw: '400000', reason: 'late delivery', txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), payment: { capturedUsdcRaw: '1000000', refundedUsdcRaw: '400000' } });
    expect(await usdcBalance(buyer.address)).toBe(buyerBefore + 400_000n);
    expect(await usdcBalance(s.payTo)).toBe(walletBefore - 400_000n);
    const did = (await server.request('GET', '/.well-known/did.json')).body;
    expect(first.body.receipt.body).toMatchObject({ kind: 'refund', paymentId: id, refundedUsdcRaw: '400000', txHash: first.body.txHash, payerAddress: buyer.address, recipientAddress: s.payTo });
    expect(await verifyReceipt(first.body.receipt, did)).toEqual({ ok: true });
    const hook = await hookFor(first.body.id);
    expect(verifyWebhook(hook.raw, hook.signature, s.webhookSecret)).toBe(true);
    expect(hook.body).toMatchObject({ event: 'payment.refunded', paymentId: id, amountUsdcRaw: '400000', reason: 'late delivery', txHash: first.body.txHash, body: { kind: 'refund' } });
    // The wallet identity's mandate counts it as spending.
    expect(await mandateOf(s)).toMatchObject({ spentTodayUsdc: '0.4' });

    const tooMuch = await refund(s, id, { amount: '0.600001', reason: 'x' });
    expect([tooMuch.status, tooMuch.body.error]).toEqual([409, 'refund_exceeds_captured']);
    expect(await usdcBalance(buyer.address)).toBe(buyerBefore + 400_000n);

    const rest = await refund(s, id, { reason: 'cancelled' }, 'rest-1');
    expect(rest.body).toMatchObject({ status: 'refunded', amountUsdcRaw: '600000', payment: { refundedUsdcRaw: '1000000' } });
    const repeat = await refund(s, id, { reason: 'cancelled' }, 'rest-1');
    expect([repeat.status, repeat.body.id]).toEqual([200, rest.body.id]);
    expect(await usdcBalance(buyer.address)).toBe(buyerBefore + PRICE);
    expect(await usdcBalance(s.payTo)).toBe(0n);
    const nothingLeft = await refund(s, id, { reason: 'again' });
    expect([nothingLeft.status, nothingLeft.body.error]).toEqual([409, 'refund_exceeds_captured']);
    expect((await server.request('GET', `/v0/payments/${id}/refunds`, { key: s.sellerKey })).body.refunds.map((r: any) => [r.amountUsdcRaw, r.status])).toEqual([['400000', 'refunded'], ['600000', 'refunded']]);
    expect(await mandateOf(s)).toMatchObject({ spentTodayUsdc: '1' });
  });

  it('5 concurrent full refunds of one payment refund it once', async () => {
    const s = await seller();
    const { buyer, id } = await paid(s);
    const before = await usdcBalance(buyer.address);
    const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => refund(s, id, { reason: `try ${i}` })));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status !== 200).map((a) => a.body.error).every((e: string) => e === 'refund_in_progress' || e === 'refund_exceeds_captured')).toBe(true);
    expect(await usdcBalance(buyer.address)).toBe(before + PRICE);
    expect((await server.request('GET', `/v0/payments/${id}/refunds`, { key: s.platformKey })).body.refunds).toHaveLength(1);
    expect(await mandateOf(s)).toMatchObject({ spentTodayUsdc: '1' });
  });

  it('the wallet identity\'s mandate decides: none, over its per-call limit, over its daily cap, or limited to hosts is refused (409) with nothing moved', async () => {
    const none = await seller({ mandate: null });
    const a = await paid(none);
    const noMandate = await refund(none, a.id, { reason: 'x' });
    expect([noMandate.status, noMandate.body.error, noMandate.body.message]).toEqual([409, 'mandate_not_found', expect.stringContaining('POST /v0/payments/mandates')]);

    const tight = await seller({ mandate: { maxPerCallUsdc: '0.5', dailyCapUsdc: '0.7' } });
    const b = await paid(tight);
    const before = await usdcBalance(b.buyer.address);
    const perCall = await refund(tight, b.id, { reason: 'x' });
    expect([perCall.status, perCall.body.error]).toEqual([409, 'mandate_per_call_exceeded']);
    expect((await refund(tight, b.id, { amount: '0.5', reason: 'x' })).status).toBe(200);
    const daily = await refund(tight, b.id, { amount: '0.3', reason: 'x' });
    expect([daily.status, daily.body.error]).toEqual([409, 'mandate_daily_cap_exceeded']);
    expect(await usdcBalance(b.buyer.address)).toBe(before + 500_000n);

    const hostsOnly = await seller({ mandate: { maxPerCallUsdc: '5', dailyCapUsdc: '5', allowedHosts: ['api.example.com'] } });
    const c = await paid(hostsOnly);
    const hostRefused = await refund(hostsOnly, c.id, { reason: 'x' });
    expect([hostRefused.status, hostRefused.body.error, hostRefused.body.message]).toEqual([409, 'mandate_host_not_allowed', expect.stringContaining('without allowedHosts')]);
    expect(await usdcBalance(hostsOnly.payTo)).toBe(PRICE);
  });

  it('another org gets 404; an exact payment to an address that is not an agentgate wallet of the org is refused before anything moves', async () => {
    const s = await seller();
    const { id } = await paid(s);
    const other = await signUp(server);
    expect((await server.request('POST', `/v0/payments/${id}/refund`, { key: other.platform_key, body: { reason: 'x' } })).status).toBe(404);
    expect((await server.request('GET', `/v0/payments/${id}/refunds`, { key: other.platform_key })).status).toBe(404);

    const foreign = await seller({ payTo: privateKeyToAccount(generatePrivateKey()).address });
    const f = await paid(foreign);
    const before = await usdcBalance(f.buyer.address);
    const refused = await refund(foreign, f.id, { reason: 'x' });
    expect([refused.status, refused.body.error, refused.body.message]).toEqual([409, 'refund_not_possible', expect.stringContaining('not an agentgate wallet of this org')]);
    expect(await usdcBalance(f.buyer.address)).toBe(before);

    // Another org's wallet is no wallet of this org: its payments cannot be refunded from it.
    const stranger = await seller({ payTo: s.payTo });
    const g = await paid(stranger);
    const notOurs = await refund(stranger, g.id, { reason: 'x' });
    expect([notOurs.status, notOurs.body.error]).toEqual([409, 'refund_not_possible']);
  });

  it('a refund recorded while its payment.refunded was not handed over (a crash) is delivered by the webhook outbox sweep, once', async () => {
    const s = await seller();
    const { id } = await paid(s);
    const exact = server.app.payments.refunds.exact!;
    // The crash: the process stops between recording the refund and handing its event to the engine.
    const lost = jest.spyOn(exact.webhooks, 'notify').mockResolvedValueOnce(undefined);
    const done = await refund(s, id, { amount: '0.1', reason: 'lost event' });
    expect(done.status).toBe(200);
    lost.mockRestore();
    expect(await exact.refunds.findById(done.body.id).lean()).toMatchObject({ webhook: { status: 'pending' } });
    expect(hooks.some((h) => h.body.refundId === done.body.id)).toBe(false);

    expect(await server.app.webhooks.sweepOutboxes(0)).toBeGreaterThanOrEqual(1);
    const hook = await hookFor(done.body.id);
    expect(hook.body).toMatchObject({ event: 'payment.refunded', paymentId: id, amountUsdcRaw: '100000', reason: 'lost event' });
    expect(await exact.refunds.findById(done.body.id).lean()).toMatchObject({ webhook: { status: 'dispatched' } });
    // Swept again: nothing more is sent for it.
    await server.app.webhooks.sweepOutboxes(0);
    await new Promise((r) => setTimeout(r, 500));
    expect(hooks.filter((h) => h.body.refundId === done.body.id)).toHaveLength(1);
  });

  it('a refund sent but not recorded (a crash) is finished from the chain by the sweep: recorded once, nothing sent twice', async () => {
    const s = await seller();
    const { buyer, id } = await paid(s);
    const before = await usdcBalance(buyer.address);
    const done = await refund(s, id, { amount: '0.25', reason: 'crash' });
    expect(done.status).toBe(200);
    const exact = server.app.payments.refunds.exact!;
    // The crash: the transfer moved, the record and its outcome were never written.
    await exact.refunds.updateOne({ _id: done.body.id }, { $set: { status: 'pending', createdAt: new Date(Date.now() - 60_000) }, $unset: { txHash: 1, doneAt: 1, receipt: 1, webhook: 1 } });
    await exact.refunds.db.collection('exact_refund_outcomes').deleteOne({ _id: done.body.id } as never);
    const record = (await exact.refunds.findById(done.body.id).lean())!;
    expect(await authorizationState({ client: testChain().publicClient as never, token: testChain().usdc, authorizer: s.payTo, nonce: record.authorization.nonce as never })).toBe(true);

    expect(await exact.sweep()).toBe(1);
    const after = (await server.request('GET', `/v0/payments/${id}/refunds`, { key: s.platformKey })).body.refunds;
    expect(after).toEqual([expect.objectContaining({ id: done.body.id, status: 'refunded', txHash: done.body.txHash, amountUsdcRaw: '250000' })]);
    expect(await usdcBalance(buyer.address)).toBe(before + 250_000n);
    expect(await mandateOf(s)).toMatchObject({ spentTodayUsdc: '0.25' });
  });
});

describe('the console, the CLI and the MCP tool refund exact payments the same way', () => {
  it('the console shows the Refund form for a payment to the org\'s wallet (not for one to a foreign payTo); the confirmation refunds on chain', async () => {
    const s = await seller();
    const { buyer, id } = await paid(s);
    const before = await usdcBalance(buyer.address);
    const session = await signIn(server, s.platformKey);
    const page = await consoleGet(server, `/console/payments/${id}`, session.cookie);
    expect(page.text).toContain('id="refunds-title"');
    expect(page.text).toContain(`action="/console/payments/${id}/refund"`);
    const confirm = await consolePost(server, `/console/payments/${id}/refund`, { _csrf: session.csrf, amount: '0.3', reason: 'from the console' }, { cookie: session.cookie });
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain('data-refund-confirm');
    expect(await usdcBalance(buyer.address)).toBe(before);
    const idempotencyKey = /name="idempotencyKey" value="([^"]+)"/.exec(confirm.text)![1]!;
    const done = await consolePost(server, `/console/payments/${id}/refund/confirm`, { _csrf: csrfIn(confirm.text), amount: '0.3', reason: 'from the console', idempotencyKey }, { cookie: session.cookie });
    expect(done.status).toBe(303);
    expect(await usdcBalance(buyer.address)).toBe(before + 300_000n);
    expect((await consoleGet(server, `/console/payments/${id}`, session.cookie)).text).toMatch(/data-refund="[^"]+".*from the console.*refunded/s);

    const foreign = await seller({ payTo: privateKeyToAccount(generatePrivateKey()).address });
    const f = await paid(foreign);
    const foreignSession = await signIn(server, foreign.platformKey);
    expect((await consoleGet(server, `/console/payments/${f.id}`, foreignSession.cookie)).text).not.toContain('id="refunds-title"');
  });

  it('`agentgate payments refund` and the payments_refund MCP tool refund an exact payment from the wallet, once per key', async () => {
    const s = await seller();
    const { buyer, id } = await paid(s);
    const before = await usdcBalance(buyer.address);
    const cli = (args: string[]) => promisify(execFile)('node', [join(process.cwd(), 'bin', 'agentgate.js'), ...args], { env: { ...process.env, AGENTGATE_CREDENTIALS: '/nonexistent/none.json' }, timeout: 60_000 })
      .then(({ stdout }) => ({ code: 0, stdout }), (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }));
    const args = ['payments', 'refund', id, '--amount', '0.25', '--reason', 'damaged', '--idempotency-key', 'cli-1', '--key', s.platformKey, '--url', server.url];
    expect(await cli(args)).toMatchObject({ code: 0, stdout: expect.stringContaining(`refunded 0.25 USDC of ${id}`) });
    expect((await cli(args)).code).toBe(0);
    expect(await usdcBalance(buyer.address)).toBe(before + 250_000n);

    const mcp = new Client({ name: 'exact-refund-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${s.identityKey}` } } }));
    try {
      const call = () => mcp.callTool({ name: 'payments_refund', arguments: { id, amount: '0.5', reason: 'agent refund', idempotencyKey: 'mcp-1' } });
      const first = JSON.parse((((await call()).content) as Array<{ text: string }>)[0]!.text);
      expect(first).toMatchObject({ paymentId: id, status: 'refunded', amountUsdcRaw: '500000', receipt: expect.anything() });
      const again = JSON.parse((((await call()).content) as Array<{ text: string }>)[0]!.text);
      expect(again.id).toBe(first.id);
      expect(await usdcBalance(buyer.address)).toBe(before + 750_000n);
    } finally {
      await mcp.close();
    }
  }, 90_000);
});
