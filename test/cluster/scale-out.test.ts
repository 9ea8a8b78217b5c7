// A deployment as an operator runs one, in production mode, as separate OS processes on one database: 4
// `agentgate serve` (2 of them given no relayer keys: they accept and leave sending to others) and 2
// `agentgate worker`, a pool of 2 keys for the processes that have keys, a chain with 1 s blocks and a base
// fee that moves every block, and a plain round-robin balancer that does not look at /ready. 500 payments at
// concurrency 48, buyers arriving at arbitrary moments and trying again (same payment, same
// payment-identifier) after no answer, a 503 or `settlement_pending`, as a client of the payment-identifier
// extension does. Meanwhile a fifth serve joins, every serve is restarted in turn (SIGTERM, then started
// again), the process holding a relayer lane is killed with SIGKILL, and the database (PostgreSQL under the
// embedded FerretDB) is restarted. Then the books are checked against the chain and the webhook receiver.
import { createPublicClient, http, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { MongoClient } from 'mongodb';
import { DEV_BUYERS } from '../../server/dev/chain/dev-accounts.js';
import { audit, Balancer, clusterSeller, eventually, moveBaseFee, preparePayments, runLoad, startCluster, type Cluster, type ClusterProcess, type Seller } from '../support/cluster.js';
import { clusterServices, type ClusterServices } from '../support/cluster-services.js';
import { startReceiver } from '../webhooks/receiver.js';

const PAYMENTS = Number(process.env.CLUSTER_PAYMENTS ?? 500);
const CONCURRENCY = Number(process.env.CLUSTER_CONCURRENCY ?? 48);

let services: ClusterServices;
let cluster: Cluster | undefined;
beforeAll(async () => { services = await clusterServices(); }, 20 * 60_000);
afterAll(async () => { await services?.stop(cluster); }, 5 * 60_000);

/** The live processes holding a relayer lane now, as the registry shows them. */
async function laneHolders(db: string): Promise<Array<{ pid: number; lanes: string[] }>> {
  const client = await MongoClient.connect(services.mongo.uri);
  try {
    const docs = await client.db(db).collection('settlement_processes').find({ expiresAt: { $gt: new Date() } }).toArray();
    return docs.filter((d) => d.lanes.length > 0).map((d) => ({ pid: Number(String(d._id).split(':')[1]), lanes: d.lanes.map((l: { address: string }) => l.address) }));
  } finally {
    await client.close();
  }
}

it('4 serve (2 without keys) + 2 worker processes, a pool of 2 keys, 1 s blocks, a plain round-robin balancer: a serve joins, every serve restarts in turn, the lane holder is killed, the database restarts; every payment paid, nothing recorded twice, one webhook each', async () => {
  const { chain, mongo } = services;
  const receiver = await startReceiver();
  const client = createPublicClient({ transport: http(chain.rpcUrl) }) as PublicClient;
  cluster = await startCluster({
    mongoUri: mongo.uri, chain, serves: 2, keylessServes: 2, workers: 2, pool: [generatePrivateKey(), generatePrivateKey()],
    // Production defaults but for the pace of recovery and webhook retries (reconciliation finishes what a
    // killed process left open; a test does not wait minutes for it). Sweeps every few seconds in each of
    // seven processes are what the embedded engine feels most: each reads a whole collection.
    env: { RECONCILE_AFTER_MS: '15000', RECONCILE_EVERY_MS: '5000', WEBHOOK_RETRY_BASE_MS: '200', WEBHOOK_OUTBOX_SWEEP_MS: '5000' },
  });
  const balancer = new Balancer(cluster.serves, { followReady: false });
  const stopFees = moveBaseFee(chain.rpcUrl);
  const events: string[] = [];
  const restarts: Array<{ name: string; seconds: number }> = [];
  const failures: string[] = [];
  const note = (line: string) => { events.push(`${new Date().toISOString().slice(11, 23)} ${line}`); };
  let seller: Seller | undefined;
  try {
    // Both keys are held, whoever holds them.
    expect(await eventually(async () => (await laneHolders(cluster!.db)).flatMap((h) => h.lanes).length === 2, 60_000)).toBe(true);
    // An official @x402/express seller with the cluster as its facilitator: the load is its settle calls.
    seller = await clusterSeller(cluster.serves[0]!.url!, chain, receiver.url);
    const buyers = DEV_BUYERS.map((b) => privateKeyToAccount(b.privateKey));
    const payments = await preparePayments(PAYMENTS, seller, buyers, chain);
    const fromBlock = await client.getBlockNumber();

    // The scale events, each started once the load has reached its mark; they overlap in time.
    const running: Array<Promise<unknown>> = [];
    let killed: { proc: ClusterProcess; pid: number } | undefined;
    const at = (mark: number, event: () => Promise<unknown>) => ({ mark, event, started: false });
    const schedule = [
      at(Math.floor(PAYMENTS * 0.08), async () => {
        const joined = await cluster!.addServe({ keys: true });
        note(`${joined.name} joined (with keys)`);
      }),
      at(Math.floor(PAYMENTS * 0.16), async () => {
        // Every serve, the one that joined included (the list grows while this runs).
        for (let i = 0; i < cluster!.serves.length; i++) {
          const serve = cluster!.serves[i]!;
          note(`${serve.name} restarting`);
          const from = Date.now();
          const times = await cluster!.restart(serve);
          restarts.push({ name: serve.name, seconds: (Date.now() - from) / 1000 });
          note(`${serve.name} restarted in ${((Date.now() - from) / 1000).toFixed(1)} s: stopped in ${(times.stopMs / 1000).toFixed(1)} s${times.slowSteps.length ? ` (${times.slowSteps.join(', ')})` : ''}, started in ${(times.startMs / 1000).toFixed(1)} s${times.slowStartSteps.length ? ` (${times.slowStartSteps.join(', ')})` : ''}`);
        }
      }),
      at(Math.floor(PAYMENTS * 0.3), async () => {
        // The events overlap: when the lane holder is itself restarting, its lanes are free until another
        // process takes them for its next batch. The kill waits for a holder (up to a minute).
        let holders: Awaited<ReturnType<typeof laneHolders>> = [];
        let holding: ClusterProcess[] = [];
        await eventually(async () => {
          // This wait can overlap the database restart below: a read that fails then is tried again.
          const read = await laneHolders(cluster!.db).catch(() => undefined);
          if (!read) return false;
          holders = read;
          holding = [...cluster!.workers, ...cluster!.serves].filter((p) => p.alive && holders.some((h) => h.pid === p.child.pid));
          return holding.length > 0;
        }, 60_000, 200);
        // A worker if one holds a lane (its buyers are other processes' and lose nothing), else a serve.
        const victim = holding.find((p) => p.kind === 'worker') ?? holding[0];
        if (!victim) throw new Error('no process held a lane for a minute');
        killed = { proc: victim, pid: victim.child.pid! };
        cluster!.kill(victim);
        note(`${victim.name} (holding ${holders.find((h) => h.pid === killed!.pid)!.lanes.join(', ')}) killed with SIGKILL`);
      }),
      at(Math.floor(PAYMENTS * 0.55), async () => {
        note('database: PostgreSQL stopped');
        await mongo.restartBackend!(4_000);
        note('database: PostgreSQL started again');
      }),
    ];
    const { answers, seconds } = await runLoad(payments, balancer, seller, {
      concurrency: CONCURRENCY, retry: { forMs: 300_000 }, thinkMs: 2_000,
      onAnswer: (_answer, done) => {
        for (const step of schedule) {
          if (step.started || done < step.mark) continue;
          step.started = true;
          running.push(step.event().catch((err: Error) => { failures.push(err.message.split('\n')[0]!); note(`event failed: ${err.message.split('\n')[0]}`); }));
        }
      },
    });
    await Promise.all(running);
    expect(schedule.every((s) => s.started)).toBe(true);
    // The victim is gone (a serve among the ones restarted in turn is started again, as an orchestrator would).
    expect(() => process.kill(killed!.pid, 0)).toThrow();

    // Reconciliation closes whatever a killed process left open; the workers deliver the webhooks.
    const db = (await MongoClient.connect(mongo.uri)).db(cluster.db);
    const closed = await eventually(async () => (await db.collection('payments').countDocuments({ status: 'verified' })) === 0, 120_000);
    // Webhooks: within a minute of the last event and the last answer, every one delivered.
    const delivered = await eventually(async () => {
      const settled = await db.collection('payments').countDocuments({ status: 'settled' });
      return (await db.collection('webhook_deliveries').countDocuments({ status: 'delivered' })) >= settled;
    }, 60_000);
    // What an operator's alert watches: how long the oldest delivery still waiting has waited.
    const [oldestPending] = await db.collection('webhook_deliveries').find({ status: 'pending' }).sort({ createdAt: 1 }).limit(1).toArray();
    const oldestPendingSeconds = oldestPending ? (Date.now() - oldestPending.createdAt.getTime()) / 1000 : 0;
    await db.client.close();

    const report = await audit({ payments, answers, mongoUri: mongo.uri, db: cluster.db, client, chain, fromBlock, received: receiver.received });
    const processes = [...cluster.serves, ...cluster.workers];
    const lines = (pattern: RegExp) => processes.flatMap((p) => p.output).filter((l) => pattern.test(l)).length;
    // The figures, for the operator reading the CI log.
    process.stdout.write(`\nscale-out: ${PAYMENTS} payments @ ${CONCURRENCY} (arrivals up to 2 s apart per buyer) over 4 serve (2 without keys) + 2 worker processes, a pool of 2 keys, 1 s blocks, moving base fee, plain round-robin balancer\n`
      + `  events:\n${events.map((e) => `    ${e}`).join('\n')}\n`
      + `  answers: ${report.answered.paid} paid, refused ${JSON.stringify(report.answered.refused)}, http errors ${JSON.stringify(report.answered.httpErrors)}, ${report.answered.noAnswer} without answer; ${(PAYMENTS / seconds).toFixed(1)} req/s, p50 ${report.latency.p50} ms, p95 ${report.latency.p95} ms (first attempt to final answer)\n`
      + `  retried by buyers: ${report.retried.payments} payments, after ${JSON.stringify(report.retried.byAnswer)}\n`
      + `  chain: ${report.onChain} moved in ${report.transactions} transactions (${lines(/"settlement transaction sent"/)} sends), ${report.gasPerPayment} gas/payment\n`
      + `  records: ${report.records.settled} settled, failed ${JSON.stringify(report.records.failed)}, ${report.records.open} open, ${report.records.duplicates} duplicated; ${lines(/reconciliation (recorded|settled|sends|wrote)/)} reconciliation actions\n`
      + `  lanes: ${lines(/"relayer lane acquired"/)} acquired, ${lines(/"relayer lane released"/)} released; ${lines(/"settlement work handed back unsent/)} handed back unsent\n`
      + `  restarts (SIGTERM to answering /health again): ${restarts.map((r) => `${r.name} ${r.seconds.toFixed(1)} s`).join(', ')}; ${lines(/"what":"starting".*database unreachable; retrying/)} starts waited for the database, ${lines(/went away during the start; starting again/)} were interrupted by it and made again in the process, ${cluster.serves.reduce((n, s) => n + s.failedStarts, 0)} failed and were relaunched\n`
      + `  webhooks: oldest still pending ${oldestPendingSeconds.toFixed(1)} s; ${report.webhooks.delivered} delivered once each; ${report.webhooks.duplicatesAtReceiver} events seen twice at the receiver (same idempotency key); deliveries by status ${JSON.stringify(report.webhooks.byStatus)}${report.webhooks.lastErrors.length ? `, last errors: ${report.webhooks.lastErrors.join(' | ')}` : ''}\n`
      + `  problems: ${report.problems.length ? report.problems.slice(0, 20).join('; ') : 'none'}\n`);

    expect(failures).toEqual([]);
    expect(closed).toBe(true);
    expect(delivered).toBe(true);
    expect(oldestPendingSeconds).toBeLessThan(30);
    expect(report.problems).toEqual([]);
    // No valid payment failed: every one was answered paid in the end.
    expect(report.answered.paid).toBe(PAYMENTS);
    expect(report.onChain).toBe(PAYMENTS);
    expect(report.records.settled).toBe(PAYMENTS);
    expect(report.webhooks.delivered).toBe(PAYMENTS);
  } finally {
    stopFees();
    balancer.stop();
    await seller?.close();
    await receiver.close();
  }
}, 900_000);
