import Koa from 'koa';
import type Router from '@koa/router';
import type { AppContext } from './context.js';
import { errorHandler } from './platform/error-handler.js';
import { requestLimits } from './platform/limits/request-limits.js';
import { AppError } from './platform/errors.js';
import { jsonBody } from './platform/http-body.js';
import { refuseNulInUrl } from './platform/nul-input.js';
import { requestContext, routeOf } from './platform/request-context.js';
import { metricsEndpoint } from './platform/metrics-endpoint.js';
import { signupRoutes } from './signup/routes.js';
import { accountRoutes } from './accounts/routes.js';
import { identityRoutes } from './identities/routes.js';
import { logRoutes } from './logs/routes.js';
import { usageRoutes } from './usage/routes.js';
import { agentCardRoutes } from './agent-card/routes.js';
import { endpointWebhookRoutes, paymentRoutes } from './payments/routes.js';
import { facilitatorRoutes } from './payments/facilitator-routes.js';
import { walletRoutes } from './wallet/routes.js';
import { buyerRoutes } from './buyer/routes.js';
import { messageRoutes, threadRoutes } from './mail/routes.js';
import { mailListRoutes } from './mail/list-routes.js';
import { mailSettingsRoutes } from './mail/settings-routes.js';
import { draftRoutes } from './mail/draft-routes.js';
import { IDEMPOTENCY_COLLECTION, idempotency, type IdempotencyKeys } from './platform/idempotency.js';
import { eventStreamRoutes } from './mail/event-routes.js';
import { mcpRoutes } from './mcp/routes.js';
import { TOOLS } from './tools.js';
import { vaultRoutes } from './vault/routes.js';
import { didDocumentRoutes, identitySigningRoutes } from './did/routes.js';
import { calendarFeedRoutes, calendarRoutes } from './calendar/routes.js';
import { webhookRoutes } from './webhooks/routes.js';
import { mailWebhookRoutes } from './mail/webhook-routes.js';
import { domainRoutes } from './mail/domains/routes.js';
import { chatPlatformRoutes, chatRoutes } from './chat/routes.js';
import { openApiRoutes } from './openapi/routes.js';
import { healthRoutes } from './health/routes.js';
import { OPERATIONS, type Operation } from './openapi/operations.js';
import { consoleRoutes } from './console/routes.js';
import type { ToolDefinition } from './platform/mcp-tool.js';
import { CONSOLE_PREFIX } from './console/access.js';

/**
 * Each area contributes a router; later areas append theirs to this list. A factory's parameter names the
 * services its area uses; the context holds them all, so most factories are listed as they are.
 */
export type RouteFactory = (app: AppContext) => Router;

export const ROUTES: RouteFactory[] = [
  signupRoutes,
  (app) => agentCardRoutes({
    config: app.config, accounts: app.accounts, identities: app.identities, did: app.did, serviceKey: app.serviceKey,
    endpoints: app.payments.endpoints, acceptance: app.payments.acceptance, tools: TOOLS,
  }),
  accountRoutes,
  identityRoutes,
  logRoutes,
  (app) => usageRoutes({ keys: app.keys, identities: app.identities, meter: app.meter }),
  messageRoutes,
  threadRoutes,
  mailListRoutes,
  mailSettingsRoutes,
  draftRoutes,
  eventStreamRoutes,
  vaultRoutes,
  didDocumentRoutes,
  identitySigningRoutes,
  calendarFeedRoutes,
  calendarRoutes,
  webhookRoutes,
  (app) => endpointWebhookRoutes({ keys: app.keys, identities: app.identities, registration: app.payments.registration }),
  mailWebhookRoutes,
  domainRoutes,
  // Before chatRoutes: the install link, OAuth callback and events endpoint take no API key.
  chatPlatformRoutes,
  chatRoutes,
  walletRoutes,
  buyerRoutes,
  // Keep last among /v0/payments routers: its GET /v0/payments/:id would shadow later siblings.
  (app) => paymentRoutes({
    keys: app.keys, identities: app.identities, usage: app.usage, logs: app.logs, holds: app.holds, devMode: app.config.mode === 'dev',
    acceptance: app.payments.acceptance, endpoints: app.payments.endpoints, registration: app.payments.registration, redemption: app.payments.redemption, records: app.payments.records, refunds: app.payments.refunds,
    signInWithX: app.payments.signInWithX, channels: app.payments.channels.book, channelCalls: app.payments.channels.calls,
  }),
  (app) => facilitatorRoutes({
    keys: app.keys, identities: app.identities, chain: app.chain,
    acceptance: app.payments.acceptance, endpoints: app.payments.endpoints, networks: app.payments.networks, schemes: app.payments.schemes,
    catalog: app.payments.catalog, solana: app.payments.solana, screening: app.payments.screening, meter: app.meter,
  }),
  // The readiness probe asks whether the process is stopping on each request (drainHttp sets the flag).
  (app) => healthRoutes({
    db: app.db, chain: app.chain, settlement: app.settlement, mail: app.mail, isStopping: () => app.stopping, webhookBacklogMs: () => app.webhooks.oldestDueMs(),
    moreNetworks: app.settlements.slice(1).map((settlement) => ({ chain: settlement.chain, settlement })),
  }),
  // The ops console's HTML pages (cookie sessions, form posts) under /console.
  consoleRoutes,
];

/**
 * Routes, their operations and MCP tools mounted on top of the production app (`agentgate dev` and the
 * tests add the faucet: POST /v0/dev/faucet and the tool wallet_faucet).
 */
export interface AppExtension {
  routes: RouteFactory[];
  operations: Operation[];
  tools?: ToolDefinition<AppContext>[];
}

/**
 * Every router of the app: the areas, the extension's, /mcp serving the areas' tools plus the
 * extension's, and /openapi.json + /docs describing them all.
 */
export function appRouters(app: AppContext, extension?: AppExtension): Router[] {
  return [
    ...[...ROUTES, ...(extension?.routes ?? [])].map((factory) => factory(app)),
    mcpRoutes(app, [...TOOLS, ...(extension?.tools ?? [])]),
    openApiRoutes(app, [...OPERATIONS, ...(extension?.operations ?? [])]),
  ];
}

export function createApp(app: AppContext, extension?: AppExtension): Koa {
  const koa = new Koa({ proxy: app.config.TRUST_PROXY });
  const log = app.log.child({ area: 'http' });
  // Outside the error handler, so the access line and the latency see the status the client got.
  koa.use(requestContext({ log: app.log, metrics: app.metrics }));
  koa.use(errorHandler((err, ctx) => {
    // A 5xx we chose (AppError: the chain or chat is not configured, the faucet is empty) is one line; only
    // an unexpected error, a bug, gets its stack trace.
    // The route pattern, not the path: the request's access line (same reqId) has the path, with secrets masked.
    if (err instanceof AppError) log.error({ method: ctx.method, route: routeOf(ctx), status: err.status, code: err.code }, err.message);
    else log.error({ err, method: ctx.method, route: routeOf(ctx) }, 'request failed');
  }));
  // The middleware every request passes through return next()'s promise rather than awaiting it: an async
  // step costs each request a promise and turns of the microtask queue, for nothing when it does no work after.
  koa.use((ctx, next) => {
    // Each of the ~40 routers reads ctx.host (to match a host option none of them sets), and Koa parses the
    // Host header (X-Forwarded-Host behind a proxy) again on every read: read once per request instead.
    Object.defineProperty(ctx, 'host', { value: ctx.host, enumerable: true, configurable: true });
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Cache-Control', 'no-store');
    return next();
  });
  if (app.config.METRICS_TOKEN) koa.use(metricsEndpoint(app.metrics, app.config.METRICS_TOKEN));
  koa.use(refuseNulInUrl());
  // Before bodies are read: a request over its limit costs nothing more.
  koa.use(requestLimits({
    counts: app.limits.counts, keys: app.keys, orgLimits: app.limits.orgLimits, metrics: app.metrics,
    defaults: { perKey: app.config.RATE_LIMIT_PER_KEY, perSellerKey: app.config.RATE_LIMIT_PER_SELLER_KEY, perOrg: app.config.RATE_LIMIT_PER_ORG, perAnonymous: app.config.RATE_LIMIT_PER_ANONYMOUS, windowMs: app.config.RATE_LIMIT_WINDOW_MS },
  }));
  // Pages that post HTML forms parse them themselves: the console (server/console/routes.ts) and agentgate
  // dev's mail page (server/dev/mail-page.ts). Everything else is JSON.
  const json = jsonBody(app.config.MAX_BODY_BYTES);
  // Mail with attachments (base64 in JSON, over HTTP or through the MCP mail tools) may be larger, and so
  // may a draft (its text and HTML are held to a message's limits, 3 MB together); the mail service holds
  // the decoded attachments to MAIL_MAX_ATTACHMENT_BYTES with its own clear 413.
  const mailJson = jsonBody(Math.max(app.config.MAX_BODY_BYTES, Math.ceil(app.config.MAIL_MAX_ATTACHMENT_BYTES * 4 / 3) + (1 << 20)));
  const mailPaths = ['/v0/messages', '/v0/drafts', '/mcp'];
  const formPages = [CONSOLE_PREFIX, '/dev/mail'];
  const under = (paths: string[], path: string) => paths.some((p) => path === p || path.startsWith(`${p}/`));
  koa.use((ctx, next) => (under(formPages, ctx.path) ? next() : under(mailPaths, ctx.path) ? mailJson(ctx, next) : json(ctx, next)));
  // Idempotency-Key on every POST with an API key: once per key. Not on MCP's JSON-RPC, the form pages, or
  // the standard x402 facilitator API, whose answers (409 included) are the x402 standard's and whose
  // settle is once per payment already.
  koa.use(idempotency(app.db.collection(IDEMPOTENCY_COLLECTION) as unknown as IdempotencyKeys, app.secrets, log, {
    except: (path) => under(['/mcp', '/v0/x402', ...formPages], path),
  }));
  for (const router of appRouters(app, extension)) {
    koa.use(router.routes());
    // A method no route implements (TRACE, PROPFIND, …) is the client's mistake, not ours: 405, not 501.
    koa.use(router.allowedMethods({ throw: true, notImplemented: () => new AppError(405, 'method_not_allowed', 'This method is not supported here') }));
  }
  return koa;
}
