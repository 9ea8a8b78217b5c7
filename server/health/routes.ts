import Router from '@koa/router';
import { connect } from 'node:net';
import type { AppContext } from '../context.js';

/** How long one readiness check may take before it counts as down. */
const CHECK_TIMEOUT_MS = 2_000;

const within = <T>(promise: Promise<T>): Promise<T> => Promise.race([
  promise,
  new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`no answer in ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS).unref()),
]);

/** A TCP connection to the inbound SMTP listener opens (and is closed at once). */
const smtpAnswers = ({ host, port }: { host: string; port: number }) => new Promise<void>((resolve, reject) => {
  const socket = connect({ host, port }, () => { socket.destroy(); resolve(); });
  socket.once('error', reject);
});

/**
 * Probes for orchestrators: GET /health (liveness: the process answers HTTP) and GET /ready (readiness:
 * the database, the chain and the SMTP listener answer; 503 naming what does not; 200 `degraded` naming
 * why when this process cannot settle payments but serves everything else).
 */
export function healthRoutes(app: AppContext): Router {
  const router = new Router();
  router.get('/health', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/ready', async (ctx) => {
    const checks: Record<string, () => Promise<unknown>> = {
      database: () => app.db.db!.command({ ping: 1 }),
      ...(app.chain ? { chain: () => app.chain!.publicClient.getBlockNumber({ cacheTime: 0 }) } : {}),
      smtp: () => smtpAnswers(app.mail.delivery.inboundListener()),
    };
    const results = await Promise.all(Object.entries(checks).map(async ([name, check]) => {
      try {
        await within(check());
        return [name, 'ok'] as const;
      } catch (err) {
        return [name, `down: ${(err as Error).message}`.slice(0, 200)] as const;
      }
    }));
    const ready = results.every(([, state]) => state === 'ok');
    // Settlement is the one part a process can lack and still serve everything else: no relayer lease (the
    // pool is smaller than the number of processes) or a relayer out of gas makes it degraded, not down.
    const relayerProblems = app.payments.settling?.relayers.status().problems ?? [];
    const answers = { ...Object.fromEntries(results), ...(app.payments.settling ? { relayer: relayerProblems.length ? `degraded: ${relayerProblems.join('; ')}` : 'ok' } : {}) };
    ctx.status = ready ? 200 : 503;
    ctx.body = ready
      ? { status: relayerProblems.length ? 'degraded' : 'ready', checks: answers, ...(relayerProblems.length ? { message: `payments cannot be settled by this process: ${relayerProblems.join('; ')}` } : {}) }
      : { error: 'not_ready', message: `not ready: ${results.filter(([, s]) => s !== 'ok').map(([n]) => n).join(', ')}`, status: 503, checks: answers };
  });
  return router;
}
