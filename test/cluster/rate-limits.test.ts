// Request limits and plan quotas across processes, as a deployment runs them: 2 `agentgate serve` on one
// database behind a plain round-robin balancer. One key's burst over its limit is refused with 429 and
// Retry-After once the deployment as a whole has admitted the limit (each process alone admitted about
// half of it); another org's key, used meanwhile, is not affected. An org's monthly quota holds the same
// way, and its usage counts each admitted call once.
import { generatePrivateKey } from 'viem/accounts';
import { Balancer, balancerProxy, startCluster, type Cluster } from '../support/cluster.js';
import { clusterServices, type ClusterServices } from '../support/cluster-services.js';

const LIMIT = 40;
const BURST = 120;
const CONCURRENCY = 8;

let services: ClusterServices;
let cluster: Cluster | undefined;
beforeAll(async () => { services = await clusterServices(); }, 20 * 60_000);
afterAll(async () => { await services?.stop(cluster); }, 5 * 60_000);

it(`2 serve behind a round-robin balancer: a key's burst of ${BURST} is admitted ${LIMIT} times across both (give or take the requests in flight), the rest 429 with Retry-After; another key is unaffected`, async () => {
  const { chain, mongo } = services;
  cluster = await startCluster({ mongoUri: mongo.uri, chain, serves: 2, workers: 0, pool: [generatePrivateKey()], env: { RATE_LIMIT_PER_KEY: String(LIMIT) } });
  const balancer = new Balancer(cluster.serves, { followReady: false });
  const backend = await balancerProxy(balancer);
  try {
    const signup = async () => (await (await fetch(`${backend.url}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { platform_key: string };
    const [busy, quiet] = [await signup(), await signup()];
    const whoami = async (key: string) => {
      const res = await fetch(`${backend.url}/v0/whoami`, { headers: { authorization: `Bearer ${key}` } });
      return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() as { error?: string } };
    };
    const answers: Array<Awaited<ReturnType<typeof whoami>>> = [];
    const quietAnswers: number[] = [];
    let next = 0;
    await Promise.all([
      ...Array.from({ length: CONCURRENCY }, async () => { while (next < BURST) { next++; answers.push(await whoami(busy.platform_key)); } }),
      (async () => { for (let i = 0; i < 10; i++) quietAnswers.push((await whoami(quiet.platform_key)).status); })(),
    ]);
    const admitted = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 429);
    // Each process alone would have admitted LIMIT: the deployment admitted LIMIT, plus at most the requests in flight when the last slots went.
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(admitted).toBeLessThanOrEqual(LIMIT + CONCURRENCY);
    expect(admitted + refused.length).toBe(BURST);
    expect(refused.every((a) => a.body.error === 'rate_limited' && Number(a.retryAfter) >= 1 && Number(a.retryAfter) <= 60)).toBe(true);
    expect(quietAnswers).toEqual(Array(10).fill(200));
    console.log(`rate limit across 2 processes: ${admitted} of ${BURST} admitted for a limit of ${LIMIT} (${CONCURRENCY} in flight at once), ${refused.length} refused; the other key ${quietAnswers.filter((s) => s === 200).length} of 10 admitted`);
  } finally {
    await backend.close();
    balancer.stop();
  }
});

const QUOTA = 40;

it(`the same 2 serve: an org's plan quota of ${QUOTA} facilitator calls a month, spent by a burst of ${BURST} across both, admits ${QUOTA} (give or take the calls in flight), refuses the rest 429 quota_exceeded, and counts exactly what it admitted`, async () => {
  const { chain, mongo } = services;
  await cluster?.stop();
  cluster = await startCluster({ mongoUri: mongo.uri, chain, serves: 2, workers: 0, pool: [generatePrivateKey()], env: { USAGE_PLANS: JSON.stringify({ FREE: { facilitatorCalls: QUOTA } }) } });
  const balancer = new Balancer(cluster.serves, { followReady: false });
  const backend = await balancerProxy(balancer);
  try {
    const call = async (method: string, path: string, key: string, body?: unknown) => {
      const res = await fetch(`${backend.url}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
      return { status: res.status, body: await res.json() as Record<string, any> };
    };
    const signup = async () => (await (await fetch(`${backend.url}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { platform_key: string };
    const sellerKey = async () => {
      const { platform_key: key } = await signup();
      expect((await call('PUT', '/v0/payments/acceptance', key, { enabled: true, payTo: '0x000000000000000000000000000000000000dEaD' })).status).toBe(200);
      return { platform: key, seller: (await call('POST', '/v0/payments/seller-keys', key, {})).body.apiKey as string };
    };
    const [busy, quiet] = [await sellerKey(), await sellerKey()];
    // A /verify is a facilitator call whatever it carries; these carry nothing valid (isValid: false).
    const verify = (key: string) => call('POST', '/v0/x402/verify', key, { x402Version: 2, paymentPayload: {}, paymentRequirements: {} });
    const answers: Array<Awaited<ReturnType<typeof verify>>> = [];
    let next = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => { while (next < BURST) { next++; answers.push(await verify(busy.seller)); } }));
    const admitted = answers.filter((a) => a.status !== 429).length;
    const refused = answers.filter((a) => a.status === 429);
    expect(admitted).toBeGreaterThanOrEqual(QUOTA);
    expect(admitted).toBeLessThanOrEqual(QUOTA + CONCURRENCY);
    expect(answers.filter((a) => a.status !== 429).every((a) => a.status === 200 && a.body.isValid === false)).toBe(true);
    expect(refused.every((a) => a.body.error === 'quota_exceeded' && a.body.metric === 'facilitatorCalls')).toBe(true);
    // Each process wrote its own counts: the org's usage is every call admitted, once.
    const usage = async (key: string) => (await call('GET', '/v0/usage', key)).body.metrics.facilitatorCalls;
    // Read through the balancer from either process, once the other has written its counts (each second).
    const settled = async (key: string, expected: number) => {
      let used = -1;
      for (let i = 0; i < 50 && used !== expected; i++) { used = (await usage(key)).used; if (used !== expected) await new Promise((r) => setTimeout(r, 100)); }
      return used;
    };
    const used = await settled(busy.platform, admitted);
    expect(used).toBe(admitted);
    expect((await verify(quiet.seller)).body.isValid).toBe(false);
    expect(await settled(quiet.platform, 1)).toBe(1);
    console.log(`quota across 2 processes: ${admitted} of ${BURST} facilitator calls admitted for a quota of ${QUOTA} (${CONCURRENCY} in flight at once), ${refused.length} refused, ${used} counted`);
  } finally {
    await backend.close();
    balancer.stop();
  }
});

const SEND_LIMIT = 20;
const SENDS = 60;

it(`the same 2 serve: an identity's burst of ${SENDS} sends over its mail send limit of ${SEND_LIMIT} is admitted ${SEND_LIMIT} times across both (give or take the sends in flight), the rest 429 mail_rate_limited with Retry-After; another identity of the org is not affected`, async () => {
  const { chain, mongo } = services;
  await cluster?.stop();
  cluster = await startCluster({ mongoUri: mongo.uri, chain, serves: 2, workers: 0, pool: [generatePrivateKey()], env: { MAIL_SEND_LIMIT_PER_IDENTITY: String(SEND_LIMIT) } });
  const balancer = new Balancer(cluster.serves, { followReady: false });
  const backend = await balancerProxy(balancer);
  try {
    const post = async (path: string, key: string, body: unknown) => {
      const res = await fetch(`${backend.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() as Record<string, any> };
    };
    const org = (await (await fetch(`${backend.url}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { platform_key: string; identity: { rawKey: string; emailAddress: string } };
    const colleagueKey = (await post('/v0/platform/identities', org.platform_key, { name: 'colleague' })).body.rawKey as string;
    const send = (key: string, i: number) => post('/v0/messages/send', key, { to: ['ada@example.org'], subject: `burst ${i}`, text: 'hello' });
    const answers: Array<Awaited<ReturnType<typeof send>>> = [];
    let next = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => { while (next < SENDS) { const i = next++; answers.push(await send(org.identity.rawKey, i)); } }));
    const admitted = answers.filter((a) => a.status === 201).length;
    const refused = answers.filter((a) => a.status === 429);
    expect(admitted).toBeGreaterThanOrEqual(SEND_LIMIT);
    expect(admitted).toBeLessThanOrEqual(SEND_LIMIT + CONCURRENCY);
    expect(admitted + refused.length).toBe(SENDS);
    expect(refused.every((a) => a.body.error === 'mail_rate_limited' && Number(a.retryAfter) >= 1 && Number(a.retryAfter) <= 3600)).toBe(true);
    // What was refused was not stored: the sender's mail holds exactly the admitted sends.
    const sent = await fetch(`${backend.url}/v0/messages?labels=sent&limit=100`, { headers: { authorization: `Bearer ${org.identity.rawKey}` } });
    expect(((await sent.json()) as { count: number }).count).toBe(admitted);
    expect((await send(colleagueKey, 0)).status).toBe(201);
    console.log(`mail send limit across 2 processes: ${admitted} of ${SENDS} sends admitted for a limit of ${SEND_LIMIT} (${CONCURRENCY} in flight at once), ${refused.length} refused 429`);
  } finally {
    await backend.close();
    balancer.stop();
  }
});
