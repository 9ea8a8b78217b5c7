import type Router from '@koa/router';
import type { Context } from 'koa';
import { authenticatedRouter, identityIdOf, principalOf, requireScope, type AuthDeps } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { presentCredential, type VaultOwner, type VaultService } from './vault-service.js';
import { nameParams, putCredentialBody } from './schemas.js';

export const ownerOf = (ctx: Context): VaultOwner => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });

export interface VaultRouteDeps extends AuthDeps {
  vault: VaultService;
}

/** The identity's vault (SPEC 1.2, DESIGN.md): identity key with vault:read / vault:write. */
export function vaultRoutes({ keys, identities, vault }: VaultRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/vault' });
  const read = requireScope('vault:read');
  const write = requireScope('vault:write');
  const name = (ctx: Context) => parseInput(nameParams, ctx.params, 'params').name;

  router.get('/', read, async (ctx) => {
    const credentials = (await vault.list(ownerOf(ctx))).map(presentCredential);
    ctx.body = { credentials, count: credentials.length };
  });

  router.put('/:name', write, async (ctx) => {
    const credentialName = name(ctx);
    const body = parseInput(putCredentialBody, ctx.request.body, 'body');
    const { credential, created } = await vault.put(ownerOf(ctx), credentialName, body);
    ctx.status = created ? 201 : 200;
    ctx.body = presentCredential(credential);
  });

  router.get('/:name', read, async (ctx) => {
    ctx.body = await vault.get(ownerOf(ctx), name(ctx));
  });

  router.delete('/:name', write, async (ctx) => {
    const credentialName = name(ctx);
    await vault.delete(ownerOf(ctx), credentialName);
    ctx.body = { name: credentialName, deleted: true };
  });

  router.get('/:name/totp', read, async (ctx) => {
    ctx.body = await vault.totp(ownerOf(ctx), name(ctx));
  });

  // Consuming a backup code changes state, so it needs write as well as read.
  router.post('/:name/totp/backup', read, write, async (ctx) => {
    ctx.body = await vault.consumeBackupCode(ownerOf(ctx), name(ctx));
  });

  return router;
}
