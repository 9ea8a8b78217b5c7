import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { authenticatedRouter, identityIdOf, principalOf, requireScope, requireTier } from '../platform/auth/authenticate.js';
import { createMailWebhookBody, mailWebhookParams, presentMailWebhook } from './mail-webhooks.js';
import { parseInput } from '../platform/validate.js';
import { decodeCursor, limitParam } from '../platform/pagination.js';
import { rotateWebhookSecret } from '../payments/endpoint-registration.js';
import { presentDelivery } from './present.js';

const id = z.string().regex(/^[a-z]+_[a-z0-9]{1,64}$/i, 'malformed id');
export const listQuery = z.object({
  endpointId: id.optional(),
  status: z.enum(['pending', 'delivered', 'failed']).optional(),
  limit: limitParam(),
  pageToken: z.string().optional(),
});
export const idParam = z.object({ id });

/**
 * The seller's delivery log (SPEC 6.1): every attempt with its time, status code or error and duration,
 * a manual retry, and secret rotation. Readable with the seller key (the seller's own backend) and the
 * org's platform key (the console).
 */
export function webhookRoutes(app: AppContext): Router {
  const router = authenticatedRouter(app, { prefix: '/v0/webhooks' });
  const orgOf = (ctx: Context) => principalOf(ctx).orgId;
  const sellerOrOps = requireTier('seller', 'platform');

  router.get('/deliveries', sellerOrOps, async (ctx) => {
    const query = parseInput(listQuery, ctx.query, 'query');
    const page = await app.webhooks.list(orgOf(ctx), query, query.limit, query.pageToken ? decodeCursor(query.pageToken) : undefined);
    ctx.body = { deliveries: page.items.map(presentDelivery), count: page.items.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  });
  router.get('/deliveries/:id', sellerOrOps, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    ctx.body = presentDelivery(await app.webhooks.get(orgOf(ctx), id));
  });
  router.post('/deliveries/:id/retry', sellerOrOps, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    ctx.status = 202;
    ctx.body = presentDelivery(await app.webhooks.retry(orgOf(ctx), id));
  });
  // Same operation as POST /v0/payments/endpoints/{id}/rotate-webhook-secret, where a webhook user looks for it.
  router.post('/endpoints/:id/rotate-secret', requireTier('platform'), async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    ctx.body = await rotateWebhookSecret(app, orgOf(ctx), id);
  });
  // An identity's own webhooks for its mail events (identity key). Registered after the seller routes, so
  // `/deliveries` is never taken for a webhook id.
  const owner = (ctx: Context) => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });
  router.post('/', requireScope('mail:manage'), async (ctx) => {
    const body = parseInput(createMailWebhookBody, ctx.request.body, 'body');
    ctx.status = 201;
    ctx.body = await app.mailWebhooks.create(owner(ctx), body);
  });
  router.get('/', requireScope('mail:read'), async (ctx) => {
    const hooks = (await app.mailWebhooks.list(identityIdOf(ctx))).map(presentMailWebhook);
    ctx.body = { webhooks: hooks, count: hooks.length };
  });
  router.get('/:webhookId', requireScope('mail:read'), async (ctx) => {
    const { webhookId } = parseInput(mailWebhookParams, ctx.params, 'params');
    ctx.body = presentMailWebhook(await app.mailWebhooks.get(identityIdOf(ctx), webhookId));
  });
  router.get('/:webhookId/deliveries', requireScope('mail:read'), async (ctx) => {
    const { webhookId } = parseInput(mailWebhookParams, ctx.params, 'params');
    const { limit } = parseInput(mailDeliveriesQuery, ctx.query, 'query');
    const deliveries = (await app.mailWebhooks.deliveries(identityIdOf(ctx), webhookId, limit)).map(presentDelivery);
    ctx.body = { deliveries, count: deliveries.length };
  });
  router.delete('/:webhookId', requireScope('mail:manage'), async (ctx) => {
    const { webhookId } = parseInput(mailWebhookParams, ctx.params, 'params');
    await app.mailWebhooks.remove(owner(ctx), webhookId);
    ctx.body = { webhookId, deleted: true };
  });
  return router;
}

export const mailDeliveriesQuery = z.object({ limit: limitParam() });
