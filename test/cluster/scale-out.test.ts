// The deployment issue 19 describes, as separate OS processes: 3 `agentgate serve` and 2 `agentgate
// worker` on one database, one relayer pool of 3 keys given to all, a chain with 1 s blocks and a moving
// base fee. 300 payments at concurrency 48 through a load balancer; one serve and one worker are killed
// with SIGKILL in the middle. Then the books are checked against the chain and the webhook receiver.
import { createPublicClient, http, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startDevChain, type DevChain } from '../../server/dev/chain/dev-chain.js';
import { DEV_BUYERS } from '../../server/dev/chain/dev-accounts.js';
import { audit, Balancer, clusterSeller, eventually, moveBaseFee, preparePayments, runLoad, startCluster, type Cluster } from '../support/cluster.js';
import { startReceiver } from '../webhooks/receiver.js';
import { MongoClient } from 'mongodb';
import { provideMongoServer, type MongoServer } from '../../server/dev/database/mongo-server.js';
import { takeMachine } from '../support/machine-share.js';

const PAYMENTS = Number(process.env.CLUSTER_PAYMENTS ?? 300);
const CONCURRENCY = Number(process.env.CLUSTER_CONCURRENCY ?? 48);

let chain: DevChain;
let mongo: MongoServer;
let cluster: Cluster | undefined;
let releaseMachine = () => {};
beforeAll(async () => {
  // This file has the machine to itself (test/support/machine-share.ts): the rest of the suite waits.
  releaseMachine = await takeMachine();
  // A database server of its own: five busy processes on the suite's shared one would slow every other
  // test file running beside this one (and be slowed by them).
  [chain, mongo] = await Promise.all([startDevChain({ blockTime: 1, mintAmountUsdc: '100000' }), provideMongoServer()]);
}, 20 * 60_000);
afterAll(async () => {
  await cluster?.stop();
  await chain?.stop();
  await mongo?.stop();
  releaseMachine();
});

it('3 serve + 2 worker processes, a pool of 3 keys, 1 s blocks: a serve and a worker killed mid-run; every moved payment recorded once, every paid answer on chain, one webhook each, no relayer failure', async () => {
  const mongoUri = mongo.uri;
  const receiver = await startReceiver();
  const client = createPublicClient({ transport: http(chain.rpcUrl) }) as PublicClient;
  cluster = await startCluster({
    mongoUri, chain, serves: 3, workers: 2, pool: [generatePrivateKey(), generatePrivateKey(), generatePrivateKey()],
    // Production defaults but for the pace of recovery, and leases that ride out a CPU-starved CI machine
    // (the whole suite runs beside this file on two cores; database calls then take seconds).
    env: {
      RECONCILE_AFTER_MS: '20000', RECONCILE_EVERY_MS: '3000', SETTLEMENT_TIMEOUT_MS: '30000', RELAYER_LEASE_TTL_MS: '30000',
      WEBHOOK_RETRY_BASE_MS: '200', WEBHOOK_OUTBOX_SWEEP_MS: '2000',
    },
  });
  const balancer = new Balancer(cluster.serves);
  await balancer.start();
  const stopFees = moveBaseFee(chain.rpcUrl);
  try {
    // Each process took one key of the pool.
    expect(await eventually(async () => {
      const ready = await Promise.all(cluster!.serves.map((s) => fetch(`${s.url}/ready`).then((r) => r.status)));
      return ready.every((status) => status === 200);
    }, 30_000)).toBe(true);

    const seller = await clusterSeller(cluster.serves[0]!.url!, receiver.url);
    const buyers = DEV_BUYERS.map((b) => privateKeyToAccount(b.privateKey));
    const payments = await preparePayments(PAYMENTS, seller, buyers, chain);
    const fromBlock = await client.getBlockNumber();
    const [victim, deadWorker] = [cluster.serves[0]!, cluster.workers[0]!];
    const { answers, seconds } = await runLoad(payments, balancer, seller, CONCURRENCY, (_answer, done) => {
      if (done === Math.floor(PAYMENTS / 3) && victim.alive) {
        cluster!.kill(victim);
        cluster!.kill(deadWorker);
      }
    });
    expect(victim.alive).toBe(false);

    // Reconciliation closes what the killed process left open; the surviving worker delivers the webhooks.
    const mongo = await MongoClient.connect(mongoUri);
    const db = mongo.db(cluster.db);
    const closed = await eventually(async () => (await db.collection('payments').countDocuments({ status: 'verified' })) === 0, 120_000);
    const delivered = await eventually(async () => {
      const settled = await db.collection('payments').countDocuments({ status: 'settled' });
      return (await db.collection('webhook_deliveries').countDocuments({ status: 'delivered' })) >= settled;
    // One surviving worker delivers about 300 webhooks, a handful of database commands each: on a shared
    // machine under load (FerretDB at several times its idle cost per command) that took over 3 minutes.
    }, 300_000);
    await mongo.close();

    const report = await audit({ payments, answers, mongoUri, db: cluster.db, client, chain, fromBlock, received: receiver.received });
    const reconciled = [...cluster.serves, ...cluster.workers].flatMap((p) => p.output).filter((l) => /reconciliation (recorded|settled|sends)/.test(l)).length;
    const sends = cluster.serves.flatMap((p) => p.output).filter((l) => l.includes('"settlement transaction sent"')).length;
    // The figures, for the operator reading the CI log.
    process.stdout.write(`\nscale-out: ${PAYMENTS} payments @ ${CONCURRENCY} over 3 serve + 2 worker, pool of 3 keys, 1 s blocks, moving base fee; killed ${victim.name} and ${deadWorker.name} after ${Math.floor(PAYMENTS / 3)} answers\n`
      + `  answers: ${report.answered.paid} paid, refused ${JSON.stringify(report.answered.refused)}, http errors ${JSON.stringify(report.answered.httpErrors)}, ${report.answered.noAnswer} without answer (killed process); ${(PAYMENTS / seconds).toFixed(1)} req/s, p50 ${report.latency.p50} ms, p95 ${report.latency.p95} ms\n`
      + `  chain: ${report.onChain} moved in ${report.transactions} transactions (${sends} sends), ${report.gasPerPayment} gas/payment\n`
      + `  records: ${report.records.settled} settled, failed ${JSON.stringify(report.records.failed)}, ${report.records.open} open, ${report.records.duplicates} duplicated; ${reconciled} reconciliation actions\n`
      + `  webhooks: ${report.webhooks.delivered} delivered once each; ${report.webhooks.duplicatesAtReceiver} events seen twice at the receiver (same idempotency key); deliveries by status ${JSON.stringify(report.webhooks.byStatus)}${report.webhooks.lastErrors.length ? `, last errors: ${report.webhooks.lastErrors.join(' | ')}` : ''}\n`
      + `  problems: ${report.problems.length ? report.problems.slice(0, 20).join('; ') : 'none'}\n`);

    expect(closed).toBe(true);
    expect(delivered).toBe(true);
    expect(report.problems).toEqual([]);
    // Everything that was answered, was answered paid: nothing was refused or failed for the relayer's sake.
    expect(report.answered.paid + report.answered.noAnswer).toBe(PAYMENTS);
    expect(report.onChain).toBe(report.records.settled);
    expect(report.onChain).toBeGreaterThanOrEqual(report.answered.paid);
  } finally {
    stopFees();
    balancer.stop();
    await receiver.close();
  }
}, 600_000);
