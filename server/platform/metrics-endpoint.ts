import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Context, Next } from 'koa';
import { AppError, type ErrorBody } from './errors.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';

export const METRICS_PATH = '/metrics';

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Compares digests, so neither the token's bytes nor its length leak through timing. */
function tokenMatches(presented: string, expected: string): boolean {
  return timingSafeEqual(digest(presented), digest(expected));
}

const methodNotAllowed = () => new AppError(405, 'method_not_allowed', 'GET /metrics only', {}, { Allow: 'GET, HEAD' });

/**
 * GET /metrics on the main port, for the operator's scraper only: it needs `Authorization: Bearer
 * <METRICS_TOKEN>`. Mounted only when METRICS_TOKEN is set; without it /metrics is an unknown route (404).
 * Kept out of /openapi.json: it is not part of the API agents and sellers use, and it has its own credential.
 */
export function metricsEndpoint(metrics: Metrics, token: string) {
  return async (ctx: Context, next: Next) => {
    if (ctx.path !== METRICS_PATH) return next();
    ctx.state.route = METRICS_PATH;
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') throw methodNotAllowed();
    const presented = /^Bearer ([^\s]+)$/i.exec(ctx.get('authorization'))?.[1];
    if (!presented || !tokenMatches(presented, token)) {
      throw new AppError(401, 'unauthorized', 'A valid metrics token is required (Authorization: Bearer <METRICS_TOKEN>)', {}, { 'WWW-Authenticate': 'Bearer realm="metrics"' });
    }
    ctx.type = metrics.contentType;
    ctx.body = await metrics.render();
  };
}

export interface MetricsListener {
  url: string;
  port: number;
  close(): Promise<void>;
}

const sendError = (res: http.ServerResponse, error: AppError) => {
  const body: ErrorBody = error.toBody();
  res.writeHead(error.status, { 'content-type': 'application/json; charset=utf-8', ...error.headers }).end(JSON.stringify(body));
};

/**
 * METRICS_PORT: /metrics without a token on a listener of its own, meant for a private network (it binds
 * METRICS_HOST, loopback unless the operator says otherwise). `agentgate worker` has no other HTTP, so this
 * is how a worker is scraped.
 */
export async function startMetricsListener(metrics: Metrics, options: { host: string; port: number; log: Logger }): Promise<MetricsListener> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== METRICS_PATH) return sendError(res, new AppError(404, 'not_found', `No route for ${req.method} ${path}`));
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, methodNotAllowed());
    metrics.render().then((text) => {
      res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' }).end(req.method === 'HEAD' ? undefined : text);
    }, (err: unknown) => {
      options.log.error({ err }, 'metrics render failed');
      sendError(res, new AppError(500, 'internal_error', 'Internal server error'));
    });
  });
  await new Promise<void>((resolve, reject) => {
    const failed = (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') err.message = `METRICS_PORT ${options.port} on ${options.host} is already in use: set METRICS_PORT to another port`;
      reject(err);
    };
    server.once('error', failed);
    server.listen(options.port, options.host, () => { server.off('error', failed); resolve(); });
  });
  server.on('error', (err) => options.log.error({ err }, 'metrics listener error'));
  const port = (server.address() as AddressInfo).port;
  const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}${METRICS_PATH}`,
    port,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
