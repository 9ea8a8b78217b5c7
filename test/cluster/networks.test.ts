// One deployment settling on three networks at once, as an operator runs it: 2 `agentgate serve` OS
// processes in production mode on one database, both given the same relayer pool (one key serves every
// network), NETWORKS=base-sepolia,polygon-amoy,arbitrum-sepolia, each network an anvil with its real chain
// id, its token under that network's EIP-712 name and 1 s blocks, behind a plain round-robin balancer that
// does not look at /ready. Buyers pay an official @x402/express seller that offers all three networks, on
// all three at once, arriving at arbitrary moments. Meanwhile Polygon Amoy's RPC is taken away for 20 s
// (connections refused). Its buyers get a retryable answer (503, or settlement_pending) or wait, and try
// again with the same payment-identifier; each Amoy payment settles once the node is back, never twice.
// Base Sepolia's and Arbitrum Sepolia's buyers see nothing of it: every one paid at the first attempt.
import { createPublicClient, http, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { MongoClient } from 'mongodb';
import { DEV_BUYERS } from '../../server/dev/chain/dev-accounts.js';
import { DEV_NETWORKS, startDevChain, type DevChain } from '../../server/dev/chain/dev-chain.js';
import { provideMongoServer, type MongoServer } from '../../server/dev/database/mongo-server.js';
import { audit, Balancer, clusterSeller, eventually, preparePayments, runLoad, startCluster, type Answer, type Cluster, type Seller } from '../support/cluster.js';
import { startRpcProxy, type RpcProxy } from '../support/rpc-proxy.js';
import { takeMachine } from '../support/machine-share.js';

const PER_NETWORK = Number(process.env.CLUSTER_NETWORK_PAYMENTS ?? 90);
const CONCURRENCY = 8;
const OUTAGE_MS = 20_000;
const [BASE, AMOY, ARBITRUM] = DEV_NETWORKS as [typeof DEV_NETWORKS[0], typeof DEV_NETWORKS[0], typeof DEV_NETWORKS[0]];

let releaseMachine: (() => void) | undefined;
let chains: DevChain[] = [];
let mongo: MongoServer | undefined;
let amoyRpc: RpcProxy | undefined;
let cluster: Cluster | undefined;

beforeAll(async () => {
  releaseMachine = await takeMachine();
  [mongo, ...chains] = await Promise.all([
    provideMongoServer({ env: { ...process.env, MONGODB_URI: '' } }),
    ...DEV_NETWORKS.map((network) => startDevChain({ network, blockTime: 1, mintAmountUsdc: '100000' })),
  ]) as [MongoServer, ...DevChain[]];
  // Amoy's node is reached through a proxy the test can take away.
  amoyRpc = await startRpcProxy(chains[1]!.rpcUrl);
}, 10 * 60_000);

afterAll(async () => {
  await cluster?.stop();
  await amoyRpc?.close();
  await Promise.all(chains.map((c) => c.stop()));
  await mongo?.stop();
  releaseMachine?.();
}, 5 * 60_000);

it('2 serve processes, a plain round-robin balancer, payments on three networks at once: with Amoy\'s RPC gone for 20 s its payments are retried and settle once it is back, once each, and the other two networks\' payments are not touched', async () => {
  const [baseChain, amoyChain, arbitrumChain] = chains as [DevChain, DevChain, DevChain];
  const more = [{ dev: AMOY, chain: amoyChain, rpcUrl: amoyRpc!.url }, { dev: ARBITRUM, chain: arbitrumChain }];
  cluster = await startCluster({
    mongoUri: mongo!.uri, chain: baseChain, serves: 2, workers: 0, pool: [generatePrivateKey(), generatePrivateKey()], moreNetworks: more,
    env: { RECONCILE_AFTER_MS: '15000', RECONCILE_EVERY_MS: '5000' },
  });
  const balancer = new Balancer(cluster.serves, { followReady: false });
  const events: string[] = [];
  const note = (line: string) => { events.push(`${new Date().toISOString().slice(11, 23)} ${line}`); };
  let seller: Seller | undefined;
  try {
    seller = await clusterSeller(cluster.serves[0]!.url!, baseChain, undefined, more);
    const buyers = DEV_BUYERS.map((b) => privateKeyToAccount(b.privateKey));
    const loads = [
      { dev: BASE, chain: baseChain, payments: await preparePayments(PER_NETWORK, seller, buyers, baseChain, BASE) },
      { dev: AMOY, chain: amoyChain, payments: await preparePayments(PER_NETWORK, seller, buyers, amoyChain, AMOY) },
      { dev: ARBITRUM, chain: arbitrumChain, payments: await preparePayments(PER_NETWORK, seller, buyers, arbitrumChain, ARBITRUM) },
    ];
    const clients = loads.map((l) => createPublicClient({ transport: http(l.chain.rpcUrl) }) as PublicClient);
    const fromBlocks = await Promise.all(clients.map((c) => c.getBlockNumber()));

    // Amoy's node goes away once its load is under way, for 20 s, while the other two networks' goes on.
    let outage: Promise<void> | undefined;
    const outageWindow = { from: 0, to: 0 };
    const results = await Promise.all(loads.map((load) => runLoad(load.payments, balancer, seller!, {
      concurrency: CONCURRENCY, retry: { forMs: 240_000 }, thinkMs: 1_500,
      onAnswer: (_answer: Answer, done: number) => {
        if (load.dev !== AMOY || outage || done < PER_NETWORK * 0.15) return;
        outage = (async () => {
          outageWindow.from = Date.now();
          note('Amoy RPC down (connections refused)');
          await amoyRpc!.down();
          await new Promise((r) => setTimeout(r, OUTAGE_MS));
          await amoyRpc!.up();
          outageWindow.to = Date.now();
          note('Amoy RPC back');
        })();
      },
    })));
    await outage;
    expect(outageWindow.to - outageWindow.from).toBeGreaterThanOrEqual(OUTAGE_MS);

    // Whatever a process left open is closed from the chain.
    const client = await MongoClient.connect(mongo!.uri);
    const closed = await eventually(async () => (await client.db(cluster!.db).collection('payments').countDocuments({ status: 'verified' })) === 0, 120_000);
    await client.close();
    expect(closed).toBe(true);

    const reports = await Promise.all(loads.map((load, i) => audit({
      payments: load.payments, answers: results[i]!.answers, mongoUri: mongo!.uri, db: cluster!.db, client: clients[i]!, chain: load.chain, fromBlock: fromBlocks[i]!, network: load.dev.network,
    })));
    process.stdout.write(`\nnetworks: ${PER_NETWORK} payments on each of 3 networks @ ${CONCURRENCY} each (arrivals up to 1.5 s apart per buyer), 2 serve processes, a pool of 2 keys on every network, 1 s blocks, plain round-robin balancer\n`
      + `  events:\n${events.map((e) => `    ${e}`).join('\n')}\n`
      + loads.map((load, i) => {
        const r = reports[i]!;
        return `  ${load.dev.network}: ${r.answered.paid} paid, refused ${JSON.stringify(r.answered.refused)}, http errors ${JSON.stringify(r.answered.httpErrors)}, ${r.answered.noAnswer} without answer; `
          + `p50 ${r.latency.p50} ms, p95 ${r.latency.p95} ms; retried by ${r.retried.payments} buyers (${JSON.stringify(r.retried.byAnswer)}); `
          + `${r.onChain} moved on chain in ${r.transactions} transactions; records ${r.records.settled} settled, ${r.records.open} open, ${r.records.duplicates} duplicated; problems: ${r.problems.slice(0, 10).join('; ') || 'none'}\n`;
      }).join(''));

    for (const [i, load] of loads.entries()) {
      const r = reports[i]!;
      expect({ network: load.dev.network, problems: r.problems }).toEqual({ network: load.dev.network, problems: [] });
      // Every payment paid in the end, moved once, recorded settled once.
      expect({ network: load.dev.network, paid: r.answered.paid, onChain: r.onChain, settled: r.records.settled, duplicates: r.records.duplicates })
        .toEqual({ network: load.dev.network, paid: PER_NETWORK, onChain: PER_NETWORK, settled: PER_NETWORK, duplicates: 0 });
    }
    // Amoy's buyers were told to come back (a 503 or settlement_pending), or got no answer in time, and nothing else.
    const amoy = reports[1]!;
    expect(amoy.retried.payments).toBeGreaterThan(0);
    for (const answer of Object.keys(amoy.retried.byAnswer)) expect(answer).toMatch(/^(http_error 503|refused 200 settlement_pending|no_answer)\b/);
    // The healthy networks' buyers never had to.
    expect({ base: reports[0]!.retried, arbitrum: reports[2]!.retried }).toEqual({ base: { payments: 0, byAnswer: {} }, arbitrum: { payments: 0, byAnswer: {} } });
  } finally {
    balancer.stop();
    await seller?.close();
  }
}, 15 * 60_000);
