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
 * the database, the chain and the SMTP listener answer and this process holds a relayer lease; 503 naming
 * what does not; 200 `degraded` naming why when its relayer is out of gas).
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
    // A process that holds no relayer lease (the pool is smaller than the number of processes) is not ready:
    // a load balancer sends payments to the processes that can settle them, and nobody sees a 503. One
    // whose relayer is out of gas is degraded but ready: every process would be, and the rest of the API
    // must stay up.
    const relayers = app.payments.settling?.relayers.status();
    const relayer = !relayers ? undefined : relayers.leaseless ? `down: ${relayers.problems.join('; ')}` : relayers.problems.length ? `degraded: ${relayers.problems.join('; ')}` : 'ok';
    const answers = { ...Object.fromEntries(results), ...(relayer ? { relayer } : {}) };
    const down = Object.entries(answers).filter(([, state]) => state.startsWith('down')).map(([name]) => name);
    ctx.status = down.length ? 503 : 200;
    ctx.body = down.length
      ? { error: 'not_ready', message: `not ready: ${down.join(', ')}${relayers?.leaseless ? ` (${relayers.problems.join('; ')})` : ''}`, status: 503, checks: answers }
      : { status: relayer?.startsWith('degraded') ? 'degraded' : 'ready', checks: answers, ...(relayer?.startsWith('degraded') ? { message: `payments may fail here: ${relayers!.problems.join('; ')}` } : {}) };
  });
  return router;
}
