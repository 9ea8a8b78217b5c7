import type Router from '@koa/router';
import type { Context } from 'koa';
import { authenticatedRouter, identityIdOf, principalOf, requireScope, type AuthDeps } from '../platform/auth/authenticate.js';
import type { WalletService } from './wallet-service.js';

const ownerOf = (ctx: Context) => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });

export interface WalletRouteDeps extends AuthDeps {
  wallets: WalletService;
}

/** GET /v0/wallet. (The dev faucet, POST /v0/dev/faucet, lives in server/dev/faucet.ts.) */
export function walletRoutes({ keys, identities, wallets }: WalletRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities });
  router.get('/v0/wallet', requireScope('wallet:read'), async (ctx) => {
    ctx.body = await wallets.view(ownerOf(ctx));
  });
  return router;
}
