import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { authenticatedRouter, principalOf } from '../platform/auth/authenticate.js';
import { AppError, notFound } from '../platform/errors.js';
import { parseInput } from '../platform/validate.js';
import { mailSettingsInput } from './mail-settings.js';
import { owner, ownerOf } from './list-routes.js';
import type { ListOwner } from './mail-lists.js';
import type { MailRouteDeps } from './routes.js';

export const mailSettingsQuery = z.object({
  identityId: z.string().regex(/^id-[0-9a-f]{16}$/, 'must be an identity id (id- and 16 hex characters)').optional()
    .describe('Platform key only: one identity of the org instead of the org itself'),
});

/** Settings only the org admin changes: an agent must not lift its own approval policy. */
const ADMIN_ONLY = ['approval', 'approvalList'] as const;

/**
 * `/v0/mail/settings`: an identity key reads its identity's settings and what applies to it with its
 * org's (`effective`), and sets admitUnverified; the org's platform key reads and sets the org's, or one
 * identity's with `?identityId=` (the approval policy is set only this way).
 */
export function mailSettingsRoutes({ keys, identities, mail }: MailRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/mail/settings' });

  const target = async (ctx: Context): Promise<ListOwner> => {
    const { identityId } = parseInput(mailSettingsQuery, ctx.query, 'query');
    const base = owner(ctx);
    if (!identityId) return base;
    if (principalOf(ctx).tier !== 'platform') throw new AppError(403, 'forbidden', 'identityId is for the platform key; an identity key reads its own settings');
    const identity = await mail.identityOf(identityId);
    if (identity.orgId !== base.orgId) throw notFound('Identity not found');
    return { orgId: base.orgId, identityId };
  };

  const answer = async (o: ListOwner) => {
    const settings = await mail.settings.get(o);
    if (!o.identityId) return { scope: 'org', settings };
    const effective = await mail.settings.effective({ _id: o.identityId, orgId: o.orgId });
    return { scope: 'identity', ...(o.identityId ? { identityId: o.identityId } : {}), settings, effective };
  };

  router.get('/', ownerOf('mail:read'), async (ctx) => {
    ctx.body = await answer(await target(ctx));
  });

  router.patch('/', ownerOf('mail:manage'), async (ctx) => {
    const o = await target(ctx);
    const body = parseInput(mailSettingsInput, ctx.request.body, 'body');
    if (principalOf(ctx).tier !== 'platform') {
      const adminOnly = ADMIN_ONLY.filter((name) => body[name] !== undefined);
      if (adminOnly.length) throw new AppError(403, 'forbidden', `${adminOnly.join(' and ')} ${adminOnly.length > 1 ? 'are' : 'is'} set by the org admin (the platform key, with ?identityId=)`);
    }
    await mail.settings.update(o, body);
    ctx.body = await answer(o);
  });

  return router;
}
