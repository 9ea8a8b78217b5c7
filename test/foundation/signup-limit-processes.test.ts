// The signup limit (10 per minute per client IP) is one limit for every server process on a database,
// and exact under concurrency: a burst spread over several processes admits exactly 10, never 11, on
// FerretDB too (whose conditional writes are not atomic). Each round uses a new client address, so the
// rounds repeat the race rather than wait out the window.
import { RateLimiter } from '../../server/platform/rate-limit.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { processEnv, spawnAgentgate, type AgentgateProcess } from '../support/processes.js';

const ROUNDS = 5;
const BURST = 33;

let a: TestServer;
let b: TestServer;
let c: TestServer;

beforeAll(async () => {
  a = await startTestServer({ TRUST_PROXY: 'true' });
  [b, c] = await Promise.all([
    startTestServer({ TRUST_PROXY: 'true', MONGODB_DB: a.config.MONGODB_DB, MASTER_KEY: a.config.MASTER_KEY.toString('hex') }),
    startTestServer({ TRUST_PROXY: 'true', MONGODB_DB: a.config.MONGODB_DB, MASTER_KEY: a.config.MASTER_KEY.toString('hex') }),
  ]);
});
afterAll(async () => {
  // Only the first drops the shared database.
  for (const other of [c, b]) { await other?.http.close(); await other?.app.close(); }
  await a?.close();
});

let subnet = 0;
const freshIp = () => `203.0.113.${++subnet}`;

type Poster = (ip: string) => Promise<{ status: number; headers: Headers; body: any }>;
const poster = (url: string): Poster => async (ip) => {
  const response = await fetch(`${url}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': ip }, body: '{}' });
  return { status: response.status, headers: response.headers, body: await response.json() };
};

/** BURST concurrent signups from one address, spread round-robin over `targets`. */
async function burst(targets: Poster[], ip: string) {
  const results = await Promise.all(Array.from({ length: BURST }, (_, i) => targets[i % targets.length]!(ip)));
  const admitted = results.filter((r) => r.status === 201);
  const limited = results.filter((r) => r.status === 429);
  return { results, admitted, limited };
}

function expectExactlyTen(outcome: Awaited<ReturnType<typeof burst>>) {
  expect(outcome.results.map((r) => r.status).sort()).toEqual([...Array(10).fill(201), ...Array(BURST - 10).fill(429)]);
  expect(new Set(outcome.admitted.map((r) => r.body.org_id)).size).toBe(10);
  for (const refused of outcome.limited) {
    expect(refused.body).toMatchObject({ error: 'rate_limited', status: 429 });
    const retryAfter = Number(refused.headers.get('retry-after'));
    // The window (60 s) plus at most one step of the limiter (1 s).
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(61);
    expect(refused.body.retryAfter).toBe(retryAfter);
  }
}

it(`admits exactly 10 of ${BURST} concurrent signups from one IP spread over three server processes, ${ROUNDS} rounds; other IPs are served`, async () => {
  const targets = [a, b, c].map((s) => poster(s.url));
  for (let round = 0; round < ROUNDS; round++) {
    const ip = freshIp();
    expectExactlyTen(await burst(targets, ip));
    // Still full a moment later, from every process.
    for (const target of targets) expect((await target(ip)).status).toBe(429);
    // Another address is untouched by this one's burst.
    expect((await targets[round % 3]!(freshIp())).status).toBe(201);
  }
});

it('holds across real `agentgate serve` OS processes on the same database', async () => {
  const servers: AgentgateProcess[] = [];
  try {
    servers.push(...await Promise.all([0, 1].map(() => spawnAgentgate('serve', processEnv(a.config)))));
    const targets = [poster(a.url), ...servers.map((s) => poster(s.url!))];
    for (let round = 0; round < 2; round++) {
      expectExactlyTen(await burst(targets, freshIp()));
      expect((await targets[1]!(freshIp())).status).toBe(201);
    }
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
  }
});

describe('the limiter itself (three connections to one database)', () => {
  it('counts concurrent takes from several processes exactly, gates without taking, and frees a slot after the window', async () => {
    // One clock for the three, moving 2 ms at each reading: a burst crosses steps (50 ms here) as real ones
    // do, and ends well within the window however slow the machine (a take reads it at most 17 times:
    // three rounds of a read and up to four inserts, a last read, the sweep). In real time, a busy
    // machine's burst outlasted the window and rightly freed slots mid-burst.
    let now = Date.now();
    const clock = () => (now += 2);
    const limiters = [a, b, c].map((s) => new RateLimiter(s.app.db, clock));
    const bucket = `test:${Date.now()}`;
    const windowMs = 3_000;
    const outcomes = await Promise.allSettled(Array.from({ length: 24 }, (_, i) => limiters[i % 3]!.consume(bucket, 4, windowMs)));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(4);
    const refusal = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
    expect(refusal.reason).toMatchObject({ status: 429, code: 'rate_limited' });

    // The gate reports the full window from any process and takes nothing itself.
    for (const limiter of limiters) expect(await limiter.exhausted(bucket, 4, windowMs)).toMatchObject({ exhausted: true });
    expect(await limiters[0]!.exhausted(bucket, 5, windowMs)).toMatchObject({ exhausted: false });
    expect(await limiters[0]!.exhausted(bucket, 5, windowMs)).toMatchObject({ exhausted: false });
    await limiters[2]!.consume(bucket, 5, windowMs); // the fifth slot was still there: the gate took none
    expect(await limiters[0]!.exhausted(bucket, 5, windowMs)).toMatchObject({ exhausted: true });

    // After the window (and one step of it, 50 ms here) the slots are free again: exactly 4 once more.
    now += windowMs + 100;
    expect(await limiters[1]!.exhausted(bucket, 4, windowMs)).toMatchObject({ exhausted: false });
    const again = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => limiters[i % 3]!.consume(bucket, 4, windowMs)));
    expect(again.filter((o) => o.status === 'fulfilled')).toHaveLength(4);
  });
});
