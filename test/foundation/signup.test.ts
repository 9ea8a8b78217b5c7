import { readFileSync } from 'node:fs';
import { startTestServer, type TestServer } from '../support/server.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

// With TRUST_PROXY each test signs up from its own client address, so the per-IP limit is per test.
let ipCounter = 1;
const nextIp = () => ({ 'x-forwarded-for': `198.51.100.${ipCounter++}` });

describe('POST /v0/agent-signup', () => {
  it('creates user, org, platform key and a first identity with the documented shapes', async () => {
    const res = await server.request('POST', '/v0/agent-signup', { body: {}, headers: nextIp() });
    expect(res.status).toBe(201);
    const b = res.body;
    expect(b.user_id).toMatch(/^user_[a-z0-9]+$/);
    expect(b.org_id).toMatch(/^org_[a-z0-9]+$/);
    expect(b.platform_key).toMatch(/^agp_[A-Za-z0-9_-]{43}$/);
    expect(b.agent_card_url).toBe(`${server.config.BASE_URL}/.well-known/agents/${b.org_id}`);
    expect(b.identity.identityId).toMatch(/^id-[0-9a-f]{16}$/);
    expect(b.identity.name).toMatch(/^[a-z]+-[a-z]+-[a-z]+$/);
    expect(b.identity.emailAddress).toMatch(/^[a-z]+-[a-z]+-[a-z]+-[a-z0-9]{5}@agents\.test$/);
    expect(b.identity.emailAddress.startsWith(`${b.identity.name}-`)).toBe(true);
    expect(b.user_email).toBe(b.identity.emailAddress);
    expect(b.identity.rawKey).toMatch(/^agi_[A-Za-z0-9_-]{43}$/);
    expect(b.identity.rawKey.startsWith(b.identity.apiKeyPrefix)).toBe(true);
    expect(b.identity.rawKey).not.toBe(b.platform_key);
    expect(b.identity.scopes).toEqual(expect.arrayContaining([
      'mail:read', 'mail:send', 'mail:manage', 'vault:read', 'vault:write', 'payments:spend',
      'chat:read', 'chat:send', 'calendar:read', 'calendar:write', 'identity:sign',
    ]));
  });

  it('stores keys only as hashes', async () => {
    const res = await server.request('POST', '/v0/agent-signup', { body: {}, headers: nextIp() });
    const raw = JSON.stringify(await server.app.db.collection('api_keys').find({ orgId: res.body.org_id }).toArray());
    expect(raw).not.toContain(res.body.platform_key);
    expect(raw).not.toContain(res.body.identity.rawKey);
    expect(raw).not.toContain(res.body.platform_key.slice(4));
  });

  it('accepts no body at all, but refuses unknown fields, wrong types and malformed JSON', async () => {
    const ip = nextIp();
    expect((await server.request('POST', '/v0/agent-signup', { headers: ip })).status).toBe(201);
    const extra = await server.request('POST', '/v0/agent-signup', { body: { admin: true }, headers: ip });
    expect(extra.status).toBe(400);
    expect(extra.body).toMatchObject({ error: 'validation_error', status: 400 });
    expect(extra.body.message).toContain('body');
    const array = await server.request('POST', '/v0/agent-signup', { body: [1], headers: ip });
    expect(array.status).toBe(400);
    const malformed = await server.request('POST', '/v0/agent-signup', { rawBody: '{"a":', headers: ip });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ error: 'invalid_json', message: 'Request body is not valid JSON', status: 400 });
  });

  it('answers 413 for a body over the limit and 415 for a non-JSON body', async () => {
    const big = await server.request('POST', '/v0/agent-signup', { rawBody: JSON.stringify({ pad: 'x'.repeat(2 * 1024 * 1024) }), headers: nextIp() });
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({ error: 'payload_too_large', status: 413 });
    const form = await server.request('POST', '/v0/agent-signup', { rawBody: 'a=b', headers: { ...nextIp(), 'content-type': 'application/x-www-form-urlencoded' } });
    expect(form.status).toBe(415);
  });

  it('limits signups to 10 per minute per client IP, while another IP is served', async () => {
    const ip = nextIp();
    for (let i = 0; i < 10; i++) {
      const ok = await server.request('POST', '/v0/agent-signup', { body: {}, headers: ip });
      expect(ok.status).toBe(201);
    }
    const limited = await server.request('POST', '/v0/agent-signup', { body: {}, headers: ip });
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ error: 'rate_limited', status: 429 });
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    // A slot is held for the window and up to one step (1 s) more: see server/platform/rate-limit.ts.
    expect(retryAfter).toBeLessThanOrEqual(61);
    const other = await server.request('POST', '/v0/agent-signup', { body: {}, headers: nextIp() });
    expect(other.status).toBe(201);
  });

  it('shares the limit between server processes through the database', async () => {
    const second = await startTestServer({ TRUST_PROXY: 'true', MONGODB_DB: server.config.MONGODB_DB });
    try {
      const ip = nextIp();
      for (let i = 0; i < 10; i++) {
        const target = i % 2 === 0 ? server : second;
        expect((await target.request('POST', '/v0/agent-signup', { body: {}, headers: ip })).status).toBe(201);
      }
      expect((await second.request('POST', '/v0/agent-signup', { body: {}, headers: ip })).status).toBe(429);
      expect((await server.request('POST', '/v0/agent-signup', { body: {}, headers: ip })).status).toBe(429);
    } finally {
      await second.http.close();
      await second.app.close();
    }
  });

  it('gives 20 concurrent signups distinct ids and inbox addresses', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) =>
      server.request('POST', '/v0/agent-signup', { body: {}, headers: { 'x-forwarded-for': `203.0.113.${i + 1}` } })));
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(201));
    const distinct = (f: (b: any) => string) => new Set(results.map((r) => f(r.body))).size;
    expect(distinct((b) => b.org_id)).toBe(20);
    expect(distinct((b) => b.user_id)).toBe(20);
    expect(distinct((b) => b.identity.identityId)).toBe(20);
    expect(distinct((b) => b.identity.emailAddress)).toBe(20);
  });

  it('serves the CLI instructions and identity types without auth', async () => {
    const cli = await server.request('GET', '/v0/agent-signup/cli');
    expect(cli.status).toBe(200);
    expect(cli.headers.get('content-type')).toContain('text/plain');
    // The name the CLI text installs is this package's own, not the unrelated `agentgate` on npm.
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { name: string; bin: Record<string, string> };
    expect(pkg.name).not.toBe('agentgate');
    expect(cli.text).toContain(`npm install -g ${pkg.name}`);
    expect(Object.keys(pkg.bin)).toEqual(['agentgate']);
    expect(cli.text).toContain('agentgate login --key <identity_key> --org <org_id>');
    const types = await server.request('GET', '/v0/identity-types');
    const capabilities = types.body.identityTypes[0].provides.map((p: any) => p.capability);
    expect(capabilities).toEqual(expect.arrayContaining(['mail', 'vault', 'calendar', 'payments', 'wallet', 'did']));
  });
});

describe('trust of forwarded addresses', () => {
  it('ignores X-Forwarded-For unless TRUST_PROXY is set', async () => {
    const direct = await startTestServer();
    try {
      for (let i = 0; i < 10; i++) {
        const r = await direct.request('POST', '/v0/agent-signup', { body: {}, headers: { 'x-forwarded-for': `192.0.2.${i + 1}` } });
        expect(r.status).toBe(201);
      }
      // Every request came from 127.0.0.1 whatever the header claimed, so the 11th is limited.
      const r = await direct.request('POST', '/v0/agent-signup', { body: {}, headers: { 'x-forwarded-for': '192.0.2.200' } });
      expect(r.status).toBe(429);
    } finally {
      await direct.close();
    }
  });
});
