import type Router from '@koa/router';
import type { Context } from 'koa';
import { authenticatedRouter, identityIdOf, principalOf, requireScope, type AuthDeps } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { activityQuery, channelIdParam, mandateBody, mandateIdParam, payBody } from './schemas.js';
import { refusalBody } from './pay-result.js';
import type { MandateOwner } from './mandate-service.js';
import { activityFor, createMandateFor, getMandateFor, listChannelsFor, listMandatesFor, payFor, refundChannelFor, revokeMandateFor, withdrawChannelFor, type BuyerDeps } from './calls.js';

const ownerOf = (ctx: Context): MandateOwner => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });

export interface BuyerRouteDeps extends AuthDeps, BuyerDeps {}

/**
 * Buyer side: mandates, pay and activity under /v0/payments (mounted before paymentRoutes' `/:id`), and
 * the wallet's channels under /v0/wallet/channels (/v0/payments/channels are the channels a seller is paid through).
 */
export function buyerRoutes(deps: BuyerRouteDeps): Router {
  const router = authenticatedRouter(deps, { prefix: '/v0' });

  router.post('/payments/mandates', requireScope('payments:spend'), async (ctx) => {
    const body = parseInput(mandateBody, ctx.request.body, 'body');
    ctx.body = await createMandateFor(deps, ownerOf(ctx), body);
    ctx.status = 201;
  });
  router.get('/payments/mandates', requireScope('payments:read'), async (ctx) => {
    ctx.body = await listMandatesFor(deps, ownerOf(ctx));
  });
  router.get('/payments/mandates/:id', requireScope('payments:read'), async (ctx) => {
    const { id } = parseInput(mandateIdParam, ctx.params, 'params');
    ctx.body = await getMandateFor(deps, ownerOf(ctx), id);
  });
  router.delete('/payments/mandates/:id', requireScope('payments:spend'), async (ctx) => {
    const { id } = parseInput(mandateIdParam, ctx.params, 'params');
    ctx.body = await revokeMandateFor(deps, ownerOf(ctx), id);
  });

  router.post('/payments/pay', requireScope('payments:spend'), async (ctx) => {
    const body = parseInput(payBody, ctx.request.body, 'body');
    const result = await payFor(deps, ownerOf(ctx), body);
    if (result.ok) {
      ctx.body = result;
      return;
    }
    const refused = refusalBody(result);
    ctx.status = refused.status;
    ctx.body = refused;
  });

  router.get('/wallet/channels', requireScope('payments:read'), async (ctx) => {
    ctx.body = await listChannelsFor(deps, ownerOf(ctx));
  });

  router.post('/wallet/channels/:id/refund', requireScope('payments:spend'), async (ctx) => {
    const { id } = parseInput(channelIdParam, ctx.params, 'params');
    const result = await refundChannelFor(deps, ownerOf(ctx), id);
    if (result.ok) {
      ctx.body = result;
      return;
    }
    const refused = refusalBody(result);
    ctx.status = refused.status;
    ctx.body = refused;
  });

  router.post('/wallet/channels/:id/withdraw', requireScope('payments:spend'), async (ctx) => {
    const { id } = parseInput(channelIdParam, ctx.params, 'params');
    ctx.body = await withdrawChannelFor(deps, ownerOf(ctx), id);
  });

  router.get('/payments/activity', requireScope('payments:read'), async (ctx) => {
    const query = parseInput(activityQuery, ctx.query, 'query');
    ctx.body = await activityFor(deps, ownerOf(ctx), query);
  });
  return router;
}
