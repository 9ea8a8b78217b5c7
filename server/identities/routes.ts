import type Router from '@koa/router';
import { z } from 'zod';
import { authenticatedRouter, principalOf, requireTier } from '../platform/auth/authenticate.js';
import { isScope } from '../platform/auth/scopes.js';
import { parseInput } from '../platform/validate.js';
import { decodeCursor } from '../platform/pagination.js';
import { detailOf, presentIdentity, type IdentityDetailSource } from './present.js';
import { identityUsage } from '../platform/usage.js';
import type { IdentityDoc } from './identity-model.js';
import type { IdentityService } from './identity-service.js';
import type { AccountService } from '../accounts/account-service.js';
import type { ApiKeyService } from '../platform/auth/api-keys.js';

const name = z.string().trim().min(1).max(64).regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, 'letters, digits, spaces, dot, dash and underscore');
const scopeList = z.array(z.string().refine(isScope, 'unknown scope')).max(32);
export const createBody = z.object({ name: name.optional(), displayName: z.string().trim().min(1).max(128).optional() }).strict();
export const updateBody = z.object({
  name: name.optional(),
  displayName: z.string().trim().min(1).max(128).optional(),
  addScopes: scopeList.optional(),
  removeScopes: scopeList.optional(),
}).strict().refine((b) => Object.keys(b).length > 0, 'give at least one of name, displayName, addScopes, removeScopes');
export const listQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(50), pageToken: z.string().optional() });
export const idParams = z.object({ id: z.string().regex(/^id-[0-9a-f]{16}$/, 'must be an identity id (id- and 16 hex characters)') });

export interface IdentityRouteDeps {
  keys: ApiKeyService;
  identities: IdentityService;
  accounts: AccountService;
  identityDetail: readonly IdentityDetailSource[];
}

/** The org admin's identity management, platform key only (SPEC 4.1, 5; DESIGN.md routes). */
export function identityRoutes({ keys, identities, accounts, identityDetail }: IdentityRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/platform/identities' });
  router.use(requireTier('platform'));

  const params = (ctx: { params: unknown }) => parseInput(idParams, ctx.params, 'params');
  const present = async (identity: IdentityDoc) => {
    const [usage, detail] = await Promise.all([identities.usageOf([identity._id]), detailOf(identityDetail, identity)]);
    return presentIdentity(identity, usage.get(identityUsage(identity._id)), detail);
  };

  router.post('/', async (ctx) => {
    const body = parseInput(createBody, ctx.request.body, 'body');
    const principal = principalOf(ctx);
    const owner = await accounts.getOrg(principal.orgId);
    const { identity, rawKey } = await identities.create({ orgId: principal.orgId, userId: principal.userId ?? owner!.ownerUserId }, body);
    ctx.status = 201;
    ctx.body = { ...(await present(identity)), emailAddress: identity.emailAddress, rawKey };
  });

  router.get('/', async (ctx) => {
    const query = parseInput(listQuery, ctx.query, 'query');
    const page = await identities.list(principalOf(ctx).orgId, query.limit, query.pageToken ? decodeCursor(query.pageToken) : undefined);
    const presented = await Promise.all(page.items.map(present));
    ctx.body = { identities: presented, count: presented.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  });

  router.get('/:id', async (ctx) => {
    ctx.body = await present(await identities.getOwned(principalOf(ctx).orgId, params(ctx).id));
  });

  router.patch('/:id', async (ctx) => {
    const { id } = params(ctx);
    const body = parseInput(updateBody, ctx.request.body, 'body');
    ctx.body = await present(await identities.update(principalOf(ctx).orgId, id, body));
  });

  router.delete('/:id', async (ctx) => {
    const { id } = params(ctx);
    await identities.revoke(principalOf(ctx).orgId, id);
    ctx.body = { identityId: id, revoked: true };
  });

  router.post('/:id/rotate-key', async (ctx) => {
    ctx.body = await identities.rotateKey(principalOf(ctx).orgId, params(ctx).id);
  });

  return router;
}
