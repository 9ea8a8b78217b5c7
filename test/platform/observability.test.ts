// What an operator of N `serve` and M `worker` processes sees (issue 19): JSON log lines that carry the
// request id, an access line per request, /metrics behind a bearer token or on a private port, and a real
// `agentgate worker` process that logs JSON and is scraped on its METRICS_PORT.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import Router from '@koa/router';
import { startServer } from '../../server/server.js';
import { AppError } from '../../server/platform/errors.js';
import { testConfig } from '../support/server.js';
import { capturedLog, type LogLine as Line } from '../support/captured-log.js';
import { freePort } from '../../server/platform/net.js';
import { DELIVER_JOB as MAIL_JOB } from '../../server/mail/delivery.js';
import { DELIVER_JOB as WEBHOOK_JOB } from '../../server/webhooks/webhook-service.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { startReceiver } from '../webhooks/receiver.js';
import { pay, sellerWithWebhook, waitForDelivery } from '../webhooks/seller.js';

const CLI = join(process.cwd(), 'bin', 'agentgate.js');
const TOKEN = 'metrics-token-0123456789abcdef';

/** The value of one sample in Prometheus text, matched on its name and exact label set; undefined if absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const found = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (JSON.stringify(Object.entries(found).sort()) === JSON.stringify(Object.entries(labels).sort())) return Number(m[3]);
  }
  return undefined;
}

const waitFor = async <T>(find: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 15_000): Promise<T> => {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const found = await find();
    if (found !== undefined) return found;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe('request ids and the access log', () => {
  const { log, lines } = capturedLog();
  let server: TestServer;
  beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }, { log }); });
  afterAll(async () => { await server?.close(); });

  const accessLine = (reqId: string) => waitFor(() => lines.find((l) => l.reqId === reqId && l.msg === 'request'), `the access line of ${reqId}`);

  it('echoes a sane X-Request-Id and writes one JSON access line carrying it, without the query string', async () => {
    const res = await server.request('GET', '/v0/whoami?pageToken=secret-ish', { headers: { 'x-request-id': 'lb-7f3a.9:client_1' } });
    expect(res.status).toBe(401);
    expect(res.headers.get('x-request-id')).toBe('lb-7f3a.9:client_1');
    const line = await accessLine('lb-7f3a.9:client_1');
    expect(line).toMatchObject({ level: 'info', area: 'http', method: 'GET', path: '/v0/whoami', route: '/v0/whoami', status: 401, pid: process.pid });
    expect(line.durationMs).toEqual(expect.any(Number));
    expect(new Date(line.time).toISOString()).toBe(line.time);
    expect(lines.filter((l) => l.reqId === 'lb-7f3a.9:client_1' && l.msg === 'request')).toHaveLength(1);
  });

  it('generates an id when none is sent or the one sent is not sane', async () => {
    for (const sent of [undefined, 'has spaces in it', 'x'.repeat(65), 'quote"and{brace}']) {
      const res = await server.request('GET', '/v0/identity-types', { headers: sent === undefined ? {} : { 'x-request-id': sent } });
      const id = res.headers.get('x-request-id')!;
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      expect(await accessLine(id)).toMatchObject({ route: '/v0/identity-types', status: res.status });
    }
  });

  it('labels unknown paths "unmatched", masks capability tokens in paths, and keeps probes out of the info log', async () => {
    await server.request('GET', '/no/such/route/4711', { headers: { 'x-request-id': 'unmatched-1' } });
    expect(await accessLine('unmatched-1')).toMatchObject({ route: 'unmatched', path: '/no/such/route/4711', status: 404 });
    await server.request('GET', '/v0/calendar/feed/cal_supersecretfeedtoken.ics', { headers: { 'x-request-id': 'feed-1' } });
    const feed = await accessLine('feed-1');
    expect(feed.route).toBe('/v0/calendar/feed/:token.ics');
    expect(feed.path).toBe('/v0/calendar/feed/:token.ics');
    expect(JSON.stringify(lines)).not.toContain('supersecretfeedtoken');
    await server.request('GET', '/health', { headers: { 'x-request-id': 'probe-1' } });
    await server.request('GET', '/v0/identity-types', { headers: { 'x-request-id': 'after-probe' } });
    await accessLine('after-probe');
    expect(lines.find((l) => l.reqId === 'probe-1')).toBeUndefined();
  });

  it('a line a service writes while serving a request carries that request id', async () => {
    const [alice, bob] = [await signUp(server), await signUp(server)];
    const res = await server.request('POST', '/v0/messages/send', {
      key: alice.identity.rawKey, headers: { 'x-request-id': 'send-mail-1' },
      body: { to: [bob.identity.emailAddress], subject: 'hello', text: 'hello' },
    });
    expect(res.status).toBe(201);
    const queued = await waitFor(() => lines.find((l) => l.msg === 'mail queued' && l.reqId === 'send-mail-1'), 'the mail service line');
    expect(queued).toMatchObject({ area: 'mail', identityId: alice.identity.identityId, recipients: 1 });
    // Addresses are not the operator's business: the line has counts, never the correspondents.
    expect(JSON.stringify(queued)).not.toContain(bob.identity.emailAddress);
    // Let the delivery (a job, over SMTP to our own listener) finish before the server closes under it.
    const messageId = encodeURIComponent(res.body.messageId);
    await waitFor(async () => {
      const own = await server.request('GET', `/v0/messages/${messageId}`, { key: alice.identity.rawKey });
      return own.body.delivery?.status === 'delivered' ? true : undefined;
    }, 'the mail delivery');
  });
});

describe('errors in the log', () => {
  it('a 5xx we chose is one line with its code; an unexpected error has its stack; the client sees neither', async () => {
    const { log, lines } = capturedLog();
    const failing = () => {
      const router = new Router();
      router.get('/test/unavailable', () => { throw new AppError(503, 'upstream_unavailable', 'The upstream is down'); });
      router.get('/test/boom', () => { throw new TypeError('kaboom at the bottom'); });
      return router;
    };
    const server = await startServer(await testConfig(), { extension: { routes: [failing], operations: [] }, workers: false, log });
    try {
      const chosen = await fetch(`${server.url}/test/unavailable`, { headers: { 'x-request-id': 'chosen-5xx' } });
      expect(chosen.status).toBe(503);
      expect(await chosen.json()).toEqual({ error: 'upstream_unavailable', message: 'The upstream is down', status: 503 });
      const boom = await fetch(`${server.url}/test/boom`, { headers: { 'x-request-id': 'unexpected-5xx' } });
      expect(boom.status).toBe(500);
      const body = await boom.text();
      expect(JSON.parse(body)).toEqual({ error: 'internal_error', message: 'Internal server error', status: 500 });
      expect(body).not.toContain('kaboom');

      const errorsOf = (reqId: string) => lines.filter((l) => l.reqId === reqId && l.level === 'error');
      expect(errorsOf('chosen-5xx')).toEqual([expect.objectContaining({ msg: 'The upstream is down', code: 'upstream_unavailable', status: 503, route: '/test/unavailable' })]);
      expect(errorsOf('chosen-5xx')[0]).not.toHaveProperty('err');
      const [unexpected] = errorsOf('unexpected-5xx');
      expect(unexpected).toMatchObject({ msg: 'request failed', route: '/test/boom', err: { type: 'TypeError', message: 'kaboom at the bottom' } });
      expect(unexpected!.err.stack).toContain('kaboom at the bottom\n    at ');
      expect(lines.find((l) => l.reqId === 'unexpected-5xx' && l.msg === 'request')).toMatchObject({ status: 500, route: '/test/boom' });
    } finally {
      await server.app.db.dropDatabase().catch(() => {});
      await server.close();
    }
  });
});

describe('/metrics on the main port', () => {
  it('is an unknown route (404) without METRICS_TOKEN', async () => {
    const server = await startTestServer();
    try {
      const res = await server.request('GET', '/metrics', { key: TOKEN });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'not_found', message: expect.any(String), status: 404 });
    } finally {
      await server.close();
    }
  });

  describe('with METRICS_TOKEN', () => {
    let server: TestServer;
    beforeAll(async () => { server = await startTestServer({ METRICS_TOKEN: TOKEN }); });
    afterAll(async () => { await server?.close(); });

    it('answers 401 {error, message, status} without the token, with a wrong one, or another scheme', async () => {
      for (const authorization of [undefined, `Bearer ${TOKEN}x`, 'Bearer short', `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`, `Bearer ${TOKEN} extra`]) {
        const res = await server.request('GET', '/metrics', { headers: authorization ? { authorization } : {} });
        expect([authorization, res.status]).toEqual([authorization, 401]);
        expect(res.body).toEqual({ error: 'unauthorized', message: expect.stringContaining('METRICS_TOKEN'), status: 401 });
        expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
        expect(res.text).not.toContain('agentgate_');
      }
      // An API key of the service is not the metrics token.
      const agent = await signUp(server);
      expect((await server.request('GET', '/metrics', { key: agent.platform_key })).status).toBe(401);
      expect((await server.request('POST', '/metrics', { key: TOKEN, body: {} })).status).toBe(405);
    });

    it('serves Prometheus text with the right token: HTTP latency by route pattern, job queue depth, process metrics', async () => {
      const id = 'cal_abc123';
      await server.request('GET', `/v0/calendar/${id}`); // 401: no key
      await server.request('GET', '/v0/identity-types');
      const res = await server.request('GET', '/metrics', { key: TOKEN });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(sample(res.text, 'agentgate_http_request_duration_seconds_count', { method: 'GET', route: '/v0/calendar/:eventId', status: '4xx' })).toBe(1);
      expect(sample(res.text, 'agentgate_http_request_duration_seconds_count', { method: 'GET', route: '/v0/identity-types', status: '2xx' })).toBeGreaterThanOrEqual(1);
      expect(res.text).not.toContain(id);
      expect(sample(res.text, 'agentgate_job_queue_depth', { name: WEBHOOK_JOB })).toBe(0);
      expect(sample(res.text, 'agentgate_process_resident_memory_bytes')).toBeGreaterThan(0);
      for (const name of ['agentgate_paid_requests_total', 'agentgate_settle_duration_seconds', 'agentgate_webhook_attempts_total', 'agentgate_relayer_leases_held']) {
        expect(res.text).toContain(`# TYPE ${name} `);
      }
      // The scrape itself is counted under its own fixed label.
      const again = await server.request('GET', '/metrics', { key: TOKEN });
      expect(sample(again.text, 'agentgate_http_request_duration_seconds_count', { method: 'GET', route: '/metrics', status: '2xx' })).toBe(1);
    });

    it('reads the job queue depth from the database at scrape time: scheduled jobs count, removed ones stop counting', async () => {
      const depth = async () => sample((await server.request('GET', '/metrics', { key: TOKEN })).text, 'agentgate_job_queue_depth', { name: MAIL_JOB });
      expect(await depth()).toBe(0);
      const later = new Date(Date.now() + 3600_000);
      await server.app.jobs.schedule(later, MAIL_JOB, { id: 'msg_notreal1' });
      await server.app.jobs.schedule(later, MAIL_JOB, { id: 'msg_notreal2' });
      expect(await depth()).toBe(2);
      await server.app.db.collection('jobs').deleteMany({ name: MAIL_JOB, 'data.id': { $in: ['msg_notreal1', 'msg_notreal2'] } });
      expect(await depth()).toBe(0);
    });
  });
});

describe('METRICS_PORT', () => {
  it('serves /metrics without a token on its own listener, and nothing else there', async () => {
    const server = await startTestServer({ METRICS_PORT: '0' });
    try {
      expect(server.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      const res = await fetch(server.metricsUrl!);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await res.text()).toContain('# TYPE agentgate_job_queue_depth gauge');
      const other = await fetch(server.metricsUrl!.replace(/\/metrics$/, '/v0/whoami'));
      expect(other.status).toBe(404);
      expect(await other.json()).toEqual({ error: 'not_found', message: expect.any(String), status: 404 });
      expect((await fetch(server.metricsUrl!, { method: 'POST' })).status).toBe(405);
      // The main port still has no /metrics: no METRICS_TOKEN.
      expect((await server.request('GET', '/metrics')).status).toBe(404);
    } finally {
      await server.close();
    }
  });
});

describe('webhook outcomes', () => {
  it('counts a delivered attempt, a retry and a failure, each with one JSON line outside any request', async () => {
    const { log, lines } = capturedLog();
    const server = await startTestServer({ TRUST_PROXY: 'true', WEBHOOK_RETRY_BASE_MS: '20', METRICS_TOKEN: TOKEN }, { log });
    const ok = await startReceiver([], 200);
    // A 5xx is retried; a 4xx then stops the delivery at once.
    const refusing = await startReceiver([500], 400);
    try {
      const outcomes = async () => {
        const text = (await server.request('GET', '/metrics', { key: TOKEN })).text;
        return Object.fromEntries(['delivered', 'retry', 'failed'].map((outcome) => [outcome, sample(text, 'agentgate_webhook_attempts_total', { outcome }) ?? 0]));
      };
      expect(await outcomes()).toEqual({ delivered: 0, retry: 0, failed: 0 });

      const good = await sellerWithWebhook(server, ok.url);
      const delivered = await waitForDelivery(server, good, await pay(server, good), (d) => d.status === 'delivered');
      const bad = await sellerWithWebhook(server, refusing.url);
      const failed = await waitForDelivery(server, bad, await pay(server, bad), (d) => d.status === 'failed');
      expect(failed.attemptCount).toBe(2);
      // An attempt is counted and logged just after its record is written (the delivery may already read
      // "failed"): wait for the three attempts to be counted and logged, then check what was.
      const counted = await waitFor(async () => {
        const seen = await outcomes();
        return seen.delivered + seen.retry + seen.failed >= 3 ? seen : undefined;
      }, 'three webhook attempts counted');
      expect(counted).toEqual({ delivered: 1, retry: 1, failed: 1 });

      const about = (id: string) => lines.filter((l) => l.deliveryId === id);
      await waitFor(() => (about(delivered.id).length >= 1 && about(failed.id).length >= 2) || undefined, 'the attempts\' log lines');
      expect(about(delivered.id)).toEqual([expect.objectContaining({ level: 'info', area: 'webhooks', msg: 'webhook delivered', outcome: 'delivered', attempt: 1, statusCode: 200, paymentId: delivered.paymentId })]);
      expect(about(failed.id)).toEqual([
        expect.objectContaining({ level: 'warn', msg: 'webhook attempt failed, will retry', outcome: 'retry', attempt: 1, statusCode: 500 }),
        expect.objectContaining({ level: 'warn', msg: 'webhook delivery failed', outcome: 'failed', attempt: 2, statusCode: 400 }),
      ]);
      // Attempts run as jobs, even when the request that settled the payment started them in-process.
      for (const line of [...about(delivered.id), ...about(failed.id)]) expect(line.reqId).toBeUndefined();
    } finally {
      await server.close();
      await ok.close();
      await refusing.close();
    }
  });
});

describe('agentgate worker, a real process', () => {
  let api: TestServer;
  let child: ChildProcess | undefined;
  beforeAll(async () => { api = await startTestServer(); });
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await api?.close();
  });

  it('prints JSON log lines, its start line with its pid, and serves /metrics on its METRICS_PORT', async () => {
    const metricsPort = await freePort();
    const { config } = api;
    child = spawn(process.execPath, [CLI, 'worker'], {
      env: {
        ...process.env, AGENTGATE_MODE: 'dev', BASE_URL: config.BASE_URL, MAIL_DOMAIN: config.MAIL_DOMAIN, DID_DOMAIN: config.DID_DOMAIN,
        MASTER_KEY: config.MASTER_KEY.toString('hex'), MONGODB_URI: config.MONGODB_URI, MONGODB_DB: config.MONGODB_DB,
        LOG_LEVEL: 'info', METRICS_PORT: String(metricsPort),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    child.stderr!.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    const exited = new Promise<number | null>((resolve) => child!.once('exit', (code) => resolve(code)));
    const parsed = () => stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as Line);
    const start = await waitFor(() => {
      if (child!.exitCode !== null) throw new Error(`worker exited with ${child!.exitCode}: ${stdout}${stderr}`);
      return parsed().find((l) => l.msg === 'worker running');
    }, `the worker's start line (${stdout}${stderr})`, 60_000);
    expect(start).toMatchObject({ level: 'info', pid: child.pid, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics` });
    expect(new Date(start.time).toISOString()).toBe(start.time);

    const res = await fetch(start.metricsUrl);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(sample(text, 'agentgate_job_queue_depth', { name: WEBHOOK_JOB })).toBe(0);
    expect(sample(text, 'agentgate_job_queue_depth', { name: MAIL_JOB })).toBe(0);
    expect(sample(text, 'agentgate_process_start_time_seconds')).toBeGreaterThan(0);

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    // Every line it wrote is one JSON object (nothing else on stdout).
    expect(parsed().length).toBeGreaterThan(0);
    expect(stderr).toBe('');
  }, 90_000);
});

describe('agentgate serve, a real process', () => {
  let api: TestServer;
  let child: ChildProcess | undefined;
  beforeAll(async () => { api = await startTestServer(); });
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await api?.close();
  });

  it('logs JSON on stdout: its start line, then an access line carrying the id the client sent; /metrics takes the token', async () => {
    const port = await freePort();
    const { config } = api;
    child = spawn(process.execPath, [CLI, 'serve'], {
      env: {
        ...process.env, AGENTGATE_MODE: 'dev', HOST: '127.0.0.1', PORT: String(port), BASE_URL: `http://127.0.0.1:${port}`, MAIL_DOMAIN: config.MAIL_DOMAIN,
        DID_DOMAIN: config.DID_DOMAIN, MASTER_KEY: config.MASTER_KEY.toString('hex'), MONGODB_URI: config.MONGODB_URI, MONGODB_DB: config.MONGODB_DB,
        SMTP_PORT: '0', LOG_LEVEL: 'info', METRICS_TOKEN: TOKEN,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    child.stderr!.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    const exited = new Promise<number | null>((resolve) => child!.once('exit', (code) => resolve(code)));
    const parsed = () => stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as Line);
    const start = await waitFor(() => {
      if (child!.exitCode !== null) throw new Error(`serve exited with ${child!.exitCode}: ${stdout}${stderr}`);
      return parsed().find((l) => l.msg === 'listening');
    }, `the start line (${stdout}${stderr})`, 60_000);
    expect(start).toMatchObject({ level: 'info', pid: child.pid, url: `http://127.0.0.1:${port}` });

    const res = await fetch(`${start.url}/v0/identity-types`, { headers: { 'x-request-id': 'from-the-load-balancer' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe('from-the-load-balancer');
    const access = await waitFor(() => parsed().find((l) => l.reqId === 'from-the-load-balancer'), 'the access line on stdout');
    expect(access).toMatchObject({ msg: 'request', method: 'GET', path: '/v0/identity-types', status: 200, pid: child.pid });
    expect((await fetch(`${start.url}/metrics`)).status).toBe(401);
    const metrics = await fetch(`${start.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(sample(await metrics.text(), 'agentgate_http_request_duration_seconds_count', { method: 'GET', route: '/v0/identity-types', status: '2xx' })).toBe(1);

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stderr).toBe('');
  }, 90_000);
});
