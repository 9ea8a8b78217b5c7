// Resolved keys and identity scopes are cached per process (AUTH_CACHE_TTL_MS): a revocation, rotation
// or scope change applies at once in the process that made it, and within the TTL in every other one.
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';

let a: TestServer;
let b: TestServer;

beforeAll(async () => {
  a = await startTestServer({ TRUST_PROXY: 'true', AUTH_CACHE_TTL_MS: '300' });
  b = await startTestServer({ TRUST_PROXY: 'true', AUTH_CACHE_TTL_MS: '300', MONGODB_DB: a.config.MONGODB_DB });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const whoami = (server: TestServer, key: string) => server.request('GET', '/v0/whoami', { key });

/** Polls until `check` holds; the bound is generous, what is asserted is the eventual outcome. */
async function eventually(check: () => Promise<boolean>, limitMs = 15_000): Promise<boolean> {
  const until = Date.now() + limitMs;
  while (Date.now() < until) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

it('a rotated key is refused at once where it was rotated, and soon in the other process', async () => {
  const agent = await signUp(a);
  const old = agent.identity.rawKey;
  expect((await whoami(a, old)).status).toBe(200);
  expect((await whoami(b, old)).status).toBe(200); // both processes have it cached now
  const rotated = await a.request('POST', `/v0/platform/identities/${agent.identity.identityId}/rotate-key`, { key: agent.platform_key });
  expect(rotated.status).toBe(200);
  expect((await whoami(a, old)).status).toBe(401);
  expect((await whoami(a, rotated.body.rawKey)).status).toBe(200);
  expect(await eventually(async () => (await whoami(b, old)).status === 401)).toBe(true);
  expect((await whoami(b, rotated.body.rawKey)).status).toBe(200);
});

it('a removed scope is refused at once where it was removed, and soon in the other process', async () => {
  const agent = await signUp(a);
  const key = agent.identity.rawKey;
  expect((await a.request('GET', '/v0/vault', { key })).status).toBe(200);
  expect((await b.request('GET', '/v0/vault', { key })).status).toBe(200);
  const patched = await a.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['vault:read'] } });
  expect(patched.status).toBe(200);
  expect((await a.request('GET', '/v0/vault', { key })).status).toBe(403);
  expect(await eventually(async () => (await b.request('GET', '/v0/vault', { key })).status === 403)).toBe(true);
});

it('a revoked identity is refused at once, and soon in the other process; usage counts survive the cache', async () => {
  const agent = await signUp(a);
  const key = agent.identity.rawKey;
  for (let i = 0; i < 3; i++) expect((await whoami(b, key)).status).toBe(200);
  const revoked = await a.request('DELETE', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key });
  expect(revoked.status).toBe(200);
  expect((await whoami(a, key)).status).toBe(401);
  expect(await eventually(async () => (await whoami(b, key)).status === 401)).toBe(true);
});

it('counts every use of an identity although no request writes it, once the counts are flushed', async () => {
  const agent = await signUp(a);
  for (let i = 0; i < 5; i++) expect((await whoami(b, agent.identity.rawKey)).status).toBe(200);
  await b.app.usage.flush();
  const view = await a.request('GET', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key });
  expect(view.body.usageCount).toBe(5);
});
