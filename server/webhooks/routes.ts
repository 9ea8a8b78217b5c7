import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { authenticatedRouter, principalOf, requireTier, type AuthDeps } from '../platform/auth/authenticate.js';
import type { WebhookService } from './webhook-service.js';
import { parseInput } from '../platform/validate.js';
import { decodeCursor, limitParam } from '../platform/pagination.js';
import { presentDelivery } from './present.js';

const id = z.string().regex(/^[a-z]+_[a-z0-9]{1,64}$/i, 'malformed id');
export const listQuery = z.object({
  endpointId: id.optional(),
  status: z.enum(['pending', 'delivered', 'failed']).optional(),
  limit: limitParam(),
  pageToken: z.string().optional(),
});
export const idParam = z.object({ id });

/** What the routes use: the delivery log. */
export type WebhookRouteDeps = AuthDeps & { webhooks: WebhookService };

/**
 * The seller's delivery log (SPEC 6.1): every attempt with its time, status code or error and duration,
 * and a manual retry. Readable with the seller key (the seller's own backend) and the org's platform key
 * (the console). The areas' own webhook routes sit beside it under /v0/webhooks: an endpoint's secret
 * rotation (payments), an identity's mail webhooks (mail/webhook-routes.ts).
 */
export function webhookRoutes(deps: WebhookRouteDeps): Router {
  const { webhooks } = deps;
  const router = authenticatedRouter(deps, { prefix: '/v0/webhooks' });
  const orgOf = (ctx: Context) => principalOf(ctx).orgId;
  const sellerOrOps = requireTier('seller', 'platform');

  router.get('/deliveries', sellerOrOps, async (ctx) => {
    const query = parseInput(listQuery, ctx.query, 'query');
    const page = await webhooks.list(orgOf(ctx), query, query.limit, query.pageToken ? decodeCursor(query.pageToken) : undefined);
    ctx.body = { deliveries: page.items.map(presentDelivery), count: page.items.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  });
  router.get('/deliveries/:id', sellerOrOps, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    ctx.body = presentDelivery(await webhooks.get(orgOf(ctx), id));
  });
  router.post('/deliveries/:id/retry', sellerOrOps, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    ctx.status = 202;
    ctx.body = presentDelivery(await webhooks.retry(orgOf(ctx), id));
  });
  return router;
}
