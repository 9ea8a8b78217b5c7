// The console's security model over plain HTTP (no browser): the session cookie, CSRF and origin checks,
// the sign-in limiter, the read-only seller session, org isolation, revocation, and bad input as 4xx pages.
import { createHash } from 'node:crypto';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { pay, sellerWithWebhook, type WebhookSeller } from '../webhooks/seller.js';
import { startReceiver } from '../webhooks/receiver.js';
import fc from 'fast-check';
import { consoleRoutes } from '../../server/console/routes.js';
import { consoleGet, consolePost, csrfIn, freshIp, signIn } from './http-client.js';

let server: TestServer;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let seller: WebhookSeller;
let paymentId: string;

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  receiver = await startReceiver();
  seller = await sellerWithWebhook(server, receiver.url);
  paymentId = await pay(server, seller);
}, 120_000);
afterAll(async () => {
  await receiver?.close();
  await server?.close();
});

describe('sign-in and the session cookie', () => {
  it('sets an HttpOnly, SameSite=Strict cookie on /console holding a random token whose hash alone is stored', async () => {
    const session = await signIn(server, seller.platformKey);
    const attributes = session.setCookie.toLowerCase();
    expect(attributes).toContain('httponly');
    expect(attributes).toContain('samesite=strict');
    expect(attributes).toContain('path=/console');
    expect(attributes).not.toContain('secure'); // plain http here
    expect(session.setCookie).not.toContain(seller.platformKey);
    const token = decodeURIComponent(session.cookie.split('=')[1]!);
    const stored = await server.app.db.collection('console_sessions').find({}).toArray();
    expect(stored.some((s) => s.tokenHash === createHash('sha256').update(token).digest('hex'))).toBe(true);
    expect(JSON.stringify(stored)).not.toContain(token);
    expect(JSON.stringify(stored)).not.toContain(seller.platformKey);
    const mine = stored.find((s) => s.tokenHash === createHash('sha256').update(token).digest('hex'))!;
    expect(mine.expiresAt.getTime() - mine.createdAt.getTime()).toBe(12 * 60 * 60 * 1000);
    // The page itself never carries the key.
    const page = await consoleGet(server, '/console/payments', session.cookie);
    expect(page.status).toBe(200);
    expect(page.text).not.toContain(seller.platformKey);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
  });

  it('marks the cookie Secure when the request came over https (X-Forwarded-Proto, TRUST_PROXY on)', async () => {
    const https = new URL(server.url);
    const res = await consolePost(server, '/console/sign-in', { key: seller.platformKey }, { origin: `https://${https.host}`, headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': freshIp() } });
    expect(res.status).toBe(303);
    expect(res.headers.getSetCookie().join('\n').toLowerCase()).toMatch(/agentgate_console=.*; secure/);
  });

  it('sign-out deletes the session: the old cookie is sent to the sign-in form afterwards', async () => {
    const session = await signIn(server, seller.platformKey);
    // Signed in, the list's live refresh answers (it shares /console/payments/ with the pages of payments
    // and channel calls, which must not take it for an id).
    expect((await consoleGet(server, '/console/payments/rows', session.cookie, { 'x-console-live': '1' })).status).toBe(200);
    const out = await consolePost(server, '/console/sign-out', { _csrf: session.csrf }, { cookie: session.cookie });
    expect(out.status).toBe(303);
    expect(out.location).toBe('/console/sign-in?signedOut=1');
    const after = await consoleGet(server, '/console/payments', session.cookie);
    expect(after.status).toBe(303);
    expect(after.location).toBe('/console/sign-in');
    const live = await consoleGet(server, '/console/payments/rows', session.cookie, { 'x-console-live': '1' });
    expect(live.status).toBe(401);
  });

  it('refuses an identity key and a wrong key with the form again', async () => {
    const agent = await signUp(server);
    const identity = await consolePost(server, '/console/sign-in', { key: agent.identity.rawKey }, { headers: { 'x-forwarded-for': freshIp() } });
    expect(identity.status).toBe(403);
    expect(identity.text).toContain('Platform key');
    const wrong = await consolePost(server, '/console/sign-in', { key: 'agp_not-a-real-key' }, { headers: { 'x-forwarded-for': freshIp() } });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain('That key is not valid');
  });
});

describe('forged requests', () => {
  it('refuses a post without the session CSRF token, or with another one', async () => {
    const session = await signIn(server, seller.platformKey);
    const other = await signIn(server, seller.platformKey);
    const missing = await consolePost(server, '/console/seller-keys', { name: 'forged' }, { cookie: session.cookie });
    expect(missing.status).toBe(403);
    expect(missing.text).toContain('CSRF');
    const foreign = await consolePost(server, '/console/seller-keys', { name: 'forged', _csrf: other.csrf }, { cookie: session.cookie });
    expect(foreign.status).toBe(403);
    const keys = await server.request('GET', '/v0/payments/seller-keys', { key: seller.platformKey });
    expect(keys.body.keys.filter((k: { name: string }) => k.name === 'forged')).toEqual([]);
    const genuine = await consolePost(server, '/console/seller-keys', { name: 'genuine', _csrf: session.csrf }, { cookie: session.cookie });
    expect(genuine.status).toBe(201);
    expect(genuine.text).toMatch(/data-secret>loid-[A-Za-z0-9_-]{43}</);
  });

  it('refuses a cross-origin post, and a post that names no origin at all, even with the right token', async () => {
    const session = await signIn(server, seller.platformKey);
    const cross = await consolePost(server, '/console/seller-keys', { name: 'cross', _csrf: session.csrf }, { cookie: session.cookie, origin: 'http://evil.example' });
    expect(cross.status).toBe(403);
    expect(cross.text).toContain('not posted from the console');
    const none = await consolePost(server, '/console/seller-keys', { name: 'cross', _csrf: session.csrf }, { cookie: session.cookie, origin: null });
    expect(none.status).toBe(403);
    const signInCross = await consolePost(server, '/console/sign-in', { key: seller.platformKey }, { origin: 'http://evil.example', headers: { 'x-forwarded-for': freshIp() } });
    expect(signInCross.status).toBe(403);
    expect(signInCross.headers.getSetCookie()).toEqual([]);
  });
});

it('rate-limits wrong keys per client address: the 11th attempt within 15 minutes gets a 429 page, even with the right key', async () => {
  const ip = freshIp();
  for (let i = 0; i < 10; i++) {
    const res = await consolePost(server, '/console/sign-in', { key: `agp_wrong${i}` }, { headers: { 'x-forwarded-for': ip } });
    expect(res.status).toBe(401);
  }
  const limited = await consolePost(server, '/console/sign-in', { key: seller.platformKey }, { headers: { 'x-forwarded-for': ip } });
  expect(limited.status).toBe(429);
  expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(800);
  expect(limited.text).toContain('Too many wrong keys');
  expect(limited.headers.getSetCookie()).toEqual([]);
  // Another address is not affected.
  await expect(signIn(server, seller.platformKey)).resolves.toMatchObject({ csrf: expect.any(String) });
});

describe('a seller-key session is read-only', () => {
  it('shows payments and endpoints without actions, and refuses every action with 403', async () => {
    const session = await signIn(server, seller.sellerKey);
    const list = await consoleGet(server, '/console/payments', session.cookie);
    expect(list.status).toBe(200);
    expect(list.text).toContain(paymentId);
    const detail = await consoleGet(server, `/console/payments/${paymentId}`, session.cookie);
    expect(detail.status).toBe(200);
    expect(detail.text).not.toContain('Retry now');
    expect(detail.text).not.toContain('/retry"');
    const webhooks = await consoleGet(server, '/console/webhooks', session.cookie);
    expect(webhooks.status).toBe(200);
    expect(webhooks.text).toContain(paymentId);
    expect(webhooks.text).not.toContain('/retry"');

    const endpoints = await consoleGet(server, '/console/endpoints', session.cookie);
    expect(endpoints.status).toBe(200);
    expect(endpoints.text).not.toContain('Register an endpoint');
    expect(endpoints.text).not.toContain('>Edit<');
    expect(endpoints.text).not.toContain('/delete"');
    expect((await consoleGet(server, '/console/seller-keys', session.cookie)).status).toBe(403);
    // The confirmation pages of the destructive actions are refused too.
    expect((await consoleGet(server, `/console/endpoints/${seller.endpointId}/delete`, session.cookie)).status).toBe(403);
    const delivery = (await server.request('GET', `/v0/webhooks/deliveries?endpointId=${seller.endpointId}`, { key: seller.sellerKey })).body.deliveries[0];
    const keyId = (await server.request('GET', '/v0/payments/seller-keys', { key: seller.platformKey })).body.keys[0].keyId;
    const actions: Array<[string, Record<string, string>]> = [
      ['/console/endpoints', { url: 'https://api.example.com/x', priceUsdc: '0.02' }],
      [`/console/endpoints/${seller.endpointId}`, { priceUsdc: '5' }],
      ['/console/seller-keys', { name: 'nope' }],
      [`/console/seller-keys/${keyId}/revoke`, {}],
      [`/console/deliveries/${delivery.id}/retry`, {}],
      [`/console/endpoints/${seller.endpointId}/delete`, {}],
    ];
    for (const [path, form] of actions) {
      const res = await consolePost(server, path, { ...form, _csrf: session.csrf }, { cookie: session.cookie });
      expect([path, res.status]).toEqual([path, 403]);
      expect(res.text).toContain('read-only');
    }
    const endpoint = await server.request('GET', `/v0/payments/endpoints/${seller.endpointId}`, { key: seller.platformKey });
    expect(endpoint.body.priceUsdc).toBe('0.01');
    expect((await consoleGet(server, `/console/seller-keys/${keyId}/revoke`, session.cookie)).status).toBe(403);
  });
});

it("another org's payment, delivery and endpoint are 404 pages", async () => {
  const other = await signUp(server);
  const session = await signIn(server, other.platform_key);
  const list = await consoleGet(server, '/console/payments', session.cookie);
  expect(list.text).not.toContain(paymentId);
  expect((await consoleGet(server, `/console/payments/${paymentId}`, session.cookie)).status).toBe(404);
  expect((await consoleGet(server, `/console/payments/${paymentId}/delivery`, session.cookie)).status).toBe(404);
  expect((await consoleGet(server, `/console/endpoints/${seller.endpointId}/edit`, session.cookie)).status).toBe(404);
  const delivery = (await server.request('GET', `/v0/webhooks/deliveries?endpointId=${seller.endpointId}`, { key: seller.sellerKey })).body.deliveries[0];
  const retry = await consolePost(server, `/console/deliveries/${delivery.id}/retry`, { _csrf: session.csrf }, { cookie: session.cookie });
  expect(retry.status).toBe(404);
  expect(retry.headers.get('content-type')).toContain('text/html');
});

it('revoking the key a session came from ends that session', async () => {
  const created = await server.request('POST', '/v0/payments/seller-keys', { key: seller.platformKey, body: { name: 'to revoke' } });
  const session = await signIn(server, created.body.apiKey);
  expect((await consoleGet(server, '/console/payments', session.cookie)).status).toBe(200);
  const revoked = await server.request('DELETE', `/v0/payments/seller-keys/${created.body.keyId}`, { key: seller.platformKey });
  expect(revoked.status).toBe(200);
  const after = await consoleGet(server, '/console/payments', session.cookie);
  expect(after.status).toBe(303);
  expect(after.location).toBe('/console/sign-in');
  expect(await server.app.db.collection('console_sessions').countDocuments({ keyId: created.body.keyId })).toBe(0);
});

it('answers bad input with a 4xx page that names the field, never a 500', async () => {
  const session = await signIn(server, seller.platformKey);
  // A filter a person can fix is refused on the form itself (the field marked, its message under it).
  const cases: Array<[string, number, string]> = [
    ['/console/payments?status=bogus', 400, 'aria-describedby="err-status"'],
    ['/console/payments?payer=0x12', 400, 'id="err-payer">must be a 0x-prefixed address'],
    ['/console/payments?from=2024-02-31', 400, 'id="err-from">is not a calendar date'],
    ['/console/payments?from=2024-03-02&to=2024-03-01', 400, 'id="err-to">must not be before'],
    ['/console/payments?page=0', 400, '<strong>Page</strong> Too small'],
    ['/console/payments?q=hello', 400, 'id="err-q">enter a payment id'],
    ['/console/webhooks?state=lost', 400, 'id="err-state"'],
    ['/console/webhooks?from=2024-03-02&to=2024-03-01', 400, 'id="err-to">must not be before'],
    ['/console/activity?page=-1', 400, 'query.page'],
    ['/console/payments.csv?from=2024-03-02&to=2024-03-01', 400, 'query.to'],
    ['/console/payments/Not-An-Id', 400, 'params.id'],
    ['/console/payments/pay_doesnotexist', 404, 'Payment not found'],
    ['/console/no-such-page', 404, 'no console page'],
  ];
  for (const [path, status, text] of cases) {
    const res = await consoleGet(server, path, session.cookie);
    expect([path, res.status]).toEqual([path, status]);
    expect(res.text).toContain(text);
    expect(res.headers.get('content-type')).toContain('text/html');
  }
  const badPrice = await consolePost(server, '/console/endpoints', { url: 'https://api.example.com/y', priceUsdc: 'free', _csrf: session.csrf }, { cookie: session.cookie });
  expect(badPrice.status).toBe(400);
  expect(badPrice.text).toContain('priceUsdc');
  const json = await fetch(`${server.url}/console/seller-keys`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/json', origin: server.url, cookie: session.cookie }, body: '{}' });
  expect(json.status).toBe(415);
  // The filters work: the seller's payer finds the payment, another payer does not.
  const payment = await server.request('GET', `/v0/payments/${paymentId}`, { key: seller.sellerKey });
  expect((await consoleGet(server, `/console/payments?payer=${payment.body.payerAddress.toLowerCase()}&status=settled`, session.cookie)).text).toContain(paymentId);
  expect((await consoleGet(server, '/console/payments?payer=0x000000000000000000000000000000000000dEaD', session.cookie)).text).not.toContain(paymentId);
  expect((await consoleGet(server, '/console/payments?to=2001-01-01', session.cookie)).text).not.toContain(paymentId);
  expect(csrfIn(badPrice.text)).toBe(session.csrf);
});

describe('hostile input on every console route (the console is left out of test/platform/hostile-routes)', () => {
  const hostile = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.constantFrom('%', '%zz', '%00', '%2F..%2F', '../../etc', '<script>alert(1)</script>', 'pay_' + 'a'.repeat(80), '0x' + 'f'.repeat(40), '2024-13-40', '-1', '1e309'),
  );
  const encode = (text: string) => encodeURIComponent(text.replace(/[\uD800-\uDFFF]/g, '?'));

  it('answers hostile paths, queries and forms with a 2xx, 3xx or 4xx HTML page, never a 5xx, and escapes what it echoes', async () => {
    const session = await signIn(server, seller.platformKey);
    const routes = (consoleRoutes(server.app) as unknown as { stack: Array<{ path: string; methods: string[] }> }).stack
      .flatMap((layer) => layer.methods.filter((m) => m === 'GET' || m === 'POST').map((m) => `${m} ${layer.path}`))
      // Signing out would end the session the rest of the run needs (sign-out has its own test above).
      .filter((route) => route !== 'POST /console/sign-out');
    expect(routes.length).toBeGreaterThan(12);
    await fc.assert(fc.asyncProperty(fc.constantFrom(...routes), hostile, hostile, hostile, async (route, a, b, c) => {
      const [method, pattern] = route.split(' ') as [string, string];
      const path = pattern.replace(/:\w+|\{\/?\*\w+\}/g, () => encode(a)).replace(/\/$/, '') || '/console';
      const query = `?status=${encode(b)}&payer=${encode(c)}&from=${encode(a)}&to=${encode(b)}&q=${encode(c)}&page=${encode(a)}&state=${encode(b)}&payment=${encode(c)}`;
      const res = method === 'GET'
        ? await consoleGet(server, path + query, session.cookie)
        : await consolePost(server, path, { _csrf: session.csrf, key: a, url: b, priceUsdc: c, webhookUrl: a, name: b, description: c, back: a }, { cookie: session.cookie });
      if (res.status >= 500) throw new Error(`${method} ${path} answered ${res.status}: ${res.text.slice(0, 300)}`);
      expect(res.text).not.toContain('<script>alert(1)</script>');
    }), { numRuns: 150, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31) });
  }, 120_000);
});
