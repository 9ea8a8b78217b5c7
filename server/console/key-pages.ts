import type Router from '@koa/router';
import type { Context } from 'koa';
import type { ApiKeyService } from '../platform/auth/api-keys.js';
import { parseInput } from '../platform/validate.js';
import { keyUsage, type UsageTracker } from '../platform/usage.js';
import { sellerKeyBody } from '../payments/routes.js';
import { issueSellerKey, revokeSellerKey } from '../payments/seller-keys.js';
import { sessionOf, type ConsoleGuards } from './access.js';
import type { ConsoleSessions } from './sessions.js';
import { idParam, sellerKeyForm } from './schemas.js';
import { revokeKeyPage, sellerKeysPage } from './views/keys.js';
import { notFound } from '../platform/errors.js';
import { secretOncePage } from './views/endpoints.js';
import { sendHtml, seeOther } from './render.js';

/**
 * The key list and its usage, and whatever the payments area's seller-key issue and revoke name for
 * themselves (the pages run the same operations as /v0/payments/seller-keys).
 */
export type KeyPageDeps = Parameters<typeof issueSellerKey>[0] & Parameters<typeof revokeSellerKey>[0] & {
  keys: ApiKeyService;
  usage: UsageTracker;
};

/** Seller keys, for the platform key only (as GET/POST/DELETE /v0/payments/seller-keys). */
export function keyPages(router: Router, deps: KeyPageDeps, sessions: ConsoleSessions, guards: ConsoleGuards): void {
  const orgOf = (ctx: Context) => sessionOf(ctx).orgId;

  router.get('/seller-keys', guards.session, guards.admin, async (ctx) => {
    const keys = await deps.keys.list({ orgId: orgOf(ctx), tier: 'seller' });
    const usage = await deps.usage.read(keys.map((k) => keyUsage(k._id)));
    sendHtml(ctx, sellerKeysPage({ session: sessionOf(ctx), keys: keys.map((k) => ({ ...k, lastUsedAt: usage.get(keyUsage(k._id))?.lastUsedAt ?? undefined })) }));
  });

  router.post('/seller-keys', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const form = parseInput(sellerKeyBody, parseInput(sellerKeyForm, { name: (ctx.request.body as Record<string, unknown>).name }, 'body'), 'body');
    const key = await issueSellerKey(deps, orgOf(ctx), form.name ?? 'seller');
    sendHtml(ctx, secretOncePage({ session: sessionOf(ctx), title: `Seller key ${key.prefix}… created`, label: 'Seller key', secret: key.rawKey, back: '/console/seller-keys', backLabel: 'Back to seller keys' }), 201);
  });

  router.get('/seller-keys/:id/revoke', guards.session, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const key = await deps.keys.findOwned(id, orgOf(ctx), 'seller');
    if (!key || key.revokedAt) throw notFound('Seller key not found');
    sendHtml(ctx, revokeKeyPage({ session: sessionOf(ctx), key }));
  });

  router.post('/seller-keys/:id/revoke', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    await revokeSellerKey(deps, orgOf(ctx), id);
    // Console sessions opened with this key end now (they would also fail their next key check).
    await sessions.endAllFor(id);
    seeOther(ctx, '/console/seller-keys');
  });
}
