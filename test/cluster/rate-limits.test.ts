// Request limits across processes, as a deployment runs them: 2 `agentgate serve` on one database behind
// a plain round-robin balancer. One key's burst over its limit is refused with 429 and Retry-After once
// the deployment as a whole has admitted the limit (each process alone admitted about half of it);
// another org's key, used meanwhile, is not affected.
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
