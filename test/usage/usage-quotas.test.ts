/**
 * Usage and plan quotas as an operator sets them (USAGE_PLANS, `agentgate usage plan`) and as sellers,
 * buyers and agents meet them: settlements by scheme and network, facilitator calls, mail sent and
 * received, and storage, per org and month, in GET /v0/usage, its CSV export, the console and the CLI.
 * A reached quota is refused with a clear answer naming it, before anything moves or is stored; another
 * org, and an org on a plan without that quota, are not affected.
 */
import express from 'express';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { x402ResourceServer } from '@x402/core/server';
import { toClientEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { registerExactEvmScheme as registerServerEvm } from '@x402/evm/exact/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import type { RouteConfig } from '../../middleware/index.js';
import { officialChannelClient } from '../support/official-channel-client.js';
import type { PrivateKeyAccount } from 'viem/accounts';
import { runCli } from '../../server/cli/main.js';
import { monthOf } from '../../server/usage/months.js';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { fundedBuyer, permit2ApprovedBuyer, testChain, usdcBalance } from '../support/chain.js';
import { signUp } from '../support/agents.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { ourFacilitator, paidApp, serve, setUpSeller, type RunningApp } from '../interop/seller.js';
import { consoleGet, signIn } from '../console/http-client.js';
import { eventually, smtpClient } from '../mail/mail-support.js';

const NETWORK = 'eip155:84532' as const;
const PRICE = 10_000n; // $0.01
const PLANS = {
  FREE: {},
  SETTLE2: { settlements: 2 },
  CALLS4: { facilitatorCalls: 4 },
  MAIL1: { mailSent: 1, mailReceived: 1, storageBytes: 3_000 },
};

let server: TestServer;
const apps: RunningApp[] = [];
beforeAll(async () => {
  // USAGE_CACHE_MS 0: every check reads the totals, so a test can say exactly where a quota starts.
  server = await startTestServer({ USAGE_PLANS: JSON.stringify(PLANS), USAGE_CACHE_MS: '0', METRICS_TOKEN: 'usage-test-metrics' });
}, 60_000);
afterAll(async () => {
  for (const app of apps) await app.close();
  await server?.close();
});

const cli = async (...argv: string[]) => {
  const lines: string[] = [];
  const c = server.config;
  const env = { AGENTGATE_MODE: 'dev', BASE_URL: c.BASE_URL, MAIL_DOMAIN: c.MAIL_DOMAIN, DID_DOMAIN: c.DID_DOMAIN, MASTER_KEY: c.MASTER_KEY.toString('hex'), MONGODB_URI: c.MONGODB_URI, MONGODB_DB: c.MONGODB_DB, LOG_LEVEL: 'silent', SMTP_PORT: '0', USAGE_PLANS: JSON.stringify(PLANS) };
  const code = await runCli(['usage', ...argv], { out: (l) => lines.push(l), env });
  return { code, out: lines.join('\n') };
};

/** The operator puts the org on `plan`; the server sees it once the change feed tells it (well under a second). */
async function putOnPlan(orgId: string, key: string, plan: string) {
  expect(await cli('plan', orgId, plan)).toEqual({ code: 0, out: expect.stringContaining(`${orgId} is on plan ${plan}`) });
  await eventually(async () => expect((await server.request('GET', '/v0/usage', { key })).body.plan).toBe(plan));
}

const usageOf = async (key: string, month?: string) => (await server.request('GET', `/v0/usage${month ? `?month=${month}` : ''}`, { key })).body;

const limits = () => [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }];
const exactClient = (buyer: PrivateKeyAccount) => wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, new ExactEvmScheme(toClientEvmSigner(buyer, testChain().publicClient as never))).setSpendControls({ allowedAssets: limits() }));

/** Our Express middleware selling GET /paid (at $0.01 unless `route` says otherwise), registered as a seller does. */
async function ourShop(seller: Awaited<ReturnType<typeof setUpSeller>>, route: RouteConfig = { price: '$0.01' }, register: Record<string, string> = { priceUsdc: '0.01' }): Promise<string> {
  const running: RunningApp = await serve(paidApp('Express', { backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /paid': route } }, 'GET', '/paid', (_q, payment) => {
    if (payment.scheme === 'upto') payment.charge('$0.01');
    return { status: 200, body: { served: true } };
  }));
  apps.push(running);
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${running.url}/paid`, ...register } });
  expect([registered.status, registered.text]).toEqual([201, expect.any(String)]);
  return `${running.url}/paid`;
}

/** An official @x402/express seller with us as its facilitator (HTTPFacilitatorClient, its seller key). */
async function officialShop(seller: Awaited<ReturnType<typeof setUpSeller>>): Promise<string> {
  const resourceServer = registerServerEvm(new x402ResourceServer(ourFacilitator(server, seller.sellerKey)), { networks: [NETWORK] });
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /report': {
      accepts: { scheme: 'exact', network: NETWORK, payTo: seller.payTo, price: { asset: testChain().usdc, amount: String(PRICE), extra: { name: DEV_USDC_NAME, version: '2' } } },
      description: 'Report', mimeType: 'application/json',
    },
  }, resourceServer));
  app.get('/report', (_req, res) => { res.json({ report: 'done' }); });
  const running = await serve(app);
  apps.push(running);
  return `${running.url}/report`;
}

async function loggedRefusal(key: string, metric: string) {
  let entry: { action: string; description: string; metadata: Record<string, unknown> } | undefined;
  await eventually(async () => {
    const logs = await server.request('GET', '/v0/logs?limit=100', { key });
    entry = logs.body.logs.find((l: { action: string; metadata?: { metric?: string } }) => l.action === 'usage.quota_reached' && l.metadata?.metric === metric);
    expect(entry).toBeDefined();
  });
  return entry!;
}

/** A buyer pays `url` twice; the third payment is refused (402) and the buyer is not charged for it. Returns the refusal. */
async function paidTwiceThenRefused(url: string): Promise<Response> {
  const buyer = await fundedBuyer('1');
  const pay = exactClient(buyer);
  for (let i = 0; i < 2; i++) expect((await pay(url)).status).toBe(200);
  const before = await usdcBalance(buyer.address);
  const refused = await pay(url);
  expect(refused.status).toBe(402);
  expect(await usdcBalance(buyer.address)).toBe(before);
  return refused;
}

describe('settlements', () => {
  it('through our middleware: the seller\'s plan allows 2 a month; the third payment is refused (402 quota_exceeded), the buyer is not charged; usage counts them by scheme and network', async () => {
    const seller = await setUpSeller(server);
    const url = await ourShop(seller);
    await putOnPlan(seller.orgId, seller.platformKey, 'SETTLE2');
    const refused = await paidTwiceThenRefused(url);
    expect(decodePaymentRequiredHeader(refused.headers.get('payment-required')!).error).toBe('quota_exceeded');
    expect(await refused.json()).toMatchObject({ error: 'quota_exceeded', message: expect.stringMatching(/^The SETTLE2 plan's quota of 2 settlements a month is reached \(2 used in \d{4}-\d{2}\); it resets at /) });
    const payments = (await server.request('GET', '/v0/payments', { key: seller.platformKey })).body.payments;
    expect(payments.map((p: { status: string }) => p.status)).toEqual(['settled', 'settled']);

    const usage = await usageOf(seller.platformKey);
    expect(usage).toMatchObject({ orgId: seller.orgId, month: monthOf(), plan: 'SETTLE2' });
    expect(usage.metrics.settlements).toEqual({ used: 2, quota: 2, remaining: 0 });
    expect(usage.settlements).toEqual([{ scheme: 'exact', network: 'base-sepolia', count: 2 }]);
    expect(usage.metrics.facilitatorCalls).toEqual({ used: 0, quota: null, remaining: null });
    const logged = await loggedRefusal(seller.platformKey, 'settlements');
    expect(logged.metadata).toMatchObject({ plan: 'SETTLE2', quota: 2, used: 2 });
    const metrics = await fetch(`${server.url}/metrics`, { headers: { authorization: 'Bearer usage-test-metrics' } }).then((r) => r.text());
    expect(metrics).toMatch(/agentgate_quota_refusals_total\{metric="settlements"\} [1-9]/);

    // Another org on the same plan has its own count.
    const other = await setUpSeller(server);
    const otherUrl = await ourShop(other);
    await putOnPlan(other.orgId, other.platformKey, 'SETTLE2');
    expect((await exactClient(await fundedBuyer('1'))(otherUrl)).status).toBe(200);
    expect((await usageOf(other.platformKey)).metrics.settlements.used).toBe(1);
  });

  it('through the standard facilitator API with an official seller: over the plan\'s settlements /verify answers isValid false (quota_exceeded) and nothing moves', async () => {
    const seller = await setUpSeller(server);
    const url = await officialShop(seller);
    await putOnPlan(seller.orgId, seller.platformKey, 'SETTLE2');
    const refused = await paidTwiceThenRefused(url);
    // The official seller passes our invalidReason on to its buyer.
    expect(decodePaymentRequiredHeader(refused.headers.get('payment-required')!).error).toContain('quota_exceeded');
    const usage = await usageOf(seller.sellerKey);
    expect(usage.metrics.settlements.used).toBe(2);
    // Two paid requests are a /verify and a /settle each, and the refused one a /verify.
    expect(usage.metrics.facilitatorCalls.used).toBe(5);
  });

  it('every scheme counts, by scheme and network: upto, an auth-capture capture, a channel deposit (one transaction each)', async () => {
    const seller = await setUpSeller(server);
    const upto = await ourShop(seller, { price: { upto: '$0.05' }, description: 'Completion' }, { maxPriceUsdc: '0.05' });
    expect((await wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, new UptoEvmScheme(await permit2ApprovedBuyer())).setSpendControls({ allowedAssets: limits() }))(upto)).status).toBe(200);
    const escrow = await ourShop(seller, { price: '$0.25', scheme: 'auth-capture', description: 'Quarterly report' }, { priceUsdc: '0.25' });
    expect((await wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, new AuthCaptureEvmScheme(await fundedBuyer('1'))).setSpendControls({ allowedAssets: limits() }))(escrow)).status).toBe(200);
    const channel = await ourShop(seller, { price: '$0.001', scheme: 'batch-settlement', description: 'Weather, per call' }, { priceUsdc: '0.001' });
    expect((await officialChannelClient(await fundedBuyer('1')).paying(channel)).status).toBe(200);
    await eventually(async () => expect((await usageOf(seller.platformKey)).settlements).toEqual(expect.arrayContaining([
      { scheme: 'upto', network: 'base-sepolia', count: 1 },
      { scheme: 'auth-capture', network: 'base-sepolia', count: 1 },
      { scheme: 'batch-settlement', network: 'base-sepolia', count: 1 },
    ])));
    expect((await usageOf(seller.platformKey)).metrics.settlements.used).toBe(3);
  });
});

describe('facilitator calls', () => {
  it('a plan of 4 calls: two paid requests (verify + settle each) use them; the next /verify is 429 quota_exceeded with Retry-After, and the official seller charges nothing', async () => {
    const seller = await setUpSeller(server);
    const url = await officialShop(seller);
    await putOnPlan(seller.orgId, seller.platformKey, 'CALLS4');
    const buyer = await fundedBuyer('1');
    const pay = exactClient(buyer);
    for (let i = 0; i < 2; i++) expect((await pay(url)).status).toBe(200);
    const before = await usdcBalance(buyer.address);

    const verify = await server.request('POST', '/v0/x402/verify', { key: seller.sellerKey, body: { x402Version: 2, paymentPayload: {}, paymentRequirements: {} } });
    expect(verify.status).toBe(429);
    expect(verify.body).toMatchObject({ error: 'quota_exceeded', status: 429, metric: 'facilitatorCalls', plan: 'CALLS4', quota: 4, used: 4 });
    expect(verify.body.message).toContain('quota of 4 facilitator calls a month is reached');
    const nextMonth = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth() + 1, 1));
    expect(verify.body.resetsAt).toBe(nextMonth.toISOString());
    expect(Number(verify.headers.get('retry-after'))).toBeGreaterThan(0);

    const refused = await pay(url);
    expect(refused.status).not.toBe(200);
    expect(await usdcBalance(buyer.address)).toBe(before);
    expect((await usageOf(seller.platformKey)).metrics.facilitatorCalls).toEqual({ used: 4, quota: 4, remaining: 0 });
  });
});

describe('mail and storage', () => {
  it('a plan of 1 mail sent and 1 received a month: the second send is 429 quota_exceeded and nothing is stored; a second inbound mail is refused at RCPT (452, mailbox full) and the sender retries later', async () => {
    const agent = await signUp(server);
    await putOnPlan(agent.org_id, agent.platform_key, 'MAIL1');
    const key = agent.identity.rawKey;
    const send = (subject: string) => server.request('POST', '/v0/messages/send', { key, body: { to: ['someone@elsewhere.example'], subject, text: 'hello' } });
    expect((await send('first')).status).toBe(201);
    const second = await send('second');
    expect(second.status).toBe(429);
    expect(second.body).toMatchObject({ error: 'quota_exceeded', metric: 'mailSent', quota: 1, used: 1 });
    const sent = await server.request('GET', '/v0/messages?labels=sent', { key });
    expect(sent.body.messages.map((m: { subject: string }) => m.subject)).toEqual(['first']);

    const smtp = smtpClient(server);
    await smtp.sendMail({ from: 'ada@outside.example', to: agent.identity.emailAddress, subject: 'in one', text: 'one' });
    const over = await smtp.sendMail({ from: 'ada@outside.example', to: agent.identity.emailAddress, subject: 'in two', text: 'two' }).then(() => null, (err: { responseCode?: number; response?: string }) => err);
    expect(over).toMatchObject({ responseCode: 452, response: expect.stringContaining('mailbox quota reached: mail received this month') });
    await eventually(async () => {
      const usage = await usageOf(agent.platform_key);
      expect([usage.metrics.mailSent.used, usage.metrics.mailReceived.used]).toEqual([1, 1]);
      // The bodies kept: 'hello' sent and 'one' received (with the line end SMTP gives it).
      expect(usage.metrics.storageBytes.used).toBeGreaterThanOrEqual('hello'.length + 'one'.length);
      expect(usage.metrics.storageBytes.used).toBeLessThanOrEqual('hello'.length + 'one\r\n'.length);
    });
  });

  it('storage: vault credentials count their sealed bytes against the plan\'s storage; one that would exceed it is 429 quota_exceeded; deleting one frees its bytes', async () => {
    const agent = await signUp(server);
    await putOnPlan(agent.org_id, agent.platform_key, 'MAIL1');
    const key = agent.identity.rawKey;
    const put = (name: string, size: number) => server.request('PUT', `/v0/vault/${name}`, { key, body: { type: 'API_KEY', data: { apiKey: 'k'.repeat(size) } } });
    expect((await put('first', 1_000)).status).toBe(201);
    const used = (await usageOf(agent.platform_key)).metrics.storageBytes.used;
    expect(used).toBeGreaterThan(1_000);
    expect(used).toBeLessThan(1_100);
    const refused = await put('second', 2_500);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error: 'quota_exceeded', metric: 'storageBytes', quota: 3_000 });
    expect(refused.body.message).toContain('storage quota of 3000 bytes would be exceeded');
    expect((await server.request('GET', '/v0/vault/second', { key })).status).toBe(404);
    expect((await server.request('DELETE', '/v0/vault/first', { key })).status).toBe(200);
    expect((await usageOf(agent.platform_key)).metrics.storageBytes.used).toBe(0);
    expect((await put('second', 2_500)).status).toBe(201);
  });
});

describe('seeing usage', () => {
  it('the API, the CSV export, the console and the CLI show the same numbers; identity keys and bad months are refused; an org sees only its own', async () => {
    const seller = await setUpSeller(server);
    const url = await ourShop(seller);
    expect((await exactClient(await fundedBuyer('1'))(url)).status).toBe(200);
    const month = monthOf();
    const usage = await usageOf(seller.platformKey);
    expect(usage).toMatchObject({ plan: 'FREE', metrics: { settlements: { used: 1, quota: null, remaining: null } } });

    const csv = await fetch(`${server.url}/v0/usage/export?from=2026-01&to=${month}`, { headers: { authorization: `Bearer ${seller.platformKey}` } });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const lines = (await csv.text()).trim().split('\r\n');
    expect(lines[0]).toBe('month,plan,metric,scheme,network,used,quota');
    expect(lines).toContain(`${month},FREE,settlements,,,1,`);
    expect(lines).toContain(`${month},FREE,settlements,exact,base-sepolia,1,`);
    expect(lines).toContain('2026-01,FREE,settlements,,,0,');

    expect((await server.request('GET', '/v0/usage?month=2026-13', { key: seller.platformKey })).body).toMatchObject({ error: 'validation_error', status: 400 });
    expect((await server.request('GET', '/v0/usage/export?from=2020-01&to=2026-01', { key: seller.platformKey })).status).toBe(400);
    expect((await server.request('GET', '/v0/usage/export?from=2026-05&to=2026-01', { key: seller.platformKey })).status).toBe(400);
    const identityKey = (await signUp(server)).identity.rawKey;
    expect((await server.request('GET', '/v0/usage', { key: identityKey })).status).toBe(403);
    const stranger = await signUp(server);
    expect((await usageOf(stranger.platform_key)).metrics.settlements.used).toBe(0);

    const session = await signIn(server, seller.platformKey);
    const page = await consoleGet(server, '/console/usage', session.cookie);
    expect(page.status).toBe(200);
    expect(page.text).toContain(`${month} (UTC), plan <strong>FREE</strong>`);
    expect(page.text).toMatch(/<code>exact<\/code><\/td><td data-label="Network"><code>base-sepolia<\/code><\/td><td data-label="Settlements">1<\/td>/);
    const consoleCsv = await consoleGet(server, '/console/usage.csv', session.cookie);
    expect(consoleCsv.text).toContain(`${month},FREE,settlements,exact,base-sepolia,1,`);

    const shown = await cli('show', seller.orgId);
    expect(shown.code).toBe(0);
    expect(shown.out).toContain(`${seller.orgId} in ${month}, plan FREE`);
    expect(shown.out).toContain('exact on base-sepolia: 1');
    expect((await cli('plans')).out).toContain('SETTLE2  settlements 2');
    expect(await cli('plan', 'org_nope', 'SETTLE2')).toEqual({ code: 1, out: 'no org org_nope' });
  });
});
