import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { authenticatedRouter, identityIdOf, principalOf, requireScope, type AuthDeps } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { limitParam } from '../platform/pagination.js';
import { presentDelivery } from '../webhooks/present.js';
import { createMailWebhookBody, mailWebhookParams, presentMailWebhook, type MailWebhooks } from './webhooks.js';

export const mailDeliveriesQuery = z.object({ limit: limitParam() });

/**
 * An identity's own webhooks for its mail events (identity key), under /v0/webhooks. Mounted after the
 * delivery log's and the endpoints' routes there, so `/deliveries` is never taken for a webhook id.
 */
export function mailWebhookRoutes(deps: AuthDeps & { mailWebhooks: MailWebhooks }): Router {
  const { mailWebhooks } = deps;
  const router = authenticatedRouter(deps, { prefix: '/v0/webhooks' });
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
