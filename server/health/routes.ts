import Router from '@koa/router';
import { connect } from 'node:net';
import type { Connection } from 'mongoose';
import type { ChainService } from '../chain/chain-service.js';
import type { MailService } from '../mail/mail-service.js';
import type { SettlementEngine } from '../settlement/engine.js';

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

export interface HealthRouteDeps {
  db: Connection;
  chain: ChainService | undefined;
  settlement: SettlementEngine | undefined;
  /** The deployment's other networks (NETWORKS after the first), each with its engine. */
  moreNetworks?: ReadonlyArray<{ chain: ChainService; settlement: SettlementEngine }>;
  /** Knows where the inbound SMTP listener listens. */
  mail: Pick<MailService, 'delivery'>;
  /** Whether a graceful stop has begun: asked per request, it turns true while the process drains. */
  isStopping: () => boolean;
  /** How long the deployment's oldest due webhook delivery has waited, in ms. */
  webhookBacklogMs: () => Promise<number>;
}

/** A due webhook delivery waiting longer than this makes /ready say `degraded` (deliveries are stuck somewhere). */
export const WEBHOOK_BACKLOG_DEGRADED_MS = 60_000;

/**
 * Probes for orchestrators: GET /health (liveness: the process answers HTTP) and GET /ready (readiness:
 * the database, the chain and the SMTP listener answer and the process is not stopping; 503 naming what
 * does not; 200 `degraded` naming why when settlements would fail: no relayer lane of the deployment can
 * send). The answer also says what this process does in settlement and who holds which lane.
 */
export function healthRoutes({ db, chain, settlement, mail, isStopping, webhookBacklogMs, moreNetworks = [] }: HealthRouteDeps): Router {
  const router = new Router();
  router.get('/health', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/ready', async (ctx) => {
    const checks: Record<string, () => Promise<unknown>> = {
      database: () => db.db!.command({ ping: 1 }),
      ...(chain ? { chain: () => chain.publicClient.getBlockNumber({ cacheTime: 0 }) } : {}),
      smtp: () => smtpAnswers(mail.delivery.inboundListener()),
    };
    const results = await Promise.all(Object.entries(checks).map(async ([name, check]) => {
      try {
        await within(check());
        return [name, 'ok'] as const;
      } catch (err) {
        return [name, `down: ${(err as Error).message}`.slice(0, 200)] as const;
      }
    }));
    // Settlement: this process's part (it accepts; it sends from the lanes it holds) and the deployment's
    // lanes as the registry last showed them. Holding no lane does not make a process unready: it hands its
    // payments to a lane held elsewhere. No lane that can send anywhere makes payments fail: degraded.
    let relayer: string | undefined;
    let detail: Record<string, unknown> = {};
    if (settlement) {
      const part = settlementPart(settlement);
      relayer = part.problems.length ? `degraded: ${part.problems.join('; ')}` : 'ok';
      detail = { settlement: part.settlement };
    }
    // Webhooks: a deployment-wide backlog, not this process's fault, so never `down` (a balancer would take
    // every process out at once): `degraded`, naming the wait, once the oldest due delivery waits too long.
    // Another network in trouble (its RPC down, none of its lanes able to send) degrades this process, never
    // downs it: the other networks' payments go on here, and a balancer must not take every process out.
    const networks = await Promise.all(moreNetworks.map(async (n) => {
      const node = await within(n.chain.publicClient.getBlockNumber({ cacheTime: 0 })).then(() => undefined, (err: Error) => `its chain does not answer: ${err.message}`.slice(0, 200));
      const part = settlementPart(n.settlement);
      const problems = [...(node ? [node] : []), ...part.problems];
      return { network: n.chain.caip2, state: problems.length ? `degraded: ${problems.join('; ')}` : 'ok', settlement: part.settlement };
    }));
    const backlogMs = await within(webhookBacklogMs()).catch(() => undefined);
    const webhooks = backlogMs === undefined ? undefined
      : backlogMs > WEBHOOK_BACKLOG_DEGRADED_MS ? `degraded: the oldest due webhook delivery has waited ${Math.round(backlogMs / 1000)} s` : 'ok';
    detail = {
      ...detail,
      ...(backlogMs === undefined ? {} : { webhooks: { oldestDueSeconds: Math.round(backlogMs / 100) / 10 } }),
      ...(networks.length ? { networks: Object.fromEntries(networks.map((n) => [n.network, { settlement: n.settlement }])) } : {}),
    };
    const answers = {
      ...Object.fromEntries(results), ...(relayer ? { relayer } : {}), ...(webhooks ? { webhooks } : {}),
      ...Object.fromEntries(networks.map((n) => [`network ${n.network}`, n.state])), ...(isStopping() ? { process: 'down: stopping' } : {}),
    };
    const down = Object.entries(answers).filter(([, state]) => state.startsWith('down')).map(([name]) => name);
    const why = [
      ...(relayer?.startsWith('degraded') ? [`payments may fail here: ${relayer.slice('degraded: '.length)}`] : []),
      ...(webhooks?.startsWith('degraded') ? [`webhooks are behind: ${webhooks.slice('degraded: '.length)}`] : []),
      ...networks.filter((n) => n.state.startsWith('degraded')).map((n) => `payments on ${n.network} may fail here: ${n.state.slice('degraded: '.length)}`),
    ];
    const degraded = why.length > 0;
    ctx.status = down.length ? 503 : 200;
    ctx.body = down.length
      ? { error: 'not_ready', message: `not ready: ${down.join(', ')}`, status: 503, checks: answers, ...detail }
      : { status: degraded ? 'degraded' : 'ready', checks: answers, ...(degraded ? { message: why.join('; ') } : {}), ...detail };
  });
  return router;
}

/**
 * One network's settlement as /ready shows it: this process's part and the deployment's lanes as the
 * registry last showed them, and what would make its payments fail (no lane of the deployment can send).
 */
function settlementPart(engine: SettlementEngine) {
  const mine = engine.status();
  const lanes = [...(engine.deployment()?.lanes ?? [])].map(([address, l]) => ({ address, holder: l.holder, state: l.state, inFlight: l.inFlight }));
  const sendable = mine.sends.length > 0 || lanes.some((l) => l.state === 'active');
  return { settlement: { ...mine, lanes }, problems: [...mine.problems, ...(sendable ? [] : ['no relayer lane of this deployment can send now'])] };
}
