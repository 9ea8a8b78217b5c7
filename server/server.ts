import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './platform/config.js';
import { createContext, type AppContext } from './context.js';
import { createApp, type AppExtension } from './app.js';
import { startSmtpListener } from './mail/smtp-listener.js';
import { startSubmission } from './mail/submission.js';
import { startReconciler } from './payments/reconcile.js';
import { isDatabaseUnavailable } from './platform/database-outage.js';
import { createLogger, endLogger, type Logger } from './platform/logger.js';
import { StartSteps } from './platform/start-steps.js';
import { startMetricsListener } from './platform/metrics-endpoint.js';
import { HistoryBuckets, startDayGroupsRound } from './platform/history-buckets.js';

export interface RunningServer {
  url: string;
  port: number;
  /** The inbound SMTP listener's port (SMTP_PORT=0 picks one). */
  smtpPort: number;
  /** SMTP submission's ports (SMTP_SUBMISSION_PORT, SMTP_SUBMISSIONS_PORT), when they are set. */
  submissionPort?: number;
  submissionTlsPort?: number;
  /** The tokenless metrics listener's URL when METRICS_PORT is set. */
  metricsUrl?: string;
  app: AppContext;
  http: Server;
  close(): Promise<void>;
}

/** How long a start the database keeps interrupting is made again in this process before it fails. */
const START_AGAIN_FOR_MS = 60_000;
const START_AGAIN_AFTER_MS = 250;

/**
 * Runs `start` again, in this process, while it fails because the database went away after the connection
 * opened (a restart during the database's outage): each failed attempt has handed back what it took, and
 * the next waits 250 ms. Relaunching the process instead would cost the orchestrator's back-off and a new
 * boot, seconds under load (a rolling restart waits for every one). A start refused for another reason, or
 * still interrupted after a minute, fails as before.
 */
async function startAgainWhileDatabaseAway<T>(config: Config, log: Logger | undefined, start: (steps: StartSteps) => Promise<T>): Promise<T> {
  const steps = new StartSteps();
  const until = Date.now() + START_AGAIN_FOR_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(steps);
    } catch (err) {
      if (!isDatabaseUnavailable(err) || Date.now() > until) throw err;
      // The attempt's own logger has ended with it: say why the start is made again on one of its own.
      const warn = log ?? createLogger({ level: config.LOG_LEVEL });
      warn.warn({ attempt, err: (err as Error).message.slice(0, 300) }, 'the database went away during the start; starting again');
      if (!log) await endLogger(warn);
      await new Promise((resolve) => setTimeout(resolve, START_AGAIN_AFTER_MS));
      steps.mark('interrupted by the database');
    }
  }
}

/**
 * Builds the context, mounts every area and listens. `port: 0` picks a free port (tests). A start the
 * database interrupts is made again (startAgainWhileDatabaseAway).
 */
export function startServer(config: Config, options: { extension?: AppExtension; workers?: boolean; log?: Logger } = {}): Promise<RunningServer> {
  return startAgainWhileDatabaseAway(config, options.log, (startSteps) => startServerOnce(config, options, startSteps));
}

async function startServerOnce(config: Config, options: { extension?: AppExtension; workers?: boolean; log?: Logger }, startSteps: StartSteps): Promise<RunningServer> {
  const app = await createContext(config, { log: options.log, settles: true, startSteps });
  let smtp: Awaited<ReturnType<typeof startSmtpListener>>;
  let submission: Awaited<ReturnType<typeof startSubmission>>;
  let http: Server;
  try {
    watchQueues(app);
    // A server accepts payments and, given relayer keys, takes its share of the pool's lanes. Stopped last:
    // its lanes' work is finished and handed over after everything else has stopped asking for it.
    await startSettlement(app, { role: 'serve', accepts: true });
    app.startSteps.mark('settlement');
    smtp = await startSmtpListener(app);
    app.shutdown.add('SMTP listener', () => smtp.close());
    submission = await startSubmission(app);
    if (submission) app.shutdown.add('SMTP submission listener', () => submission!.close());
    app.startSteps.mark('smtp');
    // Registered after the listener, so on close the workers stop first and never find it gone mid-job.
    if (options.workers ?? true) await startBackgroundWork(app, 'serve');
    app.startSteps.mark('background work');
    const koa = createApp(app, options.extension);
    http = koa.listen(config.PORT, config.HOST);
    await new Promise<void>((resolve, reject) => {
      http.once('listening', resolve);
      http.once('error', (err: NodeJS.ErrnoException) => {
        // Name the setting that moves the port; the code stays for callers that retry on another port.
        if (err.code === 'EADDRINUSE') err.message = `port ${config.PORT} on ${config.HOST} is already in use: set PORT (agentgate dev: --port) to another port`;
        reject(err);
      });
    });
  } catch (err) {
    // Hand back what this start took (relayer leases, workers, the SMTP port) before giving up, whichever
    // step failed: an SMTP port in use once left the relayers holding their lease and polling the chain
    // (agentgate dev then flooded the terminal as it stopped the chain under them).
    await app.close().catch(() => {});
    throw err;
  }
  const port = (http.address() as AddressInfo).port;
  const metricsUrl = await serveMetrics(app).catch(async (err: unknown) => {
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
    await app.close();
    throw err;
  });
  return {
    url: `http://${config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST}:${port}`,
    port,
    smtpPort: smtp.port,
    ...(submission ? { submissionPort: submission.port, ...(submission.tlsPort !== undefined ? { submissionTlsPort: submission.tlsPort } : {}) } : {}),
    ...(metricsUrl ? { metricsUrl } : {}),
    app,
    http,
    async close() {
      const stoppingSince = Date.now();
      await drainHttp(app, http);
      await app.close({ stoppingSince });
    },
  };
}

/**
 * How long a stopping process lets paid requests wait for their block before answering them pending: four
 * of the network's blocks (a payment settles in one or two; one still waiting after four waits on something
 * else, such as a lane whose holder died), within 3-8 s; 8 s where the cadence is unknown.
 */
const STOP_PAYMENT_GRACE_MS = 8_000;
const stopPaymentGraceMs = (blockMs: number | undefined) => (blockMs ? Math.min(STOP_PAYMENT_GRACE_MS, Math.max(3_000, 4 * blockMs)) : STOP_PAYMENT_GRACE_MS);

/**
 * A graceful stop: /ready answers 503 and no new connection is taken; requests under way (a paid request
 * waits for its block) are answered, each with `Connection: close`. A paid request still waiting after
 * STOP_PAYMENT_GRACE_MS is answered pending (its settlement goes on; the buyer's retry with the same
 * payment-identifier gets its result from any process); a few seconds later whatever is left is cut. A
 * balancer retries a refused connection elsewhere.
 */
async function drainHttp(app: AppContext, http: Server): Promise<void> {
  app.stopping = true;
  const started = Date.now();
  app.log.info('stopping: draining HTTP requests');
  const graces = app.payments.networks.map((network) => {
    const clock = app.settlements.find((engine) => engine.chain.chainId === network.chain.chainId)?.clock;
    const grace = Math.min(stopPaymentGraceMs(clock?.intervalMs), app.config.SETTLEMENT_TIMEOUT_MS);
    network.settlement.answerPendingAfter(grace);
    return grace;
  });
  // A request that still comes on a kept-alive connection is answered, and the connection closed after it.
  http.on('request', (_req, res) => { if (!res.headersSent) res.setHeader('Connection', 'close'); });
  const closed = new Promise<void>((resolve) => http.close(() => resolve()));
  const drainMs = Math.max(Math.min(STOP_PAYMENT_GRACE_MS, app.config.SETTLEMENT_TIMEOUT_MS), ...graces) + 5_000;
  const deadline = Date.now() + drainMs;
  let drained = false;
  while (!drained && Date.now() < deadline) {
    // A connection whose request was answered is idle now: closed at once, so the server's close callback
    // comes as soon as the last busy one has answered.
    http.closeIdleConnections();
    drained = await Promise.race([closed.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 100))]);
  }
  if (!drained) app.log.warn({ waitedMs: drainMs }, 'stopping: requests still open after the drain time were cut');
  http.closeAllConnections();
  await closed;
  app.log.info({ durationMs: Date.now() - started }, 'stopping: HTTP drained');
}

/** Joins the deployment's settlement (serve and worker); stopped when the process stops. */
async function startSettlement(app: AppContext, role: { role: 'serve' | 'worker'; accepts: boolean }): Promise<void> {
  // Every network's engine, side by side: one network's slow start (its block clock, its leases) holds up none of the others'.
  await Promise.all(app.settlements.map(async (settlement, i) => {
    await settlement.start(role);
    app.shutdown.add(i === 0 ? 'settlement (lanes, desk, registry)' : `settlement on ${settlement.chain.caip2}`, () => settlement.stop());
  }));
}

/** Job workers plus the sweeps that feed them (payment reconciliation, the webhook outbox). */
async function startBackgroundWork(app: AppContext, role: 'serve' | 'worker'): Promise<void> {
  // Joined before the workers start and left after they stop: whatever this process still holds then
  // (a job it locked, a webhook attempt it claimed) is taken over by the others at once.
  await app.processes.join(role);
  app.shutdown.add('process registry', () => app.processes.leave());
  await app.jobs.start();
  app.shutdown.add('job workers', () => app.jobs.stop());
  // The background rounds, stopped side by side: each finishes its item in hand (up to a second), and none
  // waits for another. Registered before they start (the list fills below), so a start that fails half-way
  // stops those it started.
  const rounds: Array<{ name: string; stop: () => Promise<void> }> = [];
  app.shutdown.addTogether(rounds);
  rounds.push({ name: 'payment hold expiry sweep', stop: app.holds.startExpirySweep(Math.min(app.config.RECONCILE_EVERY_MS, 10_000)) });
  // Records of a version that did not file them by the hour, listed so that pages still show them.
  const history = app.log.child({ area: 'history' });
  for (const [kind, scan] of [['payments', () => app.payments.records.markUndated()], ['webhook deliveries', () => app.webhooks.markUndated()], ['activity log entries', () => app.logs.markUndated()]] as const) {
    void scan()
      .then((orgs) => { if (orgs) history.info({ kind, orgs }, 'records written before they carried their hour: pages read them the old way'); })
      .catch((err: Error) => history.warn({ kind, err: err.message }, 'the scan for records without their hour failed; the next start scans again'));
  }
  // Closed days' payment totals, delivery and log counts, written for the console once a day.
  rounds.push({ name: 'day groups round', stop: startDayGroupsRound([app.payments.totals.days, app.webhooks.dayGroups, app.logs.days], HistoryBuckets.for(app.db), history) });
  // Each network's open payments, by its own chain.
  for (const network of app.payments.networks) {
    const reconciler = startReconciler({ ...network, records: app.payments.records, endpoints: app.payments.endpoints }, {
      everyMs: app.config.RECONCILE_EVERY_MS, olderThanMs: app.config.RECONCILE_AFTER_MS,
      log: app.log.child({ area: 'reconciliation', network: network.chain.caip2 }), metrics: app.metrics,
    });
    rounds.push({ name: network === app.payments.networks[0] ? 'payment reconciliation' : `payment reconciliation on ${network.chain.caip2}`, stop: () => reconciler.stop() });
  }
  // Each Solana network's open payments (a sender that died, an answer that timed out), from its chain.
  for (const { scheme } of app.payments.solana) {
    const log = app.log.child({ area: 'reconciliation', network: scheme.chain.caip2 });
    const endpointOf = (payment: { endpointId: string | null }) => (payment.endpointId ? app.payments.endpoints.endpoints.findById(payment.endpointId).lean() : Promise.resolve(null));
    const timer = setInterval(() => {
      scheme.reconcile(app.payments.records, endpointOf, app.config.RECONCILE_AFTER_MS).catch((err: Error) => log.warn({ err: err.message }, 'Solana payment reconciliation failed; next round retries'));
    }, app.config.RECONCILE_EVERY_MS);
    timer.unref();
    rounds.push({ name: `payment reconciliation on ${scheme.chain.caip2}`, stop: async () => clearInterval(timer) });
  }
  if (app.chain) {
    // auth-capture: escrow operations (capture, void, refund) whose sender stopped, and their webhooks.
    rounds.push({ name: 'escrow operation sweep', stop: app.payments.authCapture.operations.startSweep(Math.min(app.config.RECONCILE_EVERY_MS, 10_000)) });
    // exact refunds from the org's wallets whose sender stopped (the token says whether they moved), and their webhooks.
    if (app.payments.refunds.exact) rounds.push({ name: 'exact refund sweep', stop: app.payments.refunds.exact.startSweep(Math.min(app.config.RECONCILE_EVERY_MS, 10_000)) });
    // Channels sold through our middleware: claimed, settled and refunded when idle, one process a round, on each network.
    for (const network of app.payments.networks) {
      const channels = network.batchSettlement.sweep.start({ everyMs: app.config.CHANNEL_SWEEP_EVERY_MS, idleRefundMs: app.config.CHANNEL_IDLE_REFUND_MS }, (orgId) => app.payments.acceptance.accepting(orgId));
      rounds.push({ name: network === app.payments.networks[0] ? 'channel sweep' : `channel sweep on ${network.chain.caip2}`, stop: () => channels.stop() });
    }
  }
  if (app.wallets.available) {
    // Channels agents' wallets pay through: an idle one's remainder is asked back from its seller.
    const log = app.log.child({ area: 'buyer-channels' });
    rounds.push({ name: 'buyer channel sweep', stop: app.buyer.channels.start({ everyMs: app.config.CHANNEL_SWEEP_EVERY_MS, idleMs: app.config.BUYER_CHANNEL_IDLE_REFUND_MS }, (err) => log.error({ err: err.message }, 'idle channel refunds failed')) });
  }
  rounds.push({ name: 'webhook outbox sweep', stop: await app.webhooks.startOutboxSweep() });
  // The orgs' mail domains, each checked once per MAIL_DOMAIN_CHECK_EVERY_MS across the deployment.
  rounds.push({ name: 'mail domain re-check', stop: app.domains.startRechecks() });
}

/**
 * `agentgate worker`: the same context as the server but no HTTP or SMTP listener, only the job workers.
 * Any number of workers (and servers) share one database; Agenda's locks hand each job to one of them.
 */
export function startWorker(config: Config, options: { log?: Logger } = {}): Promise<RunningWorker> {
  return startAgainWhileDatabaseAway(config, options.log, (startSteps) => startWorkerOnce(config, options, startSteps));
}

export interface RunningWorker { app: AppContext; metricsUrl?: string; close(): Promise<void> }

async function startWorkerOnce(config: Config, options: { log?: Logger }, startSteps: StartSteps): Promise<RunningWorker> {
  const app = await createContext(config, { log: options.log, settles: true, startSteps });
  watchQueues(app);
  try {
    // A worker given relayer keys sends settlements that serve processes accepted (and reconciliation's).
    await startSettlement(app, { role: 'worker', accepts: false });
    app.startSteps.mark('settlement');
    await startBackgroundWork(app, 'worker');
    app.startSteps.mark('background work');
  } catch (err) {
    await app.close().catch(() => {});
    throw err;
  }
  const metricsUrl = await serveMetrics(app).catch(async (err: unknown) => { await app.close(); throw err; });
  return {
    app, ...(metricsUrl ? { metricsUrl } : {}),
    close: () => app.close({ stoppingSince: Date.now() }),
  };
}

/**
 * Queue depth and the oldest due webhook delivery are read from the database at scrape time, so any
 * process (server or worker) reports the deployment's figures.
 */
function watchQueues(app: AppContext): void {
  app.metrics.onCollect(async () => {
    for (const [name, depth] of await app.jobs.depth()) app.metrics.jobQueueDepth.set({ name }, depth);
    app.metrics.webhookOldestDue.set((await app.webhooks.oldestDueMs()) / 1000);
  });
}

/** METRICS_PORT: /metrics without a token on its own listener; returns its URL. */
async function serveMetrics(app: AppContext): Promise<string | undefined> {
  if (app.config.METRICS_PORT === undefined) return undefined;
  const listener = await startMetricsListener(app.metrics, { host: app.config.METRICS_HOST, port: app.config.METRICS_PORT, log: app.log.child({ area: 'metrics' }) });
  app.shutdown.add('metrics listener', () => listener.close());
  return listener.url;
}
