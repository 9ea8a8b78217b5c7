import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { Config } from '../../server/platform/config.js';
import { startServer, startWorker } from '../../server/server.js';
import { DELIVER_JOB } from '../../server/webhooks/webhook-service.js';
import { startTestServer, testConfig, type TestServer } from '../support/server.js';
import { startReceiver } from './receiver.js';
import { pay, sellerWithWebhook, waitForDelivery } from './seller.js';

const CLI = join(process.cwd(), 'bin', 'agentgate.js');

/** A TestServer-shaped handle on a server started from an explicit config (so others can share its database). */
async function serverOn(config: Config, workers: boolean): Promise<TestServer> {
  const running = await startServer(config, { workers });
  return { ...running, config, request: requester(running.url) };
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

/** The environment `agentgate worker` reads: the same database and master key as the test server. */
function workerEnv(config: Config): Record<string, string> {
  return {
    AGENTGATE_MODE: 'dev', HOST: '127.0.0.1', PORT: '0', BASE_URL: config.BASE_URL, MAIL_DOMAIN: config.MAIL_DOMAIN, DID_DOMAIN: config.DID_DOMAIN,
    MASTER_KEY: config.MASTER_KEY.toString('hex'), MONGODB_URI: config.MONGODB_URI, MONGODB_DB: config.MONGODB_DB,
    JOBS_PROCESS_EVERY_MS: String(config.JOBS_PROCESS_EVERY_MS), WEBHOOK_TIMEOUT_MS: String(config.WEBHOOK_TIMEOUT_MS), WEBHOOK_RETRY_BASE_MS: String(config.WEBHOOK_RETRY_BASE_MS),
    // The start line is an info line of the JSON log.
    LOG_LEVEL: 'info',
  };
}

async function spawnWorker(config: Config): Promise<ChildProcess> {
  const child = spawn(process.execPath, [CLI, 'worker'], { env: { ...process.env, ...workerEnv(config) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker did not start: ${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('"msg":"worker running"')) { clearTimeout(timer); resolve(); }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`worker exited with ${code}: ${output}`)); });
  });
  return child;
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
      const until = Date.now() + 10_000;
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
      const hooks = api.app.payments.onSettled.splice(0);
      const paymentId = await pay(api, seller);
      api.app.payments.onSettled.push(...hooks);
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
    let child: ChildProcess | undefined;
    let survivor: Awaited<ReturnType<typeof startWorker>> | undefined;
    try {
      child = await spawnWorker(config);
      const seller = await sellerWithWebhook(api, receiver.url);
      const paymentId = await pay(api, seller);
      await receiver.next(1);
      child.kill('SIGKILL');
      await new Promise((resolve) => child!.once('exit', resolve));

      survivor = await startWorker(config);
      await receiver.next(2);
      const delivery = await waitForDelivery(api, seller, paymentId, (d) => d.status === 'delivered');
      // Same event, same key: the receiver de-duplicates the half-finished first attempt.
      expect(receiver.received[1]!.headers['x-service-idempotency-key']).toBe(receiver.received[0]!.headers['x-service-idempotency-key']);
      expect(receiver.received[1]!.raw).toBe(receiver.received[0]!.raw);
      // The dead worker never recorded its attempt; the survivor's is the one on the log.
      expect(delivery.attempts.map((a: any) => a.statusCode)).toEqual([200]);
    } finally {
      if (child && child.exitCode === null) child.kill('SIGKILL');
      await survivor?.close();
      await api.app.db.dropDatabase().catch(() => {});
      await api.close();
      await receiver.close();
    }
  });
});
