// Webhooks across a database restart (PostgreSQL under the embedded FerretDB stopped for 4 s while payments
// settle, as an operator's restart or a failover does): every settled payment's payment.received reaches the
// receiver once, soon after the database is back, whether its settlement, its outbox dispatch or its
// delivery job met the outage; and a process still stops in seconds afterwards.
import { once } from 'node:events';
import { connect, createServer, type AddressInfo } from 'node:net';
import { MongoClient } from 'mongodb';
import { provideMongoServer, type MongoServer } from '../../server/dev/database/mongo-server.js';
import { startWorker } from '../../server/server.js';
import { capturedLog } from '../support/captured-log.js';
import { fundedBuyer, paymentHeaderV1, signAuthorization } from '../support/chain.js';
import { startTestServer, testConfig, type TestServer } from '../support/server.js';
import { startReceiver } from './receiver.js';
import { sellerWithWebhook, type WebhookSeller } from './seller.js';

let mongo: MongoServer;
beforeAll(async () => {
  // A database of its own: it is restarted below, which the suite's shared one must never be.
  mongo = await provideMongoServer({ env: { ...process.env, MONGODB_URI: '' } });
}, 120_000);
afterAll(async () => { await mongo?.stop(); });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Pays once, as a buyer's client does: the same signed payment is sent again after a retryable answer
 * (a 503 while the database is away, no answer at all), until it is settled.
 */
async function payThrough(server: TestServer, seller: WebhookSeller): Promise<string> {
  const buyer = await fundedBuyer('1');
  const header = paymentHeaderV1(await signAuthorization(buyer, { to: seller.payTo, value: 10_000n }));
  for (const deadline = Date.now() + 90_000; ;) {
    const res = await server.request('POST', '/v0/payments/redeem', { key: seller.sellerKey, body: { paymentHeader: header, resource: seller.resource, amount: '0.01' } }).catch(() => undefined);
    if (res?.status === 200) return res.body.paymentId as string;
    if (res && res.status !== 503 && res.body?.error !== 'settlement_pending') throw new Error(`redeem: ${res.status} ${res.text}`);
    if (Date.now() > deadline) throw new Error(`redeem still not settled: ${res?.status} ${res?.text}`);
    await sleep(250);
  }
}

it('every payment settled around a database restart is delivered once, within seconds of the database being back; stops stay short', async () => {
  const receiver = await startReceiver();
  const overrides = { TRUST_PROXY: 'true', MONGODB_URI: mongo.uri, WEBHOOK_RETRY_BASE_MS: '200', WEBHOOK_OUTBOX_SWEEP_MS: '2000', RECONCILE_AFTER_MS: '5000', RECONCILE_EVERY_MS: '2000' };
  const api = await startTestServer(overrides);
  const worker = await startWorker(api.config);
  try {
    const seller = await sellerWithWebhook(api, receiver.url);
    // Four buyers paying one after another each, the database stopped once a few payments are in.
    const paid: string[] = [];
    let restart: Promise<void> | undefined;
    await Promise.all(Array.from({ length: 4 }, async () => {
      for (let i = 0; i < 8; i++) {
        paid.push(await payThrough(api, seller));
        if (paid.length === 6) restart ??= mongo.restartBackend!(4_000);
      }
    }));
    await restart;
    const back = Date.now();

    // Every payment's delivery made, and the receiver answered once per event.
    const deliveries = api.app.db.collection('webhook_deliveries');
    for (;;) {
      const delivered = await deliveries.countDocuments({ paymentId: { $in: paid }, status: 'delivered' }).catch(() => 0);
      if (delivered === paid.length) break;
      if (Date.now() - back > 30_000) {
        const pending = await deliveries.find({ status: { $ne: 'delivered' } }).limit(5).toArray();
        throw new Error(`${paid.length - delivered} of ${paid.length} deliveries not made 30 s after the database came back: ${JSON.stringify(pending)}`);
      }
      await sleep(250);
    }
    const byEvent = new Map<string, number>();
    for (const r of receiver.received) if (r.answered === 200) byEvent.set(String(r.headers['x-service-idempotency-key']), (byEvent.get(String(r.headers['x-service-idempotency-key'])) ?? 0) + 1);
    expect(byEvent.size).toBe(paid.length);
    expect([...byEvent.values()].every((n) => n === 1)).toBe(true);
    // Nothing due is left waiting, as /ready and /metrics report it.
    expect(await api.app.webhooks.oldestDueMs()).toBe(0);
    const ready = await api.request('GET', '/ready');
    expect(ready.body).toMatchObject({ checks: { webhooks: 'ok' }, webhooks: { oldestDueSeconds: 0 } });
  } finally {
    // A graceful stop after the outage ends in seconds: nothing waits out a timeout (it once took 85 s).
    const stopping = Date.now();
    await worker.close();
    await api.close();
    expect(Date.now() - stopping).toBeLessThan(15_000);
    await receiver.close();
  }
}, 240_000);

it('a process started while the database is away waits for it and starts once it is back, instead of failing its start', async () => {
  const api = await startTestServer({ MONGODB_URI: mongo.uri });
  try {
    let down!: () => void;
    const away = new Promise<void>((resolve) => { down = resolve; });
    // PostgreSQL under the engine stopped for 4 s; the worker starts a moment into it (the engine itself still accepts connections).
    const outage = mongo.restartBackend!(4_000).finally(() => down());
    await sleep(500);
    let startedAt = 0;
    const starting = startWorker(api.config).then((worker) => { startedAt = Date.now(); return worker; });
    await away;
    const back = Date.now();
    const worker = await starting;
    try {
      await outage;
      // It came up after the database did, and runs: it is registered as a live process.
      expect(startedAt).toBeGreaterThanOrEqual(back);
      expect(await worker.app.db.collection('processes').countDocuments({})).toBeGreaterThanOrEqual(2);
    } finally {
      await worker.close();
    }
  } finally {
    await api.close();
  }
}, 120_000);

/**
 * A TCP proxy in front of the database that holds the first command naming `command` (the bytes of a wire
 * message carry its name) until `before` has run, then passes it and everything after it on.
 */
async function holdingProxy(target: string, command: string, before: () => Promise<void>) {
  const { hostname, port } = new URL(target);
  let held = false;
  const proxy = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    upstream.pipe(client);
    client.on('data', (chunk: Buffer) => {
      if (held || !chunk.includes(command)) { upstream.write(chunk); return; }
      held = true;
      client.pause();
      void before().finally(() => { upstream.write(chunk); client.resume(); });
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  return {
    uri: `mongodb://127.0.0.1:${(proxy.address() as AddressInfo).port}/`,
    held: () => held,
    close: () => new Promise<void>((resolve) => { proxy.close(() => resolve()); }),
  };
}

it('a start the database interrupts after its connection opened is made again in the process, which runs once the database is back', async () => {
  // The outage begins while the start creates its indexes: the start's first query has answered, so the
  // wait for the database at the start is behind it. (It used to fail the start: a relaunch and a new boot.)
  let outage: Promise<void> | undefined;
  const direct = await MongoClient.connect(mongo.uri);
  const proxy = await holdingProxy(mongo.uri, 'createIndexes', async () => {
    outage = mongo.restartBackend!(3_000);
    // Its PostgreSQL is down once a query through the engine fails.
    while (await direct.db('probe').collection('probe').findOne({}).then(() => true, () => false)) await sleep(50);
  });
  const { log, lines } = capturedLog();
  try {
    const worker = await startWorker(await testConfig({ MONGODB_URI: proxy.uri }), { log });
    try {
      await outage;
      expect(proxy.held()).toBe(true);
      const restarts = lines.filter((l) => l.msg === 'the database went away during the start; starting again');
      // Made again once or more while the database was away, each attempt numbered.
      expect(restarts.map((l) => l.attempt)).toEqual(restarts.map((_, i) => i + 1));
      expect(restarts.length).toBeGreaterThan(0);
      // The line that says it runs carries the time the interrupted attempt took.
      expect(worker.app.startSteps.steps['interrupted by the database']).toBeGreaterThan(0);
      // It runs: registered as a live process, its indexes made.
      expect(await worker.app.db.collection('processes').countDocuments({ _id: worker.app.processes.id } as never)).toBe(1);
      expect((await worker.app.db.collection('payments').indexes()).length).toBeGreaterThan(1);
    } finally {
      await worker.close();
    }
  } finally {
    await outage;
    await direct.close();
    await proxy.close();
  }
}, 120_000);

it('a database that cannot be reached at all fails the start at once, naming MONGODB_URI, without starting again', async () => {
  const nothing = createServer();
  nothing.listen(0, '127.0.0.1');
  await once(nothing, 'listening');
  const { port } = nothing.address() as AddressInfo;
  await new Promise<void>((resolve) => { nothing.close(() => resolve()); });
  const { log, lines } = capturedLog();
  await expect(startWorker(await testConfig({ MONGODB_URI: `mongodb://127.0.0.1:${port}/` }), { log })).rejects.toThrow(/^cannot connect to the database at MONGODB_URI: /);
  expect(lines.filter((l) => String(l.msg).includes('starting again'))).toEqual([]);
}, 60_000);
