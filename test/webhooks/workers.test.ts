import type { Config } from '../../server/platform/config.js';
import { startServer, startWorker } from '../../server/server.js';
import { DELIVER_JOB } from '../../server/webhooks/webhook-service.js';
import { startTestServer, testConfig, type TestServer } from '../support/server.js';
import { processEnv, spawnAgentgate, type AgentgateProcess } from '../support/processes.js';
import { startReceiver } from './receiver.js';
import { pay, sellerWithWebhook, waitForDelivery } from './seller.js';

/** A TestServer-shaped handle on a server started from an explicit config (so others can share its database). */
async function serverOn(config: Config, workers: boolean): Promise<TestServer> {
  const running = await startServer(config, { workers });
  return { ...running, config, stop: () => running.close(), request: requester(running.url) };
}

function requester(url: string): TestServer['request'] {
  return async (method, path, options = {}) => {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.key) headers.authorization = `Bearer ${options.key}`;
    const body = options.body !== undefined ? JSON.stringify(options.body) : options.rawBody;
    if (body !== undefined) headers['content-type'] ??= 'application/json';
    const response = await fetch(url + path, { method, headers, body });
    const text = await response.text();
    let parsed: unknown;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
    return { status: response.status, headers: response.headers, body: parsed, text };
  };
}

describe('workers on one database', () => {
  it('two servers with workers deliver each event exactly once, even when its job is enqueued twice', async () => {
    const receiver = await startReceiver();
    const a = await startTestServer({ TRUST_PROXY: 'true' });
    const b = await serverOn(await testConfig({ TRUST_PROXY: 'true', MONGODB_DB: a.config.MONGODB_DB, MASTER_KEY: a.config.MASTER_KEY.toString('hex') }), true);
    try {
      const seller = await sellerWithWebhook(a, receiver.url);
      const payments: string[] = [];
      for (let i = 0; i < 4; i++) payments.push(await pay(i % 2 ? a : b, seller));
      const deliveries = await Promise.all(payments.map((id) => waitForDelivery(a, seller, id, (d) => d.status === 'delivered')));
      // A second job for the same attempt (what a re-dispatch after a crash would enqueue), on each server.
      for (const d of deliveries) {
        await a.app.jobs.now(DELIVER_JOB, { deliveryId: d.id, round: 0, roundBase: 0 });
        await b.app.jobs.now(DELIVER_JOB, { deliveryId: d.id, round: 0, roundBase: 0 });
      }
      const fresh = await pay(a, seller);
      const freshDelivery = await waitForDelivery(a, seller, fresh, (d) => d.status === 'delivered');
      await a.app.jobs.now(DELIVER_JOB, { deliveryId: freshDelivery.id, round: 0, roundBase: 0 });
      await b.app.jobs.now(DELIVER_JOB, { deliveryId: freshDelivery.id, round: 0, roundBase: 0 });
      // Let both workers drain every job (theirs and the duplicates).
      const until = Date.now() + 30_000;
      while (Date.now() < until && (await a.app.db.collection('jobs').countDocuments({ name: DELIVER_JOB })) > 0) await new Promise((r) => setTimeout(r, 100));
      expect(await a.app.db.collection('jobs').countDocuments({ name: DELIVER_JOB })).toBe(0);

      const keys = receiver.received.map((r) => r.headers['x-service-idempotency-key']);
      expect(keys).toHaveLength(5);
      expect(new Set(keys).size).toBe(5);
      for (const d of [...deliveries, freshDelivery]) {
        const after = await a.request('GET', `/v0/webhooks/deliveries/${d.id}`, { key: seller.sellerKey });
        expect(after.body.attemptCount).toBe(1);
      }
    } finally {
      await b.close();
      await a.close();
      await receiver.close();
    }
  });

  it('loses nothing when the process dies between recording the payment and enqueueing: the next worker sends it', async () => {
    const receiver = await startReceiver();
    const api = await startTestServer({ TRUST_PROXY: 'true' });
    try {
      const seller = await sellerWithWebhook(api, receiver.url);
      // Simulate the crash: the settle hook that would enqueue never runs.
      const dispatch = jest.spyOn(api.app.payments.webhooks, 'settled').mockResolvedValue();
      const paymentId = await pay(api, seller);
      // The record (with its outbox entry) is written after the answer; the hooks would run after it.
      await api.app.payments.records.recordsWritten();
      dispatch.mockRestore();
      const stored = await api.app.db.collection('payments').findOne({ _id: paymentId as never });
      expect(stored).toMatchObject({ status: 'settled', webhook: { status: 'pending', eventId: expect.stringMatching(/^evt_/) } });
      expect(await api.app.db.collection('webhook_deliveries').countDocuments({ paymentId })).toBe(0);

      // A worker starting on the same database finds the pending outbox entry and delivers it.
      const worker = await startWorker(api.config);
      try {
        await receiver.next(1);
        const delivery = await waitForDelivery(api, seller, paymentId, (d) => d.status === 'delivered');
        expect(receiver.received[0]!.headers['x-service-idempotency-key']).toBe(stored!.webhook.eventId);
        expect(delivery.eventId).toBe(stored!.webhook.eventId);
      } finally {
        await worker.close();
      }
    } finally {
      await api.close();
      await receiver.close();
    }
  });

  it('a worker killed mid-delivery: its job is picked up by another worker and completed', async () => {
    // The first request is held open; the worker sending it is killed while it waits.
    const receiver = await startReceiver(['hang'], 200);
    const config = await testConfig({ TRUST_PROXY: 'true', WEBHOOK_TIMEOUT_MS: '1500' });
    const api = await serverOn(config, false);
    let child: AgentgateProcess | undefined;
    let survivor: Awaited<ReturnType<typeof startWorker>> | undefined;
    try {
      child = await spawnAgentgate('worker', processEnv(config));
      const seller = await sellerWithWebhook(api, receiver.url);
      const paymentId = await pay(api, seller);
      await receiver.next(1);
      await child.kill();

      survivor = await startWorker(config);
      await receiver.next(2);
      const delivery = await waitForDelivery(api, seller, paymentId, (d) => d.status === 'delivered');
      // Same event, same key: the receiver de-duplicates the half-finished first attempt.
      expect(receiver.received[1]!.headers['x-service-idempotency-key']).toBe(receiver.received[0]!.headers['x-service-idempotency-key']);
      expect(receiver.received[1]!.raw).toBe(receiver.received[0]!.raw);
      // The dead worker never recorded its attempt; the survivor's is the one on the log.
      expect(delivery.attempts.map((a: any) => a.statusCode)).toEqual([200]);
    } finally {
      await child?.kill();
      await survivor?.close();
      await api.app.db.dropDatabase().catch(() => {});
      await api.close();
      await receiver.close();
    }
  });
});

describe('three workers (two of them OS processes), one SIGKILLed mid-run', () => {
  it('the receiver gets every event answered 2xx exactly once, and each delivery records one successful attempt', async () => {
    // Long enough that requests held by the receiver do not time out while the scene is set up; the
    // dead worker's claims (lease: timeout + 2 s) and jobs (lease + 1 s) then expire about 11 s after it dies.
    // Ten attempts at once per process, so that the doomed worker leaves four of the first fourteen queued.
    const config = await testConfig({ TRUST_PROXY: 'true', WEBHOOK_TIMEOUT_MS: '8000', WEBHOOK_OUTBOX_SWEEP_MS: '600000', WEBHOOK_CONCURRENCY: '10' });
    const receiver = await startReceiver([], 'hang');
    const api = await serverOn(config, false);
    const workers: AgentgateProcess[] = [];
    let inProcess: Awaited<ReturnType<typeof startWorker>> | undefined;
    try {
      const seller = await sellerWithWebhook(api, receiver.url);
      // Settled while no worker runs and before anything is enqueued (the settle hook is held back).
      const dispatch = jest.spyOn(api.app.payments.webhooks, 'settled').mockResolvedValue();
      const first: string[] = [];
      for (let i = 0; i < 14; i++) first.push(await pay(api, seller));
      dispatch.mockRestore();

      // Worker 1 alone takes the jobs: 10 run at once (its concurrency), each held open by the receiver.
      const doomed = await spawnAgentgate('worker', processEnv(config));
      workers.push(doomed);
      await api.app.webhooks.sweepOutboxes(0);
      await receiver.next(10);
      await new Promise((r) => setTimeout(r, 300));
      expect(receiver.received).toHaveLength(10);

      // Killed while every one of its deliveries is in flight: none gets an answer, none is recorded.
      await doomed.kill();
      const until = Date.now() + 30_000;
      while (receiver.received.some((r) => !r.aborted) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      expect(receiver.received.filter((r) => r.aborted)).toHaveLength(10);
      receiver.setReplies([], 200);

      // Two more workers compete for everything: the dead worker's jobs once their locks expire, two
      // extra copies of every job so far (what re-dispatches after crashes enqueue), and new payments.
      workers.push(await spawnAgentgate('worker', processEnv(config)));
      inProcess = await startWorker(config);
      const firstDeliveries = await Promise.all(first.map((id) => waitForDelivery(api, seller, id, () => true)));
      for (const d of firstDeliveries) {
        for (let copy = 0; copy < 2; copy++) await api.app.jobs.now(DELIVER_JOB, { deliveryId: d.id, round: 0, roundBase: 0 });
      }
      const later: string[] = [];
      for (let i = 0; i < 8; i++) later.push(await pay(api, seller));

      const all = [...first, ...later];
      const deliveries = await Promise.all(all.map((id) => waitForDelivery(api, seller, id, (d) => d.status === 'delivered', 60_000)));
      // Every job, the dead worker's included, runs to its end.
      const drained = Date.now() + 30_000;
      while (Date.now() < drained && (await api.app.db.collection('jobs').countDocuments({ name: DELIVER_JOB })) > 0) await new Promise((r) => setTimeout(r, 200));
      expect(await api.app.db.collection('jobs').countDocuments({ name: DELIVER_JOB })).toBe(0);

      // What the receiver saw, counted by idempotency key (the event id).
      const answered = new Map<string, number>();
      for (const r of receiver.received) {
        const key = String(r.headers['x-service-idempotency-key']);
        if (r.answered !== undefined && r.answered >= 200 && r.answered < 300) answered.set(key, (answered.get(key) ?? 0) + 1);
      }
      const eventIds = deliveries.map((d) => d.eventId as string);
      expect(new Set(eventIds).size).toBe(all.length);
      expect(Object.fromEntries(answered)).toEqual(Object.fromEntries(eventIds.map((id) => [id, 1])));
      // The only requests beyond one per event are the ten the dead worker never got answers to.
      expect(receiver.received).toHaveLength(all.length + 10);
      for (const d of deliveries) {
        expect({ id: d.id, attemptCount: d.attemptCount, codes: d.attempts.map((a: any) => a.statusCode) }).toEqual({ id: d.id, attemptCount: 1, codes: [200] });
      }
    } finally {
      for (const w of workers) await w.kill();
      await inProcess?.close();
      await api.app.db.dropDatabase().catch(() => {});
      await api.close();
      await receiver.close();
    }
  }, 180_000);
});

describe('claims of dead workers', () => {
  it('an expired claim is taken over by exactly one of many jobs that find it at once', async () => {
    const config = await testConfig({ TRUST_PROXY: 'true', WEBHOOK_OUTBOX_SWEEP_MS: '600000' });
    const receiver = await startReceiver([], 200);
    const api = await serverOn(config, false);
    const workers: Array<Awaited<ReturnType<typeof startWorker>>> = [];
    try {
      const seller = await sellerWithWebhook(api, receiver.url);
      const dispatch = jest.spyOn(api.app.payments.webhooks, 'settled').mockResolvedValue();
      const paid: string[] = [];
      for (let i = 0; i < 12; i++) paid.push(await pay(api, seller));
      dispatch.mockRestore();
      await api.app.webhooks.sweepOutboxes(0); // one delivery and one job each; no worker runs yet
      const deliveries = await api.app.db.collection('webhook_deliveries').find({ paymentId: { $in: paid } }).toArray();
      expect(deliveries).toHaveLength(12);
      for (const d of deliveries) {
        // A worker claimed the first attempt and died: its claim has expired, nothing was sent or recorded.
        await api.app.db.collection('webhook_attempt_claims').insertOne({ _id: `${d._id}:0:1` as never, expiresAt: new Date(Date.now() - 1_000) });
        // And seven more copies of the job (re-dispatches), so eight jobs meet the expired claim at once.
        for (let copy = 0; copy < 7; copy++) await api.app.jobs.now(DELIVER_JOB, { deliveryId: d._id, round: 0, roundBase: 0 });
      }
      workers.push(...await Promise.all([0, 1, 2].map(() => startWorker(config))));

      const delivered = await Promise.all(paid.map((id) => waitForDelivery(api, seller, id, (d) => d.status === 'delivered')));
      const drained = Date.now() + 30_000;
      while (Date.now() < drained && (await api.app.db.collection('jobs').countDocuments({ name: DELIVER_JOB })) > 0) await new Promise((r) => setTimeout(r, 100));
      expect(await api.app.db.collection('jobs').countDocuments({ name: DELIVER_JOB })).toBe(0);
      const keys = receiver.received.map((r) => r.headers['x-service-idempotency-key']);
      expect(keys.slice().sort()).toEqual(delivered.map((d) => d.eventId).sort());
      for (const d of delivered) expect(d.attempts.map((a: any) => a.statusCode)).toEqual([200]);
    } finally {
      for (const w of workers) await w.close();
      await api.app.db.dropDatabase().catch(() => {});
      await api.close();
      await receiver.close();
    }
  });

  it('a worker that died between recording a failed attempt and scheduling the next: a sweep resumes the schedule', async () => {
    // The receiver answers at once: the default attempt timeout (10 s), not 1 s, so that a CPU-starved
    // machine's slow answer is not recorded as a timeout instead of the 500 or 200 it was.
    const config = await testConfig({ TRUST_PROXY: 'true', WEBHOOK_RETRY_BASE_MS: '500', WEBHOOK_OUTBOX_SWEEP_MS: '300' });
    const receiver = await startReceiver([500, 500], 200);
    const api = await serverOn(config, false);
    let worker: Awaited<ReturnType<typeof startWorker>> | undefined;
    try {
      const seller = await sellerWithWebhook(api, receiver.url);
      worker = await startWorker(config);
      const paymentId = await pay(api, seller);
      await receiver.next(1);
      await worker.close();
      // The first attempt (500) is on record; remove the job it scheduled, as if its worker had died first.
      const pending = await waitForDelivery(api, seller, paymentId, (d) => d.attemptCount === 1);
      expect(pending.status).toBe('pending');
      await api.app.db.collection('jobs').deleteMany({ name: DELIVER_JOB });

      worker = await startWorker(config);
      const delivery = await waitForDelivery(api, seller, paymentId, (d) => d.status === 'delivered');
      // The schedule goes on from the second attempt: one 500 more, then 200, and no attempt repeated.
      expect(delivery.attempts.map((a: any) => a.statusCode)).toEqual([500, 500, 200]);
      expect(receiver.received).toHaveLength(3);
    } finally {
      await worker?.close();
      await api.app.db.dropDatabase().catch(() => {});
      await api.close();
      await receiver.close();
    }
  });
});
