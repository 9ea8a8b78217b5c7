/**
 * Many networks at once. One deployment (2 `agentgate serve` OS processes on one database, a pool of 2
 * relayer keys serving every network, a plain round-robin balancer) settles on three networks, each an
 * anvil with its real chain id, --block-time 2 (as Base) and a base fee that moves every block. Buyers
 * pay POST /v0/x402/settle at concurrency C per network, each arriving up to 1 s after its last answer.
 *
 *   - one network alone (Base Sepolia's stand-in) against the three loaded at once, alternated
 *     A B A B (NETWORKS_ROUNDS pairs): per-network throughput, medians of the rounds, and its ratio;
 *   - Polygon Amoy's RPC dead (connections refused) while all three are loaded: the healthy networks'
 *     p95, against one block (2 s) plus 150 ms.
 *
 *   npm run bench -- networks          (NETWORKS_PAYMENTS=120 NETWORKS_CONCURRENCY=16 NETWORKS_ROUNDS=2 to change)
 */
import { createPublicClient, http, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { DEV_NETWORKS, startDevChain, type DevChain, type DevNetwork } from '../server/dev/chain/dev-chain.js';
import { DEV_BUYERS } from '../server/dev/chain/dev-accounts.js';
import { provideMongoServer } from '../server/dev/database/mongo-server.js';
import { audit, Balancer, clusterSeller, moveBaseFee, preparePayments, runLoad, startCluster, type Seller } from '../test/support/cluster.js';
import { startRpcProxy } from '../test/support/rpc-proxy.js';

const PAYMENTS = Number(process.env.NETWORKS_PAYMENTS ?? 120);
const CONCURRENCY = Number(process.env.NETWORKS_CONCURRENCY ?? 16);
const ROUNDS = Number(process.env.NETWORKS_ROUNDS ?? 2);
const BLOCK_SECONDS = 2;
const THINK_MS = 1_000;

const log = (line: string) => process.stdout.write(`${line}\n`);
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2; };

interface Loaded { network: string; perSecond: number; p50: number; p95: number; paid: number; problems: string[] }

async function main() {
  log(`starting MongoDB-wire server and three anvils (--block-time ${BLOCK_SECONDS}) ...`);
  const mongo = await provideMongoServer();
  const chains = await Promise.all(DEV_NETWORKS.map((network) => startDevChain({ network, blockTime: BLOCK_SECONDS, mintAmountUsdc: '1000000' })));
  const [baseChain, amoyChain, arbitrumChain] = chains as unknown as [DevChain, DevChain, DevChain];
  const [BASE, AMOY, ARBITRUM] = DEV_NETWORKS as [DevNetwork, DevNetwork, DevNetwork];
  const amoyRpc = await startRpcProxy(amoyChain.rpcUrl);
  const stopFees = chains.map((c) => moveBaseFee(c.rpcUrl));
  const more = [{ dev: AMOY, chain: amoyChain, rpcUrl: amoyRpc.url }, { dev: ARBITRUM, chain: arbitrumChain }];
  const cluster = await startCluster({ mongoUri: mongo.uri, chain: baseChain, serves: 2, workers: 0, pool: [generatePrivateKey(), generatePrivateKey()], moreNetworks: more });
  const balancer = new Balancer(cluster.serves, { followReady: false });
  const buyers = DEV_BUYERS.map((b) => privateKeyToAccount(b.privateKey));
  const all = [{ dev: BASE, chain: baseChain }, { dev: AMOY, chain: amoyChain }, { dev: ARBITRUM, chain: arbitrumChain }];
  let seller: Seller | undefined;

  /** `networks` loaded at once, PAYMENTS each at CONCURRENCY each; `retry`: buyers try again after a 503. */
  const load = async (networks: typeof all, options: { audit: boolean }): Promise<Loaded[]> => {
    const prepared = await Promise.all(networks.map((n) => preparePayments(PAYMENTS, seller!, buyers, n.chain, n.dev)));
    const clients = networks.map((n) => createPublicClient({ transport: http(n.chain.rpcUrl) }) as PublicClient);
    const fromBlocks = options.audit ? await Promise.all(clients.map((c) => c.getBlockNumber())) : [];
    const results = await Promise.all(prepared.map((payments) => runLoad(payments, balancer, seller!, { concurrency: CONCURRENCY, thinkMs: THINK_MS })));
    return Promise.all(networks.map(async (n, i) => {
      const paidMs = results[i]!.answers.filter((a) => a.kind === 'paid').map((a) => a.ms).sort((x, y) => x - y);
      const problems = options.audit
        ? (await audit({ payments: prepared[i]!, answers: results[i]!.answers, mongoUri: mongo.uri, db: cluster.db, client: clients[i]!, chain: n.chain, fromBlock: fromBlocks[i]!, network: n.dev.network })).problems
        : [];
      return {
        network: n.dev.network, perSecond: paidMs.length / results[i]!.seconds, paid: paidMs.length, problems,
        p50: paidMs[Math.floor(paidMs.length / 2)] ?? 0, p95: paidMs[Math.min(paidMs.length - 1, Math.floor(paidMs.length * 0.95))] ?? 0,
      };
    }));
  };

  try {
    // Every process has joined the registry and the pool is divided on every network.
    await new Promise((r) => setTimeout(r, 3_000));
    seller = await clusterSeller(cluster.serves[0]!.url!, baseChain, undefined, more);
    // A warm-up round, not counted: the first payments of a process compile its paths.
    await load(all, { audit: false });

    const alone: number[] = [];
    const together: Record<string, number[]> = {};
    const rows: string[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const [one] = await load([all[0]!], { audit: true });
      alone.push(one!.perSecond);
      rows.push(`| ${round} | one network alone | ${one!.network} | ${one!.paid}/${PAYMENTS} | ${one!.perSecond.toFixed(1)} | ${one!.p50} | ${one!.p95} | ${one!.problems.length} |`);
      for (const r of await load(all, { audit: true })) {
        (together[r.network] ??= []).push(r.perSecond);
        rows.push(`| ${round} | three at once | ${r.network} | ${r.paid}/${PAYMENTS} | ${r.perSecond.toFixed(1)} | ${r.p50} | ${r.p95} | ${r.problems.length} |`);
      }
    }

    // Amoy's node dead (connections refused): its buyers are refused at once; the other two go on.
    await amoyRpc.down();
    const dead = await load(all, { audit: false });
    await amoyRpc.up();
    for (const r of dead) rows.push(`| - | Amoy's RPC dead | ${r.network} | ${r.paid}/${PAYMENTS} | ${r.perSecond.toFixed(1)} | ${r.p50} | ${r.p95} | - |`);

    log(`\nnetworks: 2 serve processes, a pool of 2 keys on every network, --block-time ${BLOCK_SECONDS} with moving base fees, ${PAYMENTS} payments per network @ ${CONCURRENCY} per network, arrivals up to ${THINK_MS} ms after each answer, plain round-robin balancer`);
    log('| round | load | network | paid | paid/s | p50 ms | p95 ms | audit problems |');
    log('|---|---|---|---|---|---|---|---|');
    for (const row of rows) log(row);
    const baseline = median(alone);
    const ratios = Object.entries(together).map(([network, xs]) => ({ network, ratio: median(xs) / baseline }));
    const worst = Math.min(...ratios.map((r) => r.ratio));
    const limit = BLOCK_SECONDS * 1000 + 150;
    const healthyP95 = Math.max(...dead.filter((r) => r.network !== AMOY.network).map((r) => r.p95));
    log(`\nper-network throughput, three at once / one alone (medians of ${ROUNDS}): ${ratios.map((r) => `${r.network} ${r.ratio.toFixed(2)}x`).join(', ')}; target >= 0.9x: ${worst >= 0.9 ? 'met' : 'MISSED'}`);
    log(`healthy networks' p95 while Amoy's RPC is dead: ${healthyP95} ms; target <= one block + 150 ms (${limit} ms): ${healthyP95 <= limit ? 'met' : 'MISSED'}`);
  } finally {
    balancer.stop();
    await seller?.close();
    await cluster.stop();
    stopFees.forEach((stop) => stop());
    await amoyRpc.close();
    await Promise.all(chains.map((c) => c.stop()));
    await mongo.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
