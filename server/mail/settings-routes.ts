import type Router from '@koa/router';
import { authenticatedRouter } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { mailSettingsInput } from './mail-settings.js';
import { owner, ownerOf } from './list-routes.js';
import type { MailRouteDeps } from './routes.js';

/**
 * `/v0/mail/settings`: an identity key reads and sets its identity's (mail:read, mail:manage), and sees
 * what applies to it with its org's settings (`effective`); the org's platform key reads and sets the org's.
 */
export function mailSettingsRoutes({ keys, identities, mail }: MailRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/mail/settings' });

  const answer = async (o: ReturnType<typeof owner>) => {
    const settings = await mail.settings.get(o);
    if (!o.identityId) return { scope: 'org', settings };
    const effective = await mail.settings.effective({ _id: o.identityId, orgId: o.orgId });
    return { scope: 'identity', settings, effective };
  };

  router.get('/', ownerOf('mail:read'), async (ctx) => {
    ctx.body = await answer(owner(ctx));
  });

  router.patch('/', ownerOf('mail:manage'), async (ctx) => {
    const body = parseInput(mailSettingsInput, ctx.request.body, 'body');
    await mail.settings.update(owner(ctx), body);
    ctx.body = await answer(owner(ctx));
  });

  return router;
}
