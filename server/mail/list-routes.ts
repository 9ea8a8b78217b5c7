import type Router from '@koa/router';
import type { Context, Next } from 'koa';
import { z } from 'zod';
import { authenticatedRouter, principalOf } from '../platform/auth/authenticate.js';
import { AppError, forbidden } from '../platform/errors.js';
import { parseInput } from '../platform/validate.js';
import type { Scope } from '../platform/auth/scopes.js';
import { listEntryInput, listKindInput, type ListEntry, type ListOwner } from './mail-lists.js';
import type { MailRouteDeps } from './routes.js';

export const listKindParams = z.object({ kind: listKindInput });
export const listEntryParams = z.object({ kind: listKindInput, entry: listEntryInput });
export const listEntryBody = z.object({ entry: listEntryInput }).strict();

export const presentListEntry = (e: ListEntry) => ({ kind: e.kind, entry: e.entry, type: e.type, scope: e.scope, createdAt: e.createdAt.toISOString() });

/**
 * Whose lists a request reads or edits: an identity key its identity's (reading needs mail:read, editing
 * mail:manage; it also sees its org's lists, read-only), the org's platform key the org-wide lists.
 */
export function ownerOf(scope: Scope) {
  return async (ctx: Context, next: Next) => {
    const principal = principalOf(ctx);
    if (principal.tier === 'identity') {
      if (!principal.scopes.has(scope)) throw forbidden(`API key lacks the scope ${scope}`, { requiredScope: scope });
      ctx.state.listOwner = { orgId: principal.orgId, identityId: principal.identityId } satisfies ListOwner;
    } else if (principal.tier === 'platform') {
      ctx.state.listOwner = { orgId: principal.orgId } satisfies ListOwner;
    } else {
      throw new AppError(403, 'forbidden', 'This route needs an identity key (its own lists) or the platform key (the org-wide lists)');
    }
    return next();
  };
}

export const owner = (ctx: Context) => ctx.state.listOwner as ListOwner;

/** `/v0/mail/lists`: receive-allow, receive-block, send-allow and send-block, per identity and per org. */
export function mailListRoutes({ keys, identities, mail }: MailRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/mail/lists' });

  router.get('/', ownerOf('mail:read'), async (ctx) => {
    const entries = (await mail.lists.list(owner(ctx))).map(presentListEntry);
    ctx.body = { entries, count: entries.length };
  });

  router.get('/:kind', ownerOf('mail:read'), async (ctx) => {
    const { kind } = parseInput(listKindParams, ctx.params, 'params');
    const entries = (await mail.lists.list(owner(ctx), kind)).map(presentListEntry);
    ctx.body = { entries, count: entries.length };
  });

  router.post('/:kind', ownerOf('mail:manage'), async (ctx) => {
    const { kind } = parseInput(listKindParams, ctx.params, 'params');
    const { entry } = parseInput(listEntryBody, ctx.request.body, 'body');
    const result = await mail.lists.add(owner(ctx), kind, entry);
    ctx.status = result.created ? 201 : 200;
    ctx.body = presentListEntry(result.entry);
  });

  router.delete('/:kind/:entry', ownerOf('mail:manage'), async (ctx) => {
    const { kind, entry } = parseInput(listEntryParams, ctx.params, 'params');
    await mail.lists.remove(owner(ctx), kind, entry);
    ctx.body = { kind, entry, deleted: true };
  });

  return router;
}
