/**
 * Many processes on one database, on a chain that mines like Base. For each row, a fresh deployment of N
 * `agentgate serve` OS processes (one MongoDB-wire database, one relayer pool of K keys given to all)
 * settles pre-signed payments through POST /v0/x402/settle at concurrency C, behind a plain round-robin
 * balancer that does not look at /ready (SCALE_BALANCER=ready: one that does), on anvil with --block-time 1
 * and a base fee that moves every block. Rows with more processes than keys show the processes without a
 * lane handing their payments to those with one. Every row is audited against the chain (see
 * test/support/cluster.ts).
 *
 *   npm run bench -- scale-out          (SCALE_PAYMENTS=200 SCALE_ROWS="1x1@16,3x1@16,3x3@48,4x2@48,6x2@48" to change)
 *
 * A row whose audit finds problems prints the first five (SCALE_PROBLEMS=n: more) and, with SCALE_DUMP=1,
 * the warnings and errors its serve processes logged.
 */
import { createPublicClient, http, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startDevChain } from '../server/dev/chain/dev-chain.js';
import { DEV_BUYERS } from '../server/dev/chain/dev-accounts.js';
import { provideMongoServer } from '../server/dev/database/mongo-server.js';
import { audit, Balancer, clusterSeller, moveBaseFee, preparePayments, runLoad, startCluster } from '../test/support/cluster.js';

const PAYMENTS = Number(process.env.SCALE_PAYMENTS ?? 200);
const FOLLOW_READY = process.env.SCALE_BALANCER === 'ready';
const ROWS = (process.env.SCALE_ROWS ?? '1x1@16,3x1@16,3x3@48,4x2@48,6x2@48').split(',').map((row) => {
  const [, processes, keys, concurrency] = /^(\d+)x(\d+)@(\d+)$/.exec(row.trim())!;
  return { processes: Number(processes), keys: Number(keys), concurrency: Number(concurrency) };
});

const log = (line: string) => process.stdout.write(`${line}\n`);

async function main() {
  log('starting MongoDB-wire server and anvil (--block-time 1) ...');
  const mongo = await provideMongoServer();
  const chain = await startDevChain({ blockTime: 1, mintAmountUsdc: '1000000' });
  const client = createPublicClient({ transport: http(chain.rpcUrl) }) as PublicClient;
  const stopFees = moveBaseFee(chain.rpcUrl);
  const buyers = DEV_BUYERS.map((b) => privateKeyToAccount(b.privateKey));
  const table: string[] = [
    '| processes | relayer pool | payments @ concurrency | failed | p50 | p95 | req/s | transactions | gas/payment |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  try {
    for (const row of ROWS) {
      const payments = row.concurrency >= 48 ? Math.round(PAYMENTS * 1.5) : PAYMENTS;
      const cluster = await startCluster({
        mongoUri: mongo.uri, chain, serves: row.processes, workers: 0,
        pool: Array.from({ length: row.keys }, () => generatePrivateKey()),
      });
      try {
        const balancer = new Balancer(cluster.serves, { followReady: FOLLOW_READY });
        await balancer.start();
        // Every process has joined the registry and the pool is divided.
        await new Promise((r) => setTimeout(r, 3_000));
        const seller = await clusterSeller(cluster.serves[0]!.url!, chain);
        const prepared = await preparePayments(payments, seller, buyers, chain);
        const fromBlock = await client.getBlockNumber();
        const { answers, seconds } = await runLoad(prepared, balancer, seller, { concurrency: row.concurrency });
        balancer.stop();
        await seller.close();
        const report = await audit({ payments: prepared, answers, mongoUri: mongo.uri, db: cluster.db, client, chain, fromBlock });
        const failed = payments - report.answered.paid;
        table.push(`| ${row.processes} | ${row.keys} key${row.keys > 1 ? 's' : ''} | ${payments} @ ${row.concurrency} | ${failed} | ${(report.latency.p50 / 1000).toFixed(1)} s | ${(report.latency.p95 / 1000).toFixed(1)} s | ${(payments / seconds).toFixed(1)} | ${report.transactions} | ${(report.gasPerPayment / 1000).toFixed(1)}k |`);
        log(table[table.length - 1]!);
        if (report.problems.length) log(`  problems: ${report.problems.slice(0, Number(process.env.SCALE_PROBLEMS ?? 5)).join('; ')}`);
        if (report.problems.length && process.env.SCALE_DUMP) for (const p of cluster.serves) for (const line of p.output) if (/"level":(40|50)/.test(line)) log(`  ${p.name}: ${line.slice(0, 600)}`);
        if (failed) log(`  not paid: refused ${JSON.stringify(report.answered.refused)}, http ${JSON.stringify(report.answered.httpErrors)}, no answer ${report.answered.noAnswer}`);
      } finally {
        await cluster.stop();
      }
    }
  } finally {
    stopFees();
    await chain.stop();
    await mongo.stop();
  }
  log(`\nscale-out, anvil --block-time 1 with a moving base fee, POST /v0/x402/settle behind a ${FOLLOW_READY ? 'readiness-aware' : 'plain round-robin'} balancer:`);
  for (const line of table) log(line);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
