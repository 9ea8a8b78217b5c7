import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';
import { withRequestId, type Logger } from './logger.js';
import type { Metrics } from './metrics.js';

/** What a caller (or the proxy in front of us) may name its request: short, and safe to put in a log line. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** Probes and the scraper call every few seconds: their lines would bury everything else at info. */
const QUIET_PATHS = new Set(['/health', '/ready', '/metrics']);

/**
 * Route patterns whose path parameters are capabilities (a calendar feed token, a chat install state):
 * their lines show the pattern, so a log reader cannot replay the link.
 */
const SECRET_PARAM = /:(token|state)\b/;

/** The incoming X-Request-Id when it is sane, else a fresh one. */
export function requestIdFrom(header: string | undefined): string {
  return header && SANE_REQUEST_ID.test(header) ? header : randomUUID();
}

/** A router layer as @koa/router leaves it in `ctx.matched`: every layer whose path matched, in order. */
interface MatchedLayer { path: string | RegExp; methods: string[] }

/**
 * The route label of a request: the pattern of the route it was for, never the raw path (unbounded
 * cardinality). Not `ctx._matchedRoute`: each router middleware (`router.use`, e.g. an auth check) that
 * runs overwrites it with its own pattern, so a 401 from one would be labelled with a regex. The first
 * route layer whose path and method matched is the one whose handler runs (or would have run).
 */
export function routeOf(ctx: Context): string {
  const matched = (ctx as Context & { matched?: MatchedLayer[] }).matched;
  const layer = matched?.find((candidate) => candidate.methods.includes(ctx.method));
  if (layer) return String(layer.path);
  return (ctx.state as { route?: string }).route ?? 'unmatched';
}

const statusClass = (status: number) => `${Math.floor(status / 100)}xx`;

/**
 * Outermost middleware: gives the request an id (echoed in X-Request-Id), runs everything after it inside
 * that id so every log line written while serving it carries `reqId`, and writes one access line and one
 * latency observation when it ends.
 */
export function requestContext(deps: { log: Logger; metrics: Metrics }) {
  const log = deps.log.child({ area: 'http' });
  return (ctx: Context, next: Next) => {
    const reqId = requestIdFrom(ctx.get('x-request-id') || undefined);
    ctx.set('X-Request-Id', reqId);
    ctx.state.reqId = reqId;
    return withRequestId(reqId, async () => {
      const started = process.hrtime.bigint();
      let failed = false;
      try {
        await next();
      } catch (err) {
        failed = true;
        throw err;
      } finally {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        // Only if something below the error handler let an error escape; Koa then answers 500.
        const status = failed ? 500 : ctx.status;
        const route = routeOf(ctx);
        deps.metrics.httpRequests.observe({ method: ctx.method, route, status: statusClass(status) }, seconds);
        const line = { method: ctx.method, path: SECRET_PARAM.test(route) ? route : ctx.path, route, status, durationMs: Math.round(seconds * 1e4) / 10 };
        if (QUIET_PATHS.has(ctx.path)) log.debug(line, 'request');
        else log.info(line, 'request');
      }
    });
  };
}
