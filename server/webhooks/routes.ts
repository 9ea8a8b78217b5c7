import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { authenticatedRouter, identityIdOf, principalOf, requireScope, requireTier, type AuthDeps } from '../platform/auth/authenticate.js';
import { createMailWebhookBody, mailWebhookParams, presentMailWebhook, type MailWebhooks } from './mail-webhooks.js';
import type { WebhookService } from './webhook-service.js';
import { parseInput } from '../platform/validate.js';
import { decodeCursor, limitParam } from '../platform/pagination.js';
import type { PaymentService } from '../payments/payment-service.js';
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
 * What the routes use: the delivery log, the identities' mail webhooks, and the endpoints' registration
 * (the rotation route is the same operation as the payments area's).
 */
export type WebhookRouteDeps = AuthDeps & {
  webhooks: WebhookService;
  mailWebhooks: MailWebhooks;
  payments: Pick<PaymentService, 'registration'>;
};

/**
 * The seller's delivery log (SPEC 6.1): every attempt with its time, status code or error and duration,
 * a manual retry, and secret rotation. Readable with the seller key (the seller's own backend) and the
 * org's platform key (the console).
 */
export function webhookRoutes(deps: WebhookRouteDeps): Router {
  const { webhooks, mailWebhooks } = deps;
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
  // Same operation as POST /v0/payments/endpoints/{id}/rotate-webhook-secret, where a webhook user looks for it.
  router.post('/endpoints/:id/rotate-secret', requireTier('platform'), async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    ctx.body = await deps.payments.registration.rotateWebhookSecret(orgOf(ctx), id);
  });
  // An identity's own webhooks for its mail events (identity key). Registered after the seller routes, so
  // `/deliveries` is never taken for a webhook id.
  const owner = (ctx: Context) => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });
  router.post('/', requireScope('mail:manage'), async (ctx) => {
    const body = parseInput(createMailWebhookBody, ctx.request.body, 'body');
    ctx.status = 201;
    ctx.body = await mailWebhooks.create(owner(ctx), body);
  });
  router.get('/', requireScope('mail:read'), async (ctx) => {
    const hooks = (await mailWebhooks.list(identityIdOf(ctx))).map(presentMailWebhook);
    ctx.body = { webhooks: hooks, count: hooks.length };
  });
  router.get('/:webhookId', requireScope('mail:read'), async (ctx) => {
    const { webhookId } = parseInput(mailWebhookParams, ctx.params, 'params');
    ctx.body = presentMailWebhook(await mailWebhooks.get(identityIdOf(ctx), webhookId));
  });
  router.get('/:webhookId/deliveries', requireScope('mail:read'), async (ctx) => {
    const { webhookId } = parseInput(mailWebhookParams, ctx.params, 'params');
    const { limit } = parseInput(mailDeliveriesQuery, ctx.query, 'query');
    const deliveries = (await mailWebhooks.deliveries(identityIdOf(ctx), webhookId, limit)).map(presentDelivery);
    ctx.body = { deliveries, count: deliveries.length };
  });
  router.delete('/:webhookId', requireScope('mail:manage'), async (ctx) => {
    const { webhookId } = parseInput(mailWebhookParams, ctx.params, 'params');
    await mailWebhooks.remove(owner(ctx), webhookId);
    ctx.body = { webhookId, deleted: true };
  });
  return router;
}

export const mailDeliveriesQuery = z.object({ limit: limitParam() });
