// Webhooks across a database restart (PostgreSQL under the embedded FerretDB stopped for 4 s while payments
// settle, as an operator's restart or a failover does): every settled payment's payment.received reaches the
// receiver once, soon after the database is back, whether its settlement, its outbox dispatch or its
// delivery job met the outage; and a process still stops in seconds afterwards.
import { provideMongoServer, type MongoServer } from '../../server/dev/database/mongo-server.js';
import { startWorker } from '../../server/server.js';
import { fundedBuyer, paymentHeaderV1, signAuthorization } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
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
