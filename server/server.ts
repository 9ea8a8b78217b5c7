import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './platform/config.js';
import { createContext, type AppContext } from './context.js';
import { createApp, type AppExtension } from './app.js';
import { startSmtpListener } from './mail/smtp-listener.js';
import { startReconciler } from './payments/reconcile.js';

export interface RunningServer {
  url: string;
  port: number;
  /** The inbound SMTP listener's port (SMTP_PORT=0 picks one). */
  smtpPort: number;
  app: AppContext;
  http: Server;
  close(): Promise<void>;
}

/** Builds the context, mounts every area and listens. `port: 0` picks a free port (tests). */
export async function startServer(config: Config, options: { extension?: AppExtension; workers?: boolean } = {}): Promise<RunningServer> {
  const app = await createContext(config);
  // A server settles: it takes its share of the relayer pool (leases in the database). Stopped last.
  const relayers = app.payments.settling?.relayers;
  if (relayers) {
    await relayers.start();
    app.onClose.push(() => relayers.stop());
  }
  const smtp = await startSmtpListener(app);
  app.onClose.push(() => smtp.close());
  // Registered after the listener, so on close the workers stop first and never find it gone mid-job.
  if (options.workers ?? true) await startBackgroundWork(app);
  const koa = createApp(app, options.extension);
  const http = koa.listen(config.PORT, config.HOST);
  try {
    await new Promise<void>((resolve, reject) => {
      http.once('listening', resolve);
      http.once('error', (err: NodeJS.ErrnoException) => {
        // Name the setting that moves the port; the code stays for callers that retry on another port.
        if (err.code === 'EADDRINUSE') err.message = `port ${config.PORT} on ${config.HOST} is already in use: set PORT (agentgate dev: --port) to another port`;
        reject(err);
      });
    });
  } catch (err) {
    // Hand back what this start took (relayer leases, workers, the SMTP port) before giving up.
    await app.close().catch(() => {});
    throw err;
  }
  const port = (http.address() as AddressInfo).port;
  return {
    url: `http://${config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST}:${port}`,
    port,
    smtpPort: smtp.port,
    app,
    http,
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
      await app.close();
    },
  };
}

/** Job workers plus the sweeps that feed them (payment reconciliation, the webhook outbox). */
async function startBackgroundWork(app: AppContext): Promise<void> {
  await app.jobs.start();
  app.onClose.push(() => app.jobs.stop());
  const reconciler = startReconciler(app.payments, {
    everyMs: app.config.RECONCILE_EVERY_MS, olderThanMs: app.config.RECONCILE_AFTER_MS,
    log: app.log.child({ area: 'reconciliation' }), metrics: app.metrics,
  });
  app.onClose.push(() => reconciler.stop());
  app.onClose.push(await app.webhooks.startOutboxSweep());
}

/**
 * `agentgate worker`: the same context as the server but no HTTP or SMTP listener, only the job workers.
 * Any number of workers (and servers) share one database; Agenda's locks hand each job to one of them.
 */
export async function startWorker(config: Config): Promise<{ app: AppContext; close(): Promise<void> }> {
  const app = await createContext(config);
  await startBackgroundWork(app);
  return { app, close: () => app.close() };
}
