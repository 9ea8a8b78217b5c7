import Router from '@koa/router';
import type { Connection } from 'mongoose';
import type { ActivityLog } from '../platform/activity-log.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import { formBody } from '../platform/http-body.js';
import { parseInput } from '../platform/validate.js';
import { notFound } from '../platform/errors.js';
import { CONSOLE_PREFIX, consoleGuards, sessionOf } from './access.js';
import { ConsoleSessions } from './sessions.js';
import { consoleErrors, consoleHeaders } from './errors.js';
import { CONSOLE_CSS, CONSOLE_JS, FAVICON_SVG, assetEtag } from './assets.js';
import { signInRoutes, type SignInDeps } from './sign-in-routes.js';
import { paymentPages, type PaymentPageDeps } from './payment-pages.js';
import { channelPages, type ChannelPageDeps } from './channel-pages.js';
import { endpointPages, type EndpointPageDeps } from './endpoint-pages.js';
import { keyPages, type KeyPageDeps } from './key-pages.js';
import { webhookPages, type WebhookPageDeps } from './webhook-pages.js';
import { draftPages, type DraftPageDeps } from './draft-pages.js';
import { offsetOf } from './views/pager.js';
import { activityQuery } from './schemas.js';
import { activityPage } from './views/activity.js';
import { sendHtml } from './render.js';
import { usagePage } from './views/usage.js';
import { domainPages, type DomainPageDeps } from './domain-pages.js';
import type { UsageMeter } from '../usage/index.js';
import { lastMonths, monthOf } from '../usage/months.js';
import { presentUsage, usageCsv } from '../usage/report.js';
import { usageQuery } from '../usage/routes.js';

const ASSETS: Record<string, { type: string; text: string; etag: string }> = {
  'console.css': { type: 'text/css; charset=utf-8', text: CONSOLE_CSS, etag: assetEtag(CONSOLE_CSS) },
  'console.js': { type: 'text/javascript; charset=utf-8', text: CONSOLE_JS, etag: assetEtag(CONSOLE_JS) },
  'favicon.svg': { type: 'image/svg+xml', text: FAVICON_SVG, etag: assetEtag(FAVICON_SVG) },
};

const ACTIVITY_PAGE_SIZE = 50;

/** What the console's own routes use (its sessions live in `db`), and what each group of pages does. */
export type ConsoleDeps = SignInDeps & PaymentPageDeps & ChannelPageDeps & WebhookPageDeps & EndpointPageDeps & KeyPageDeps & DraftPageDeps & DomainPageDeps & {
  db: Connection;
  config: Pick<Config, 'MAX_BODY_BYTES'>;
  log: Logger;
  logs: ActivityLog;
  meter: UsageMeter;
};

/** The months the usage page offers and its CSV covers. */
const USAGE_MONTHS = 12;

/** The ops console (docs/sellers/console.md): server-rendered pages under /console, signed in with a cookie session. */
export function consoleRoutes(deps: ConsoleDeps): Router {
  const router = new Router({ prefix: CONSOLE_PREFIX });
  const sessions = new ConsoleSessions(deps.db);
  const guards = consoleGuards(deps.keys, sessions);
  const log = deps.log.child({ area: 'console' });
  router.use(consoleErrors((err, ctx) => log.error({ err, method: ctx.method, path: ctx.path }, 'console page failed')));
  router.use(consoleHeaders());
  // The console posts HTML forms; the app's JSON body parser leaves /console to this one (see app.ts).
  router.use(formBody(deps.config.MAX_BODY_BYTES));

  router.get('/assets/:name', (ctx) => {
    // Own keys only: a name such as "toString" must not reach Object.prototype (the fuzz test found a 500).
    const name = ctx.params.name ?? '';
    const asset = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
    if (!asset) throw notFound('No such console asset');
    ctx.set('Cache-Control', 'no-cache');
    ctx.set('ETag', asset.etag);
    if (ctx.get('if-none-match') === asset.etag) { ctx.status = 304; return; }
    ctx.type = asset.type;
    ctx.body = asset.text;
  });

  signInRoutes(router, deps, sessions, guards);
  // Before paymentPages: a channel call's page shares /payments/:id with the payment page.
  channelPages(router, deps, guards);
  paymentPages(router, deps, guards);
  webhookPages(router, deps, guards);
  endpointPages(router, deps, guards);
  keyPages(router, deps, sessions, guards);
  draftPages(router, deps, guards);
  domainPages(router, deps, guards);

  router.get('/activity', guards.session, async (ctx) => {
    const { page } = parseInput(activityQuery, ctx.query, 'query');
    const pageNumber = page ?? 1;
    const { entries, total } = await deps.logs.page(sessionOf(ctx).orgId, offsetOf(pageNumber, ACTIVITY_PAGE_SIZE), ACTIVITY_PAGE_SIZE);
    sendHtml(ctx, activityPage({ session: sessionOf(ctx), entries, window: { page: pageNumber, pageSize: ACTIVITY_PAGE_SIZE, total } }));
  });

  router.get('/usage', guards.session, async (ctx) => {
    const { month } = parseInput(usageQuery, ctx.query, 'query');
    const usage = presentUsage(await deps.meter.report(sessionOf(ctx).orgId, month ?? monthOf()));
    const months = lastMonths(USAGE_MONTHS);
    sendHtml(ctx, usagePage({ session: sessionOf(ctx), usage, months: months.includes(usage.month) ? months : [usage.month, ...months] }));
  });

  // The last twelve months as CSV (GET /v0/usage/export serves any range).
  router.get('/usage.csv', guards.session, async (ctx) => {
    const orgId = sessionOf(ctx).orgId;
    ctx.type = 'text/csv; charset=utf-8';
    ctx.set('Content-Disposition', `attachment; filename="usage-${orgId}.csv"`);
    ctx.body = await usageCsv(deps.meter, orgId, lastMonths(USAGE_MONTHS).reverse());
  });

  // Anything else under /console is a 404 page rather than the API's JSON 404.
  router.all('/{*rest}', () => { throw notFound('There is no console page at this address'); });
  return router;
}
