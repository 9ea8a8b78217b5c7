/**
 * A year of history, measured (issue 52's first part, the read paths): what an operator, a seller's code
 * and a probe read every day, first on a database holding one day of an org's payments, then on the same
 * database once a busy year has been added before this month: payments with their signed receipts,
 * webhook deliveries and activity log lines, and finished jobs. Each scenario is the same requests in
 * both phases; it reports
 * the p50 of each phase, their ratio, and the database commands per request (counted by the driver, the
 * server's background rounds included in both phases alike).
 *
 * The history is inserted directly, shaped as the service writes it (the read path is what is measured,
 * not how fast a year can be paid): settled payments over the 365 days before this month (the month's CSV holds the same rows in both phases), each with
 * a signed receipt, a delivered payment.received delivery and its activity log line; jobs that gave up (the queue deletes what
 * succeeded), spread over the 365 days up to now, which the job retention's round (JOB_RETENTION_DAYS)
 * then trims to its last days as over the year it would have. It prints what each collection stores per million documents. Mail at 100,000 messages
 * is measured by bench/mail.ts; the channel sweep's round by the channels test and bench.
 *
 * The seller sells an `exact` and a channel (`batch-settlement`) route through our Express middleware, on
 * anvil (mining on arrival); it is another org than the one whose pages are read. In both phases,
 * BENCH_HISTORY_CONCURRENCY (16) buyers of each scheme pay with the official client for
 * BENCH_HISTORY_PAID_WINDOW_MS (8000) after a 2 s ramp: the p50 of a whole call and the database commands
 * per paid call; and each exact payment's payment.received, from its settlement's record to the
 * receiver on loopback. The closed days' totals and counts are written as the day groups round would have
 * written them over the year (one round per day).
 *
 *   npm run bench -- history
 *   BENCH_HISTORY_PAYMENTS=1000000   payments of the year (with as many deliveries)
 *   BENCH_HISTORY_JOBS=1000000       jobs that gave up over the year
 *   BENCH_HISTORY_REQUESTS=30        requests per scenario and phase
 *
 * Prints a table: scenario, p50 empty, p50 year, ratio, commands per request empty and year; then
 * `history: N of M scenarios within 1.2x the empty database's p50`.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { paymentMiddleware } from '../adapters/express.js';
import { DEV_ACCOUNTS } from '../server/dev/chain/dev-accounts.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION, startDevChain, type DevChain } from '../server/dev/chain/dev-chain.js';
import { fundBuyers } from './support/fund-buyers.js';
import { startBuyers, type RunResult } from './support/paying-buyers.js';
import { loadConfig } from '../server/platform/config.js';
import { provideMongoServer } from '../server/dev/database/mongo-server.js';
import { freePort } from '../server/platform/net.js';
import { startServer } from '../server/server.js';
import { dayGroupsRound, HistoryBuckets, hourOf } from '../server/platform/history-buckets.js';
import { deliveriesScope } from '../server/webhooks/delivery-log.js';
import { activityScope } from '../server/platform/activity-log.js';

const PAYMENTS = Number(process.env.BENCH_HISTORY_PAYMENTS ?? 1_000_000);
const JOBS = Number(process.env.BENCH_HISTORY_JOBS ?? 1_000_000);
const REQUESTS = Number(process.env.BENCH_HISTORY_REQUESTS ?? 30);
/** Buyers paying at once, per scheme (issue 52: concurrency 16). */
const CONCURRENCY = Number(process.env.BENCH_HISTORY_CONCURRENCY ?? 16);
/** Each paid run: a ramp-up, then the measured window (calls that end in it). */
const PAID_RAMP_MS = 2_000;
const PAID_WINDOW_MS = Number(process.env.BENCH_HISTORY_PAID_WINDOW_MS ?? 8_000);
const PRICE = '$0.001';
/** Quiet, before the pages are read: the idle rate of database commands, so many seconds in a row. */
const QUIET_S = 5;
/** A scenario whose request takes longer than this is reported as such, and not measured further. */
const TIMEOUT_MS = Number(process.env.BENCH_HISTORY_TIMEOUT_MS ?? 60_000);
/** The org's recent day: what its first pages show in both phases. */
const RECENT = 200;
const BATCH = 5_000;
const DAY_MS = 86_400_000;
const log = (line: string) => process.stdout.write(`${line}\n`);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const hex = (bytes: number) => `0x${randomBytes(bytes).toString('hex')}`;

/** A settled payment and its delivery, as the service stores them (server/payments/models.ts, server/webhooks/models.ts). */
function paymentAt(orgId: string, endpointId: string, at: Date, i: number) {
  const id = `pay_h${i.toString(36).padStart(8, '0')}${randomBytes(5).toString('hex')}`;
  const deliveryId = `whd_h${i.toString(36).padStart(8, '0')}${randomBytes(5).toString('hex')}`;
  const eventId = `evt_h${i.toString(36).padStart(8, '0')}${randomBytes(5).toString('hex')}`;
  const payer = hex(20);
  const nonce = hex(32);
  const txHash = hex(32);
  const amount = String(1000 * (1 + (i % 5)));
  const payment = {
    _id: id, orgId, direction: 'in', endpointId, network: 'base-sepolia', chainId: 84532, asset: '0x036cbd53842c5426634e7929541ec2318f3dcf7e',
    payerAddress: payer, recipientAddress: '0x000000000000000000000000000000000000dead', amountUsdcRaw: amount,
    resourceUrl: `https://api.example.com/v1/report/${i % 50}`, x402Version: 2, scheme: 'exact',
    authorizationKey: `84532:0x036cbd53842c5426634e7929541ec2318f3dcf7e:${payer}:${nonce}`, authorizationNonce: nonce,
    authorization: { from: payer, to: '0x000000000000000000000000000000000000dead', value: amount, validAfter: '0', validBefore: String(Math.floor(at.getTime() / 1000) + 300), nonce },
    signature: hex(65), status: 'settled', txHash,
    signedReceipt: { receipt: { version: 1, paymentId: id, network: 'eip155:84532', txHash, payer, payTo: '0x000000000000000000000000000000000000dead', amount, resource: `https://api.example.com/v1/report/${i % 50}`, settledAt: at.toISOString() }, signature: randomBytes(64).toString('base64url'), kid: 'did:web:history.test#receipts-1' },
    webhook: { status: 'dispatched', eventId, deliveryId },
    createdAt: at, hour: hourOf(at), submittedAt: at, settledAt: new Date(at.getTime() + 1500),
  };
  const body = JSON.stringify({ id: eventId, type: 'payment.received', created: at.toISOString(), data: { paymentId: id, amount, payer, txHash, network: 'eip155:84532' } });
  const delivery = {
    _id: deliveryId, eventId, event: 'payment.received', orgId, endpointId, paymentId: id, body, status: 'delivered',
    attempts: [{ at: new Date(at.getTime() + 1600), status: 200, durationMs: 40 }], attemptCount: 1, round: 0,
    nextAttemptAt: null, lastError: null, createdAt: new Date(at.getTime() + 1550), hour: hourOf(new Date(at.getTime() + 1550)), updatedAt: new Date(at.getTime() + 1650), deliveredAt: new Date(at.getTime() + 1650),
  };
  // The activity log's line for it (records.ts writeRecord), filed by the hour as the log files it.
  const activity = {
    _id: `log_h${i.toString(36).padStart(8, '0')}${randomBytes(5).toString('hex')}`, orgId, action: 'payments.settled', category: 'payments', severity: 'info', status: 'success',
    description: `Received ${amount} USDC from ${payer}`, targetType: 'payment', targetId: id, metadata: { txHash, endpointId }, createdAt: new Date(at.getTime() + 1500), hour: hourOf(new Date(at.getTime() + 1500)),
  };
  return { payment, delivery, activity };
}

/**
 * A seller's paid API on our Express middleware, as a seller mounts it: `exact` and channel
 * (`batch-settlement`) routes, its payment.received webhooks to a receiver on loopback. Buyers pay with
 * the official client (bench/support/paying-buyers.ts), CONCURRENCY of each scheme, in a worker thread.
 */
async function paidApi(backendUrl: string, platformKey: string, chain: DevChain) {
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(backendUrl + path, { method, headers: { 'content-type': 'application/json', authorization: `Bearer ${platformKey}` }, body: body === undefined ? undefined : JSON.stringify(body) });
    const json = await res.json() as Record<string, any>;
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  // The webhook receiver: when each payment's delivery arrived.
  const arrivals = new Map<string, number>();
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { paymentId?: string; data?: { paymentId?: string } };
      arrivals.set(body.paymentId ?? body.data?.paymentId ?? '', Date.now());
      res.writeHead(200).end();
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  const webhookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  await call('PUT', '/v0/payments/acceptance', { enabled: true, payTo });
  const sellerKey = (await call('POST', '/v0/payments/seller-keys', {})).apiKey as string;
  const app = express();
  app.use(paymentMiddleware({ backendUrl, apiKey: sellerKey, routes: {
    'GET /report': { price: PRICE, description: 'A report, per call' },
    'GET /stream': { price: PRICE, scheme: 'batch-settlement', description: 'A stream, per call' },
  } }));
  for (const path of ['/report', '/stream']) app.get(path, (_req, res) => { res.json({ ok: true }); });
  const seller = createServer(app);
  seller.listen(0, '127.0.0.1');
  await once(seller, 'listening');
  const sellerUrl = `http://127.0.0.1:${(seller.address() as AddressInfo).port}`;
  const exactEndpoint = await call('POST', '/v0/payments/endpoints', { url: `${sellerUrl}/report`, priceUsdc: '0.001', webhookUrl, skipUrlCheck: true });
  await call('POST', '/v0/payments/endpoints', { url: `${sellerUrl}/stream`, priceUsdc: '0.001', skipUrlCheck: true });

  const [exactKeys, channelKeys] = await fundBuyers(chain, [CONCURRENCY, CONCURRENCY], '50');
  const buyers = {
    exact: startBuyers({ url: `${sellerUrl}/report`, scheme: 'exact', keys: exactKeys!, rpcUrl: chain.rpcUrl, network: 'eip155:84532', usdc: chain.usdcAddress }),
    channel: startBuyers({ url: `${sellerUrl}/stream`, scheme: 'batch-settlement', keys: channelKeys!, rpcUrl: chain.rpcUrl, network: 'eip155:84532', usdc: chain.usdcAddress, depositCalls: 20_000 }),
  };
  // Each buyer's first calls (a channel's deposit), not measured.
  await Promise.all([buyers.exact.payEach(1), buyers.channel.payEach(2)]);
  return {
    buyers,
    /** payment.received latency of the payments settled since `since`: settled (recorded) to the receiver's arrival, ms. */
    async webhookLatencies(payments: { find: (q: object, p: object) => { lean: () => Promise<Array<{ _id: string; endpointId: string | null; status: string; settledAt?: Date }>> } }, orgId: string, since: Date): Promise<number[]> {
      // The payments of the hours since `since` (equalities on the org's hour, as pages read them), then those settled since.
      const hours = [...new Set([hourOf(since), hourOf(new Date())])];
      const settled = (await Promise.all(hours.map((hour) => payments.find({ orgId, hour }, { endpointId: 1, status: 1, settledAt: 1 }).lean()))).flat()
        .filter((p) => p.endpointId === exactEndpoint.id && p.status === 'settled' && p.settledAt && p.settledAt >= since);
      const deadline = Date.now() + 30_000;
      while (settled.some((p) => !arrivals.has(p._id)) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      return settled.filter((p) => arrivals.has(p._id) && p.settledAt).map((p) => arrivals.get(p._id)! - p.settledAt!.getTime());
    },
    async stop() {
      await Promise.all([buyers.exact.stop(), buyers.channel.stop()]);
      for (const server of [seller, receiver]) { server.closeAllConnections(); await new Promise((resolve) => server.close(resolve)); }
    },
  };
}


async function main() {
  log('starting the embedded database and the backend ...');
  const [mongo, chain] = await Promise.all([provideMongoServer({ log: (line) => log(`  ${line}`) }), startDevChain()]);
  const port = await freePort();
  const metricsToken = randomBytes(16).toString('hex');
  const server = await startServer(loadConfig({
    AGENTGATE_MODE: 'dev', HOST: '127.0.0.1', LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', PORT: String(port), BASE_URL: `http://127.0.0.1:${port}`,
    MAIL_DOMAIN: 'history.test', DID_DOMAIN: `127.0.0.1%3A${port}`, SMTP_PORT: '0', METRICS_TOKEN: metricsToken,
    MASTER_KEY: randomBytes(32).toString('hex'), MONGODB_URI: mongo.uri, MONGODB_DB: `history_${randomBytes(4).toString('hex')}`,
    CHAIN_RPC_URL: chain.rpcUrl, CHAIN_NETWORK: 'base-sepolia', USDC_ADDRESS: chain.usdcAddress, USDC_EIP712_NAME: DEV_USDC_NAME, USDC_EIP712_VERSION: DEV_USDC_VERSION,
    RELAYER_PRIVATE_KEY: DEV_ACCOUNTS[0]!.privateKey,
  }));
  const db = server.app.db;
  let commands = 0;
  // Each command by name and collection, while `byKind` is set (the paid runs: where their commands go).
  let byKind: Map<string, number> | undefined;
  db.getClient().on('commandStarted', (e: { commandName: string; command: Record<string, unknown> }) => {
    commands++;
    if (byKind) { const key = `${e.commandName} ${String(e.command[e.commandName] ?? '')}`.trim(); byKind.set(key, (byKind.get(key) ?? 0) + 1); }
  });
  let api: Awaited<ReturnType<typeof paidApi>> | undefined;
  try {
    const signup = await (await fetch(`${server.url}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json() as { org_id: string; platform_key: string };
    const orgId = signup.org_id;
    await server.app.limits.orgLimits.set(orgId, { perKey: 1_000_000_000, perOrg: 1_000_000_000 });
    const endpointId = 'we_history';
    // Another seller's paid API, paid in both phases: its calls' records are not in the pages measured
    // (they would add to the recent hours the first pages show, in the second phase only).
    const payee = await (await fetch(`${server.url}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json() as { org_id: string; platform_key: string };
    await server.app.limits.orgLimits.set(payee.org_id, { perKey: 1_000_000_000, perOrg: 1_000_000_000 });
    api = await paidApi(server.url, payee.platform_key, chain);
    const paid = api;
    // Sign in to the console as an operator does (the form post), keeping its session cookie.
    const signIn = await fetch(`${server.url}/console/sign-in`, { method: 'POST', redirect: 'manual', body: new URLSearchParams({ key: signup.platform_key }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url } });
    const cookie = signIn.headers.getSetCookie().find((c) => c.startsWith('agentgate_console='))!.split(';')[0]!;

    const history = HistoryBuckets.for(db);
    const insert = async (collection: string, docs: object[]) => {
      if (!docs.length) return;
      // Payments are filed as a claim files them: their hour listed first (once per hour).
      if (collection === 'payments') for (const doc of docs as Array<{ orgId: string; createdAt: Date }>) await server.app.payments.records.noteHour(doc);
      if (collection === 'webhook_deliveries') for (const doc of docs as Array<{ orgId: string; createdAt: Date }>) await history.note(deliveriesScope(doc.orgId), doc.createdAt);
      if (collection === 'activity_logs') for (const doc of docs as Array<{ orgId: string; createdAt: Date }>) await history.note(activityScope(doc.orgId), doc.createdAt);
      await db.collection(collection).insertMany(docs as never[], { ordered: false });
    };
    // The recent day, in both phases: what the first pages show.
    const now = Date.now();
    const recent = Array.from({ length: RECENT }, (_, i) => paymentAt(orgId, endpointId, new Date(now - (RECENT - i) * 60_000), i));
    await insert('payments', recent.map((r) => r.payment));
    await insert('webhook_deliveries', recent.map((r) => r.delivery));
    await insert('activity_logs', recent.map((r) => r.activity));

    const month = new Date(now).toISOString().slice(0, 7);
    const lastDay = new Date(Date.UTC(Number(month.slice(0, 4)), Number(month.slice(5, 7)), 0)).toISOString().slice(0, 10);
    const scenarios: Array<{ name: string; path: string; headers: Record<string, string> }> = [
      { name: 'console payments page', path: '/console/payments', headers: { cookie } },
      { name: 'console CSV of this month', path: `/console/payments.csv?from=${month}-01&to=${lastDay}`, headers: { cookie } },
      { name: 'console webhook deliveries page', path: '/console/webhooks', headers: { cookie } },
      { name: 'API payments page (50)', path: '/v0/payments?limit=50', headers: { authorization: `Bearer ${signup.platform_key}` } },
      { name: 'API deliveries page (50)', path: '/v0/webhooks/deliveries?limit=50', headers: { authorization: `Bearer ${signup.platform_key}` } },
      { name: 'console activity page', path: '/console/activity', headers: { cookie } },
      { name: 'API activity log page (50)', path: '/v0/logs?limit=50', headers: { authorization: `Bearer ${signup.platform_key}` } },
      { name: '/metrics', path: '/metrics', headers: { authorization: `Bearer ${metricsToken}` } },
      { name: '/ready', path: '/ready', headers: {} },
    ];
    const get = async (s: typeof scenarios[number]) => {
      const res = await fetch(server.url + s.path, { headers: s.headers, signal: AbortSignal.timeout(TIMEOUT_MS) });
      await res.arrayBuffer();
      if (res.status >= 400 && !(s.path === '/ready' && res.status === 503)) throw new Error(`${s.name}: ${res.status}`);
    };
    // The database commands a second of the idle backend (its background rounds), before any paid call.
    const idleFrom = commands;
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    const idlePerSecond = (commands - idleFrom) / 10;
    log(`  idle: ${idlePerSecond.toFixed(1)} database commands a second`);
    const measure = async () => {
      const out = new Map<string, { p50: number; commands: number }>();
      // Paid calls first, each scheme's CONCURRENCY buyers at once: the whole call as the buyer sees it (402,
      // payment, paid request), and the database commands per paid call (the background rounds' included).
      // First in both phases, so that the pages below are read after the same aftermath (the channel
      // sweep claiming the vouchers, webhooks) in both.
      for (const [scheme, buyers] of [['exact', paid.buyers.exact], ['channel', paid.buyers.channel]] as const) {
        const name = `paid ${scheme} calls (concurrency ${CONCURRENCY})`;
        log(`  ${name} ...`);
        const before = commands;
        const since = new Date();
        byKind = new Map();
        const run: RunResult = await buyers.run(CONCURRENCY, PAID_RAMP_MS, PAID_WINDOW_MS);
        const kinds = [...byKind].sort((a, b) => b[1] - a[1]).slice(0, 12).map(([k, n]) => `${k} ${(n / run.paidInRun).toFixed(2)}`).join(', ');
        byKind = undefined;
        log(`  ${name}: commands per paid call by kind: ${kinds}`);
        if (run.failed) log(`  ${name}: ${run.failed} calls failed: ${JSON.stringify(run.failures)}`);
        out.set(name, { p50: run.call.p50, commands: (commands - before) / run.paidInRun });
        log(`  ${name}: p50 ${run.call.p50.toFixed(1)} ms, ${run.perSecond.toFixed(0)} paid calls/s, ${((commands - before) / run.paidInRun).toFixed(1)} commands per paid call`);
        if (scheme !== 'exact') continue;
        // Each of those payments' payment.received: from its settlement's record to the receiver's arrival.
        const latencies = await paid.webhookLatencies(server.app.payments.records.payments, payee.org_id, since);
        out.set('payment.received webhook latency', { p50: median(latencies), commands: Number.NaN });
        log(`  payment.received webhook latency: p50 ${median(latencies)} ms over ${latencies.length} payments`);
      }
      // The paid calls' aftermath (the channel sweep claiming their vouchers, the last webhooks) is over
      // before the pages are read: at 200,000 payments it fell into the second phase's last pages alone,
      // 27 voucher reads per request. Over: a sweep round has begun since the calls ended (its cursor,
      // channel_sweep_cursors), and the database commands of a second are back within the idle rate
      // measured before the calls (the change feed's poll, the heartbeats), QUIET_S seconds in a row.
      const quietFrom = Date.now();
      const sweptSince = async () => ((await db.collection('channel_sweep_cursors').find({}).toArray()) as unknown as Array<{ at: Date }>).some((c) => c.at.getTime() > quietFrom);
      for (let quiet = 0, last = commands; (quiet < QUIET_S || !await sweptSince()) && Date.now() - quietFrom < 180_000;) {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        quiet = commands - last <= idlePerSecond * 1.5 + 5 ? quiet + 1 : 0;
        last = commands;
      }
      log(`  quiet after ${((Date.now() - quietFrom) / 1000).toFixed(0)} s`);
      for (const s of scenarios) {
        // One unmeasured request first (caches, JIT), then REQUESTS one at a time.
        log(`  ${s.name} ...`);
        const times: number[] = [];
        let before = commands;
        try {
          await get(s);
          before = commands;
          byKind = new Map();
          for (let i = 0; i < REQUESTS; i++) {
            const from = performance.now();
            await get(s);
            times.push(performance.now() - from);
          }
        } catch (err) {
          if ((err as Error).name !== 'TimeoutError') throw err;
          byKind = undefined;
          log(`  ${s.name}: a request took over ${TIMEOUT_MS / 1000} s; not measured further`);
          out.set(s.name, { p50: Infinity, commands: Number.NaN });
          continue;
        }
        const kinds = [...byKind!].sort((a, b) => b[1] - a[1]).slice(0, 8).map(([k, n]) => `${k} ${(n / REQUESTS).toFixed(2)}`).join(', ');
        byKind = undefined;
        log(`  ${s.name}: commands per request by kind: ${kinds}`);
        out.set(s.name, { p50: median(times), commands: (commands - before) / REQUESTS });
        log(`  ${s.name}: p50 ${median(times).toFixed(1)} ms, ${((commands - before) / REQUESTS).toFixed(1)} commands per request`);
      }
      return out;
    };
    log(`measuring on the empty database (${RECENT} payments of the last hours), ${REQUESTS} requests per scenario ...`);
    const empty = await measure();

    log(`adding a year: ${PAYMENTS.toLocaleString('en-US')} payments with receipts, deliveries and log lines, ${JOBS.toLocaleString('en-US')} jobs that gave up ...`);
    const seedFrom = Date.now();
    // The year before this month: the month's CSV holds the same rows in both phases.
    const yearStart = Date.parse(`${month}-01T00:00:00.000Z`) - 366 * DAY_MS;
    for (let done = 0; done < PAYMENTS; done += BATCH) {
      const batch = Array.from({ length: Math.min(BATCH, PAYMENTS - done) }, (_, k) => {
        const i = RECENT + done + k;
        return paymentAt(orgId, endpointId, new Date(yearStart + Math.floor(((done + k) / PAYMENTS) * 365 * DAY_MS)), i);
      });
      await Promise.all([insert('payments', batch.map((b) => b.payment)), insert('webhook_deliveries', batch.map((b) => b.delivery)), insert('activity_logs', batch.map((b) => b.activity))]);
      if ((done / BATCH) % 20 === 0) log(`  ${done.toLocaleString('en-US')} payments (${((Date.now() - seedFrom) / 1000).toFixed(0)} s)`);
    }
    for (let done = 0; done < JOBS; done += BATCH) {
      // Over the 365 days up to now (not only before this month): the retention keeps the last week's share.
      const at = (k: number) => new Date(seedFrom - 365 * DAY_MS + Math.floor(((done + k) / JOBS) * 365 * DAY_MS));
      await insert('jobs', Array.from({ length: Math.min(BATCH, JOBS - done) }, (_, k) => ({
        name: k % 2 ? 'webhook-delivery' : 'mail-delivery', data: { id: `h${done + k}` }, type: 'normal', priority: 0,
        nextRunAt: null, lockedAt: null, lastRunAt: at(k), lastFinishedAt: at(k), failedAt: at(k), failCount: 1, failReason: 'gave up', lastModifiedBy: 'history',
      })));
    }
    log(`  seeded in ${((Date.now() - seedFrom) / 1000).toFixed(0)} s`);
    // What the year leaves on disk, per million payments (each payment has its receipt and a delivery).
    const storage = async (name: string) => {
      const stats = await db.db!.command({ collStats: name }) as { count: number; size: number; storageSize?: number; totalIndexSize?: number };
      if (stats.count === 0) return `${name}: empty`;
      const perMillion = (bytes = 0) => `${((bytes / Math.max(1, stats.count)) * 1e6 / 2 ** 30).toFixed(2)} GiB`;
      return `${name}: ${stats.count.toLocaleString('en-US')} documents, ${perMillion(stats.size)} of data and ${perMillion(stats.storageSize)} stored per million (indexes ${perMillion(stats.totalIndexSize)})`;
    };
    for (const name of ['payments', 'webhook_deliveries', 'activity_logs', 'jobs']) log(`  ${await storage(name)}`);
    // The year's given-up jobs as the job queue's tidying round leaves them: out of the queue, and only the
    // last JOB_RETENTION_DAYS of them kept. The first round after an upgrade does all of it at once.
    const tidyStart = Date.now();
    const jobs = db.db!.collection('jobs');
    // Rounds until the queue holds no job that gave up: a round that finds its batch moved by the server's
    // own round (running beside it) leaves the rest to that one, and the last minute's wait their minute.
    let rounds = 0;
    for (; ;) {
      rounds++;
      await server.app.jobs.tidyGivenUp();
      if (await jobs.countDocuments({ nextRunAt: null, lockedAt: null }, { limit: 1 }) === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    log(`  tidying the ${JOBS.toLocaleString('en-US')} given-up jobs (JOB_RETENTION_DAYS ${server.app.config.JOB_RETENTION_DAYS}) took ${((Date.now() - tidyStart) / 1000).toFixed(0)} s (${rounds} rounds here, beside the server's own)`);
    for (const name of ['jobs', 'jobs_given_up']) log(`  ${await storage(name)}`);

    // The closed days' payment totals, delivery and log counts as the day groups round (one process an
    // hour) would have written them over the year: each day's round at 01:00 the next day.
    const groupsStart = Date.now();
    const groups = [server.app.payments.totals.days, server.app.webhooks.dayGroups, server.app.logs.days];
    let lastRoundMs = 0;
    for (let at = yearStart + DAY_MS + 3_600_000; at <= Date.now(); at += DAY_MS) {
      const roundStart = Date.now();
      await dayGroupsRound(groups, history, new Date(at));
      lastRoundMs = Date.now() - roundStart;
    }
    log(`  the year's day groups written by its ${Math.round((Date.now() - yearStart) / DAY_MS)} daily rounds in ${((Date.now() - groupsStart) / 1000).toFixed(0)} s (the last round: ${lastRoundMs} ms; ${await server.app.payments.totals.days.written.countDocuments({ scope: `payments|${orgId}` })} days of payments)`);
    for (const name of ['history_buckets', 'history_day_groups']) log(`  ${await storage(name)}`);

    const year = await measure();
    log('');
    log(`| scenario | p50 empty (ms) | p50 after a year (ms) | ratio | commands/request empty | after a year |`);
    log(`|---|---|---|---|---|---|`);
    let within = 0;
    for (const name of empty.keys()) {
      const e = empty.get(name)!;
      const y = year.get(name)!;
      const ratio = y.p50 / e.p50;
      if (ratio <= 1.2) within++;
      const ms = (p50: number) => (Number.isFinite(p50) ? p50.toFixed(1) : `over ${TIMEOUT_MS / 1000} s`);
      const perCall = (n: number) => (Number.isNaN(n) ? '-' : n.toFixed(1));
      log(`| ${name} | ${ms(e.p50)} | ${ms(y.p50)} | ${Number.isFinite(ratio) ? `${ratio.toFixed(2)}x` : 'n/a'}${ratio > 1.2 ? ' (over 1.2x)' : ''} | ${perCall(e.commands)} | ${perCall(y.commands)} |`);
    }
    log('');
    log(`history: ${within} of ${empty.size} scenarios within 1.2x the empty database's p50 (${PAYMENTS.toLocaleString('en-US')} payments, ${JOBS.toLocaleString('en-US')} jobs)`);
  } finally {
    await api?.stop();
    await db.dropDatabase().catch(() => {});
    await server.close();
    await chain.stop();
    await mongo.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
