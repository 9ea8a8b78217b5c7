import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { authenticatedRouter, identityIdOf, principalOf, requireScope } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { decodeCursor, limitParam } from '../platform/pagination.js';
import { mandateBody, mandateIdParam, payBody, type PayBody } from './schemas.js';
import { paymentActivity } from './activity.js';
import type { PayCode } from './pay-result.js';
import type { MandateOwner } from './mandate-service.js';

export const activityQuery = z.object({ limit: limitParam(), pageToken: z.string().optional() });

/** The HTTP status of a refused payment; the body keeps `ok: false` and `code` for agents. */
const REFUSAL_STATUS: Record<PayCode, number> = {
  mandate_not_found: 403, mandate_expired: 403, mandate_revoked: 403, mandate_host_not_allowed: 403,
  mandate_per_call_exceeded: 403, mandate_daily_cap_exceeded: 403, max_amount_exceeded: 403,
  balance_insufficient: 402, url_blocked: 400, url_invalid: 400, fetch_failed: 502, url_not_x402: 422,
  network_unsupported: 422, asset_unsupported: 422, settle_failed: 502, wallet_unavailable: 503,
};

const ownerOf = (ctx: Context): MandateOwner => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });

/** What both the route and the MCP tool run. */
export async function payFor(app: AppContext, owner: MandateOwner, body: PayBody) {
  return app.buyer.pay(owner, {
    url: body.url, method: body.method, headers: body.headers, body: body.body,
    maxAmountAtomic: body.maxAmountUsdc ?? body.maxAmount, dryRun: body.dryRun, mandateId: body.mandateId,
  });
}

/** Buyer side under /v0/payments: mandates, pay, activity. Mounted before paymentRoutes' `/:id`. */
export function buyerRoutes(app: AppContext): Router {
  const router = authenticatedRouter(app, { prefix: '/v0/payments' });

  router.post('/mandates', requireScope('payments:spend'), async (ctx) => {
    const body = parseInput(mandateBody, ctx.request.body, 'body');
    const doc = await app.mandates.create(ownerOf(ctx), {
      maxPerCallAtomic: body.maxPerCallUsdc, dailyCapAtomic: body.dailyCapUsdc, validUntil: body.validUntil, allowedHosts: body.allowedHosts,
    });
    ctx.status = 201;
    ctx.body = await app.mandates.present(doc);
  });
  router.get('/mandates', requireScope('payments:read'), async (ctx) => {
    const mandates = await Promise.all((await app.mandates.list(ownerOf(ctx))).map((m) => app.mandates.present(m)));
    ctx.body = { mandates, count: mandates.length };
  });
  router.get('/mandates/:id', requireScope('payments:read'), async (ctx) => {
    const { id } = parseInput(mandateIdParam, ctx.params, 'params');
    ctx.body = await app.mandates.present(await app.mandates.get(ownerOf(ctx), id));
  });
  router.delete('/mandates/:id', requireScope('payments:spend'), async (ctx) => {
    const { id } = parseInput(mandateIdParam, ctx.params, 'params');
    ctx.body = await app.mandates.present(await app.mandates.revoke(ownerOf(ctx), id));
  });

  router.post('/pay', requireScope('payments:spend'), async (ctx) => {
    const body = parseInput(payBody, ctx.request.body, 'body');
    const result = await payFor(app, ownerOf(ctx), body);
    if (result.ok) {
      ctx.body = result;
      return;
    }
    const status = REFUSAL_STATUS[result.code];
    ctx.status = status;
    ctx.body = { ...result, error: result.code, status };
  });

  router.get('/activity', requireScope('payments:read'), async (ctx) => {
    const query = parseInput(activityQuery, ctx.query, 'query');
    const page = await paymentActivity(app, ownerOf(ctx), query.limit, query.pageToken ? decodeCursor(query.pageToken) : undefined);
    ctx.body = { activity: page.items, count: page.items.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  });
  return router;
}
