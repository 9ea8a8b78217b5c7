import type Router from '@koa/router';
import type { Context } from 'koa';
import type { AppContext } from '../context.js';
import { authenticatedRouter, identityIdOf, principalOf, requireScope } from '../platform/auth/authenticate.js';

const ownerOf = (ctx: Context) => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });

/** GET /v0/wallet. (The dev faucet, POST /v0/dev/faucet, lives in server/dev/faucet.ts.) */
export function walletRoutes(app: AppContext): Router {
  const router = authenticatedRouter(app);
  router.get('/v0/wallet', requireScope('wallet:read'), async (ctx) => {
    ctx.body = await app.wallets.view(ownerOf(ctx));
  });
  return router;
}
