import type Router from '@koa/router';
import type { AppContext } from '../context.js';
import { authenticatedRouter, principalOf } from '../platform/auth/authenticate.js';
import { notFound } from '../platform/errors.js';
import { selfView } from '../identities/present.js';

/** GET /v0/whoami: the shape depends on the key tier (SPEC 4.1). */
export function accountRoutes(app: AppContext): Router {
  const router = authenticatedRouter(app);
  router.get('/v0/whoami', async (ctx) => {
    const principal = principalOf(ctx);
    const org = await app.accounts.getOrg(principal.orgId);
    if (!org) throw notFound('Org not found');
    if (principal.tier === 'identity') {
      ctx.body = await selfView(app, principal.identityId!, org);
      return;
    }
    if (principal.tier === 'seller') {
      // A seller key is a machine credential of the org's payment set-up, not an admin: no identity list.
      ctx.body = { keyType: 'seller', org: { id: org._id, plan: org.plan } };
      return;
    }
    const user = await app.accounts.getUser(principal.userId ?? org.ownerUserId);
    const identities = await app.identities.listAll(org._id);
    ctx.body = {
      user: { id: user._id, userType: user.userType, name: user.name, email: user.email },
      org: { id: org._id, plan: org.plan, admin: await app.isAdmin(org._id) },
      identities: identities.map((i) => ({ identityId: i._id, name: i.name, email: i.emailAddress })),
    };
  });
  return router;
}
