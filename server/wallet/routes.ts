import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { Address } from 'viem';
import type { AppContext } from '../platform/context.js';
import { authenticatedRouter, identityIdOf, principalOf, requireScope } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { AppError } from '../platform/errors.js';
import { formatUsdc } from '../../middleware/price.js';
import { usdcAmount } from '../buyer/amounts.js';
import { DevFaucet } from './faucet.js';

/** Largest single faucet payment: enough for many paid calls, small enough that a few requests cannot drain a faucet. */
const MAX_FAUCET_ATOMIC = 1_000n * 1_000_000n;
export const faucetBody = z.object({
  amountUsdc: usdcAmount.refine((a) => a > 0n && a <= MAX_FAUCET_ATOMIC, 'must be more than 0 and at most 1000'),
}).strict();

const ownerOf = (ctx: Context) => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });

/** GET /v0/wallet, and in dev mode only POST /v0/dev/faucet. */
export function walletRoutes(app: AppContext): Router {
  const router = authenticatedRouter(app);
  router.get('/v0/wallet', requireScope('wallet:read'), async (ctx) => {
    ctx.body = await app.wallets.view(ownerOf(ctx));
  });

  if (app.config.mode === 'dev') {
    let faucet: DevFaucet | undefined;
    router.post('/v0/dev/faucet', requireScope('wallet:read'), async (ctx) => {
      const { amountUsdc } = parseInput(faucetBody, ctx.request.body, 'body');
      const chain = app.wallets.requireChain();
      if (!app.config.FAUCET_PRIVATE_KEY) throw new AppError(503, 'faucet_unavailable', 'The dev faucet has no key (FAUCET_PRIVATE_KEY)');
      faucet ??= new DevFaucet(chain, app.config.FAUCET_PRIVATE_KEY as `0x${string}`);
      const owner = ownerOf(ctx);
      const wallet = await app.wallets.forIdentity(owner);
      const txHash = await faucet.fund(wallet.address as Address, amountUsdc);
      await app.logs.record({ ...owner, action: 'wallet.faucet', category: 'wallet', description: `Dev faucet sent ${formatUsdc(amountUsdc)} USDC to ${wallet.address}`, targetType: 'wallet', targetId: wallet._id, metadata: { txHash } });
      ctx.body = { txHash, amountUsdc: formatUsdc(amountUsdc), wallet: await app.wallets.view(owner) };
    });
  }
  return router;
}
