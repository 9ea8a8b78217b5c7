import type Router from '@koa/router';
import type { Context } from 'koa';
import type { AppContext } from '../context.js';
import { parseInput } from '../platform/validate.js';
import { keyUsage } from '../platform/usage.js';
import { sellerKeyBody } from '../payments/routes.js';
import { issueSellerKey, revokeSellerKey } from '../payments/seller-keys.js';
import { sessionOf, type ConsoleGuards } from './access.js';
import type { ConsoleSessions } from './sessions.js';
import { idParam, sellerKeyForm } from './schemas.js';
import { revokeKeyPage, sellerKeysPage } from './views/keys.js';
import { notFound } from '../platform/errors.js';
import { secretOncePage } from './views/endpoints.js';
import { sendHtml, seeOther } from './render.js';

/** Seller keys, for the platform key only (as GET/POST/DELETE /v0/payments/seller-keys). */
export function keyPages(router: Router, app: AppContext, sessions: ConsoleSessions, guards: ConsoleGuards): void {
  const orgOf = (ctx: Context) => sessionOf(ctx).orgId;

  router.get('/seller-keys', guards.session, guards.admin, async (ctx) => {
    const keys = await app.keys.list({ orgId: orgOf(ctx), tier: 'seller' });
    const usage = await app.usage.read(keys.map((k) => keyUsage(k._id)));
    sendHtml(ctx, sellerKeysPage({ session: sessionOf(ctx), keys: keys.map((k) => ({ ...k, lastUsedAt: usage.get(keyUsage(k._id))?.lastUsedAt ?? undefined })) }));
  });

  router.post('/seller-keys', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const form = parseInput(sellerKeyBody, parseInput(sellerKeyForm, { name: (ctx.request.body as Record<string, unknown>).name }, 'body'), 'body');
    const key = await issueSellerKey(app, orgOf(ctx), form.name ?? 'seller');
    sendHtml(ctx, secretOncePage({ session: sessionOf(ctx), title: `Seller key ${key.prefix}… created`, label: 'Seller key', secret: key.rawKey, back: '/console/seller-keys', backLabel: 'Back to seller keys' }), 201);
  });

  router.get('/seller-keys/:id/revoke', guards.session, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const key = await app.keys.findOwned(id, orgOf(ctx), 'seller');
    if (!key || key.revokedAt) throw notFound('Seller key not found');
    sendHtml(ctx, revokeKeyPage({ session: sessionOf(ctx), key }));
  });

  router.post('/seller-keys/:id/revoke', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    await revokeSellerKey(app, orgOf(ctx), id);
    // Console sessions opened with this key end now (they would also fail their next key check).
    await sessions.endAllFor(id);
    seeOther(ctx, '/console/seller-keys');
  });
}
