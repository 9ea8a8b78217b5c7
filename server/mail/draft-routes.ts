import type Router from '@koa/router';
import type { Context } from 'koa';
import { authenticatedRouter, principalOf, type Principal } from '../platform/auth/authenticate.js';
import { AppError, forbidden } from '../platform/errors.js';
import { parseInput } from '../platform/validate.js';
import { createDraftInput, decisionInput, draftParams, listDraftsInput, presentDraft, sendDraftInput, updateDraftInput } from './drafts.js';
import type { MailRouteDeps } from './routes.js';

/** An identity key with the scope, for its own drafts. */
function identityWith(ctx: Context, scope: 'mail:read' | 'mail:send'): string {
  const principal = principalOf(ctx);
  if (principal.tier !== 'identity') throw new AppError(403, 'forbidden', 'This route needs an identity key');
  if (!principal.scopes.has(scope)) throw forbidden(`API key lacks the scope ${scope}`, { requiredScope: scope });
  return principal.identityId!;
}

/** The org's platform key: the org admin, who approves and rejects. */
function orgAdmin(ctx: Context): Principal {
  const principal = principalOf(ctx);
  if (principal.tier !== 'platform') throw new AppError(403, 'forbidden', 'Only the org\'s platform key (the org admin) approves or rejects drafts');
  return principal;
}

/**
 * `/v0/drafts`: an identity's drafts (identity key: mail:read to read, mail:send to write and send), and
 * the org admin's view and decisions (platform key: every draft of the org, approve, reject).
 */
export function draftRoutes({ keys, identities, mail }: MailRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/drafts' });
  const { drafts } = mail;

  router.post('/', async (ctx) => {
    const identityId = identityWith(ctx, 'mail:send');
    const body = parseInput(createDraftInput, ctx.request.body, 'body');
    ctx.status = 201;
    ctx.body = presentDraft(await drafts.create(identityId, body));
  });

  router.get('/', async (ctx) => {
    const principal = principalOf(ctx);
    const owner = principal.tier === 'platform' ? { orgId: principal.orgId } : { orgId: principal.orgId, identityId: identityWith(ctx, 'mail:read') };
    const query = parseInput(listDraftsInput, ctx.query, 'query');
    const page = await drafts.list(owner, query);
    const items = page.items.map(presentDraft);
    ctx.body = { drafts: items, count: items.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  });

  router.get('/:draftId', async (ctx) => {
    const principal = principalOf(ctx);
    const identityId = principal.tier === 'platform' ? undefined : identityWith(ctx, 'mail:read');
    const { draftId } = parseInput(draftParams, ctx.params, 'params');
    ctx.body = presentDraft(identityId ? await drafts.get(identityId, draftId) : await drafts.getForOrg(principal.orgId, draftId));
  });

  router.patch('/:draftId', async (ctx) => {
    const identityId = identityWith(ctx, 'mail:send');
    const { draftId } = parseInput(draftParams, ctx.params, 'params');
    const body = parseInput(updateDraftInput, ctx.request.body, 'body');
    ctx.body = presentDraft(await drafts.update(identityId, draftId, body));
  });

  router.delete('/:draftId', async (ctx) => {
    const identityId = identityWith(ctx, 'mail:send');
    const { draftId } = parseInput(draftParams, ctx.params, 'params');
    await drafts.remove(identityId, draftId);
    ctx.body = { draftId, deleted: true };
  });

  router.post('/:draftId/send', async (ctx) => {
    const identityId = identityWith(ctx, 'mail:send');
    const { draftId } = parseInput(draftParams, ctx.params, 'params');
    const body = parseInput(sendDraftInput, ctx.request.body ?? {}, 'body');
    const view = await mail.requestDraftSend(identityId, draftId, body);
    ctx.status = view.status === 'sent' ? 200 : 202;
    ctx.body = presentDraft(view);
  });

  router.post('/:draftId/approve', async (ctx) => {
    const admin = orgAdmin(ctx);
    const { draftId } = parseInput(draftParams, ctx.params, 'params');
    const body = parseInput(decisionInput, ctx.request.body ?? {}, 'body');
    ctx.body = presentDraft(await drafts.decide(admin.orgId, draftId, 'approved', body.reason));
  });

  router.post('/:draftId/reject', async (ctx) => {
    const admin = orgAdmin(ctx);
    const { draftId } = parseInput(draftParams, ctx.params, 'params');
    const body = parseInput(decisionInput, ctx.request.body ?? {}, 'body');
    ctx.body = presentDraft(await drafts.decide(admin.orgId, draftId, 'rejected', body.reason));
  });

  return router;
}
