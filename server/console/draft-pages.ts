import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { MailDrafts } from '../mail/drafts.js';
import { draftParams, presentDraft } from '../mail/drafts.js';
import { parseInput } from '../platform/validate.js';
import { sessionOf, type ConsoleGuards } from './access.js';
import { draftsPage } from './views/drafts.js';
import { sendHtml, seeOther } from './render.js';

export interface DraftPageDeps {
  mail: { drafts: Pick<MailDrafts, 'list' | 'decide'> };
}

const rejectForm = z.object({ reason: z.string().trim().max(500).optional() });

/** The org admin's approvals: sends held by the approval policy, approved or rejected here as through the API. */
export function draftPages(router: Router, { mail }: DraftPageDeps, guards: ConsoleGuards): void {
  const orgOf = (ctx: Context) => sessionOf(ctx).orgId;

  router.get('/drafts', guards.session, guards.admin, async (ctx) => {
    const { items } = await mail.drafts.list({ orgId: orgOf(ctx) }, { limit: 100, status: 'pending_approval' });
    const notice = ctx.query.done === 'approved' ? 'Approved: the mail is on its way (or scheduled).' : ctx.query.done === 'rejected' ? 'Rejected: the mail will not be sent.' : undefined;
    sendHtml(ctx, draftsPage({ session: sessionOf(ctx), drafts: items.map(presentDraft).reverse(), ...(notice ? { notice } : {}) }));
  });

  router.post('/drafts/:draftId/approve', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { draftId } = parseInput(draftParams, ctx.params, 'params');
    await mail.drafts.decide(orgOf(ctx), draftId, 'approved');
    seeOther(ctx, '/console/drafts?done=approved');
  });

  router.post('/drafts/:draftId/reject', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { draftId } = parseInput(draftParams, ctx.params, 'params');
    const raw = ctx.request.body as Record<string, unknown>;
    const { reason } = parseInput(rejectForm, { reason: raw.reason || undefined }, 'body');
    await mail.drafts.decide(orgOf(ctx), draftId, 'rejected', reason);
    seeOther(ctx, '/console/drafts?done=rejected');
  });
}
