// Resolved keys, identity scopes and org roles are cached per process, yet a revocation, rotation, scope
// or role change made in one process is refused by every process without waiting for the caches to
// expire: each publishes the change on the change feed, which every process polls (CHANGE_FEED_POLL_MS,
// 250 ms). The caches here keep entries for a minute (AUTH_CACHE_TTL_MS=60000), so nothing but the feed
// can make them let go in time.
//
// "Within a second" is what the docs promise (one poll, ≤ 250 ms, plus a query); how fast it is on a given
// machine is a figure for the bench, not a pass/fail line here (a CPU-starved CI machine can take longer
// with nothing wrong). What is asserted is what only the feed can do: every process refuses the change
// within WITHIN_MS, far below the one minute the caches would otherwise keep it. The time each took is in
// the failure message.
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { processEnv, spawnAgentgate, type AgentgateProcess } from '../support/processes.js';

/** Far below the caches' minute (AUTH_CACHE_TTL_MS below), far above a poll on a loaded machine. */
const WITHIN_MS = 10_000;

let a: TestServer;
let b: TestServer;
let os: AgentgateProcess;

interface Process { name: string; get: (path: string, key: string) => Promise<number> }
let processes: Process[];

const getter = (url: string) => async (path: string, key: string) => (await fetch(url + path, { headers: { authorization: `Bearer ${key}` } })).status;

beforeAll(async () => {
  a = await startTestServer({ TRUST_PROXY: 'true', AUTH_CACHE_TTL_MS: '60000' });
  b = await startTestServer({ TRUST_PROXY: 'true', AUTH_CACHE_TTL_MS: '60000', MONGODB_DB: a.config.MONGODB_DB, MASTER_KEY: a.config.MASTER_KEY.toString('hex') });
  os = await spawnAgentgate('serve', processEnv(a.config));
  processes = [{ name: 'a (made the change)', get: getter(a.url) }, { name: 'b', get: getter(b.url) }, { name: 'serve process', get: getter(os.url!) }];
});
afterAll(async () => {
  await os?.stop();
  await b?.http.close();
  await b?.app.close();
  await a?.close();
});

/** Uses `key` on `path` in every process until each answers `status` (so each has it cached now). */
async function useEverywhere(path: string, key: string, status = 200): Promise<void> {
  for (const p of processes) for (let i = 0; i < 2; i++) expect({ process: p.name, status: await p.get(path, key) }).toEqual({ process: p.name, status });
}

/**
 * Milliseconds from `since` until each process first answers `refused` for `key` on `path`; polled
 * back-to-back. Gives up (and reports) a little after WITHIN_MS.
 */
async function timeToRefusal(path: string, key: string, refused: number, since: number): Promise<Record<string, number>> {
  const times = await Promise.all(processes.map(async (p) => {
    while (performance.now() - since < WITHIN_MS + 2_000) {
      if ((await p.get(path, key)) === refused) return [p.name, Math.round(performance.now() - since)] as const;
    }
    return [p.name, Infinity] as const;
  }));
  return Object.fromEntries(times);
}

function expectAllWithin(times: Record<string, number>) {
  for (const [name, ms] of Object.entries(times)) expect({ process: name, refusedInTime: ms <= WITHIN_MS, ms }).toMatchObject({ process: name, refusedInTime: true });
}

it('a revoked seller key is refused by every process without waiting for the cache to expire', async () => {
  const agent = await signUp(a);
  const created = await a.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: { name: 'shop' } });
  const sellerKey = created.body.apiKey as string;
  await useEverywhere('/v0/payments/acceptance', sellerKey);
  const revoked = await a.request('DELETE', `/v0/payments/seller-keys/${created.body.keyId}`, { key: agent.platform_key });
  const answeredAt = performance.now();
  expect(revoked.status).toBe(200);
  expectAllWithin(await timeToRefusal('/v0/payments/acceptance', sellerKey, 401, answeredAt));
});

it('a rotated identity key is refused by every process without waiting for the cache to expire; the new key works everywhere', async () => {
  const agent = await signUp(a);
  const old = agent.identity.rawKey;
  await useEverywhere('/v0/whoami', old);
  const rotated = await a.request('POST', `/v0/platform/identities/${agent.identity.identityId}/rotate-key`, { key: agent.platform_key });
  const answeredAt = performance.now();
  expect(rotated.status).toBe(200);
  expectAllWithin(await timeToRefusal('/v0/whoami', old, 401, answeredAt));
  await useEverywhere('/v0/whoami', rotated.body.rawKey);
});

it('a deleted identity\'s key is refused by every process without waiting for the cache to expire', async () => {
  const agent = await signUp(a);
  const key = agent.identity.rawKey;
  await useEverywhere('/v0/whoami', key);
  const deleted = await a.request('DELETE', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key });
  const answeredAt = performance.now();
  expect(deleted.status).toBe(200);
  expectAllWithin(await timeToRefusal('/v0/whoami', key, 401, answeredAt));
});

it('a removed scope is refused by every process without waiting for the cache to expire', async () => {
  const agent = await signUp(a);
  const key = agent.identity.rawKey;
  await useEverywhere('/v0/vault', key);
  const patched = await a.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['vault:read'] } });
  const answeredAt = performance.now();
  expect(patched.status).toBe(200);
  expectAllWithin(await timeToRefusal('/v0/vault', key, 403, answeredAt));
  // Other scopes of the same key still work everywhere.
  await useEverywhere('/v0/whoami', key);
});

it('an org made admin by one process (agentgate admin grant) is admin in the others without waiting for the cache to expire', async () => {
  const agent = await signUp(a);
  expect(await b.app.isAdmin(agent.org_id)).toBe(false); // cached as a member now
  await a.app.accounts.setRole(agent.org_id, 'admin');
  const changedAt = performance.now();
  while (!(await b.app.isAdmin(agent.org_id)) && performance.now() - changedAt < WITHIN_MS + 2_000) await new Promise((r) => setTimeout(r, 10));
  expect(Math.round(performance.now() - changedAt)).toBeLessThanOrEqual(WITHIN_MS);
});

it('counts every use of an identity although no request writes it, once the counts are flushed', async () => {
  const agent = await signUp(a);
  for (let i = 0; i < 5; i++) expect((await b.request('GET', '/v0/whoami', { key: agent.identity.rawKey })).status).toBe(200);
  await b.app.usage.flush();
  const view = await a.request('GET', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key });
  expect(view.body.usageCount).toBe(5);
});

it('requests arriving together on a key none of the caches holds yet cost one read of the key, the identity and the org', async () => {
  // When an entry expires under load, every request in flight misses at once: each used to send its own
  // identity and org read (50 clients, 50 + 50 reads every AUTH_CACHE_TTL_MS, queued in the bounded pool).
  const agent = await signUp(a);
  const reads: Record<string, number> = {};
  const count = (event: { commandName: string; command: Record<string, unknown> }) => {
    const collection = event.command[event.commandName];
    if (event.commandName === 'find' && typeof collection === 'string') reads[collection] = (reads[collection] ?? 0) + 1;
  };
  const client = b.app.db.getClient();
  client.on('commandStarted', count);
  try {
    const answers = await Promise.all(Array.from({ length: 30 }, () => b.request('GET', '/v0/whoami', { key: agent.identity.rawKey })));
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
  } finally {
    client.off('commandStarted', count);
  }
  expect({ api_keys: reads.api_keys, identities: reads.identities, orgs: reads.orgs }).toEqual({ api_keys: 1, identities: 1, orgs: 1 });
});
