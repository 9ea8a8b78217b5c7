// Request limits on one server as an operator sets them: the defaults from RATE_LIMIT_*, an org's own
// with `agentgate limits set`. Every limited answer carries RateLimit-Policy and RateLimit; over a limit
// it is 429 rate_limited with Retry-After and nothing else happens; another key, another org and the
// calls that finish a payment already taken are not affected. (Across processes: test/cluster/rate-limits.test.ts.)
import { runCli } from '../../server/cli/main.js';
import { signUp } from '../support/agents.js';
import { startTestServer, type TestServer } from '../support/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ RATE_LIMIT_PER_ANONYMOUS: '12', RATE_LIMIT_PER_KEY: '1000', RATE_LIMIT_PER_ORG: '1000' });
}, 60_000);
afterAll(async () => { await server?.close(); });

const cli = async (...argv: string[]) => {
  const lines: string[] = [];
  const c = server.config;
  const env = { AGENTGATE_MODE: 'dev', BASE_URL: c.BASE_URL, MAIL_DOMAIN: c.MAIL_DOMAIN, DID_DOMAIN: c.DID_DOMAIN, MASTER_KEY: c.MASTER_KEY.toString('hex'), MONGODB_URI: c.MONGODB_URI, MONGODB_DB: c.MONGODB_DB, LOG_LEVEL: 'silent', SMTP_PORT: '0' };
  const code = await runCli(['limits', ...argv], { out: (l) => lines.push(l), env });
  return { code, out: lines.join('\n') };
};

it('an org\'s own limit per key: requests count down in RateLimit, the one over it is 429 with Retry-After; another org is not affected; `limits clear` restores the default', async () => {
  const [limited, other] = [await signUp(server), await signUp(server)];
  expect(await cli('set', limited.org_id, '--per-key', '5')).toEqual({ code: 0, out: `${limited.org_id}: key 5, seller key default, org default (per 60 s)` });
  const answers = [];
  for (let i = 0; i < 7; i++) answers.push(await server.request('GET', '/v0/whoami', { key: limited.platform_key }));
  expect(answers.slice(0, 5).map((a) => [a.status, a.headers.get('ratelimit')])).toEqual([4, 3, 2, 1, 0].map((r) => [200, expect.stringMatching(new RegExp(`^"key";r=${r};t=\\d+$`))]));
  expect(answers[0]!.headers.get('ratelimit-policy')).toBe('"key";q=5;w=60, "org";q=1000;w=60');
  const refused = answers[5]!;
  expect(refused.status).toBe(429);
  expect(refused.body).toMatchObject({ error: 'rate_limited', status: 429, message: expect.stringContaining('5 per 60 s') });
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(60);
  expect(refused.headers.get('ratelimit')).toMatch(/^"key";r=0;t=\d+$/);
  // Nothing happened for the refused request: a POST over the limit creates nothing.
  const created = await server.request('POST', '/v0/payments/seller-keys', { key: limited.platform_key, body: {} });
  expect(created.status).toBe(429);
  expect((await server.request('GET', '/v0/whoami', { key: other.platform_key })).status).toBe(200);

  expect((await cli('list')).out).toContain(`${limited.org_id}  key 5, seller key default, org default`);
  expect((await cli('clear', limited.org_id)).code).toBe(0);
  // The cache of the org's limits lives AUTH_CACHE_TTL_MS (5 s by default): the command cleared this process's own copy only.
  let after = 0;
  for (let i = 0; i < 60 && after !== 200; i++) {
    after = (await server.request('GET', '/v0/whoami', { key: limited.platform_key })).status;
    if (after !== 200) await new Promise((r) => setTimeout(r, 200));
  }
  expect(after).toBe(200);
});

it('anonymous clients are limited by address (signing up included); a key that does not resolve counts as anonymous', async () => {
  const first = await server.request('GET', '/v0/x402/supported');
  expect(first.status).toBe(200);
  expect(first.headers.get('ratelimit-policy')).toBe('"anonymous";q=12;w=60');
  const left = Number(/r=(\d+)/.exec(first.headers.get('ratelimit')!)![1]);
  const statuses: number[] = [];
  for (let i = 0; i <= left; i++) statuses.push((await server.request('GET', '/v0/x402/supported', i % 2 ? { key: 'agp_not_a_real_key' } : {})).status);
  expect(statuses).toEqual([...Array(left).fill(200), 429]);
  const signup = await server.request('POST', '/v0/agent-signup', { body: {} });
  expect([signup.status, signup.body.error]).toEqual([429, 'rate_limited']);
});

it('the calls that finish a payment already taken are never refused by a limit', async () => {
  // The anonymous window of the test above is spent; /v0/x402/settle is still answered (401: no key), unlimited.
  const settle = await server.request('POST', '/v0/x402/settle', { body: {} });
  expect(settle.status).toBe(401);
  expect(settle.headers.get('ratelimit')).toBeNull();
});
