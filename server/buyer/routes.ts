import type Router from '@koa/router';
import type { Context } from 'koa';
import type { AppContext } from '../context.js';
import { authenticatedRouter, identityIdOf, principalOf, requireScope } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { activityQuery, mandateBody, mandateIdParam, payBody } from './schemas.js';
import { refusalBody } from './pay-result.js';
import type { MandateOwner } from './mandate-service.js';
import { activityFor, createMandateFor, getMandateFor, listMandatesFor, payFor, revokeMandateFor } from './calls.js';

const ownerOf = (ctx: Context): MandateOwner => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });

/** Buyer side under /v0/payments: mandates, pay, activity. Mounted before paymentRoutes' `/:id`. */
export function buyerRoutes(app: AppContext): Router {
  const router = authenticatedRouter(app, { prefix: '/v0/payments' });

  router.post('/mandates', requireScope('payments:spend'), async (ctx) => {
    const body = parseInput(mandateBody, ctx.request.body, 'body');
    ctx.body = await createMandateFor(app, ownerOf(ctx), body);
    ctx.status = 201;
  });
  router.get('/mandates', requireScope('payments:read'), async (ctx) => {
    ctx.body = await listMandatesFor(app, ownerOf(ctx));
  });
  router.get('/mandates/:id', requireScope('payments:read'), async (ctx) => {
    const { id } = parseInput(mandateIdParam, ctx.params, 'params');
    ctx.body = await getMandateFor(app, ownerOf(ctx), id);
  });
  router.delete('/mandates/:id', requireScope('payments:spend'), async (ctx) => {
    const { id } = parseInput(mandateIdParam, ctx.params, 'params');
    ctx.body = await revokeMandateFor(app, ownerOf(ctx), id);
  });

  router.post('/pay', requireScope('payments:spend'), async (ctx) => {
    const body = parseInput(payBody, ctx.request.body, 'body');
    const result = await payFor(app, ownerOf(ctx), body);
    if (result.ok) {
      ctx.body = result;
      return;
    }
    const refused = refusalBody(result);
    ctx.status = refused.status;
    ctx.body = refused;
  });

  router.get('/activity', requireScope('payments:read'), async (ctx) => {
    const query = parseInput(activityQuery, ctx.query, 'query');
    ctx.body = await activityFor(app, ownerOf(ctx), query);
  });
  return router;
}
