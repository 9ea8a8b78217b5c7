import type Router from '@koa/router';
import { authenticatedRouter, principalOf } from '../platform/auth/authenticate.js';
import type { ApiKeyService } from '../platform/auth/api-keys.js';
import { notFound } from '../platform/errors.js';
import { selfView, type SelfViewDeps } from '../identities/present.js';

export interface AccountRouteDeps extends SelfViewDeps {
  keys: ApiKeyService;
  /** Whether an org is an admin account (ADMIN_ORG_IDS or the role the operator granted). */
  isAdmin: (orgId: string) => Promise<boolean>;
}

/** GET /v0/whoami: the shape depends on the key tier (SPEC 4.1). */
export function accountRoutes({ keys, identities, accounts, identityDetail, isAdmin }: AccountRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities });
  router.get('/v0/whoami', async (ctx) => {
    const principal = principalOf(ctx);
    const org = await accounts.getOrg(principal.orgId);
    if (!org) throw notFound('Org not found');
    if (principal.tier === 'identity') {
      ctx.body = await selfView({ identities, accounts, identityDetail }, principal.identityId!, org);
      return;
    }
    if (principal.tier === 'seller') {
      // A seller key is a machine credential of the org's payment set-up, not an admin: no identity list.
      ctx.body = { keyType: 'seller', org: { id: org._id, plan: org.plan } };
      return;
    }
    const user = await accounts.getUser(principal.userId ?? org.ownerUserId);
    const orgIdentities = await identities.listAll(org._id);
    ctx.body = {
      user: { id: user._id, userType: user.userType, name: user.name, email: user.email },
      org: { id: org._id, plan: org.plan, admin: await isAdmin(org._id) },
      identities: orgIdentities.map((i) => ({ identityId: i._id, name: i.name, email: i.emailAddress })),
    };
  });
  return router;
}
