import type Router from '@koa/router';
import { z } from 'zod';
import { authenticatedRouter, identityIdOf, requireScope, type AuthDeps } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { attachmentIdInput, forwardInput, labelsInput, listMessagesInput, listThreadsInput, messageIdInput, replyInput, sendInput, threadIdInput } from './mail-schemas.js';
import { presentLabels, presentMessage, presentSent, presentThread } from './present.js';
import type { MailService, Outcome } from './mail-service.js';
import type { MessagePage } from './mail-reader.js';
import { presentDraft } from './drafts.js';
import { searchInput } from './mail-search.js';
import type { Context } from 'koa';

export const messageParams = z.object({ messageId: messageIdInput });
export const threadParams = z.object({ threadId: threadIdInput });
export const attachmentParams = z.object({ messageId: messageIdInput, attachmentId: attachmentIdInput });

/**
 * Always a download, never rendered in our origin: `attachment`, an ASCII fallback name and the exact
 * name in RFC 5987 form (browsers and curl -J use it).
 */
export function contentDisposition(filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const exact = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${fallback}"; filename*=UTF-8''${exact}`;
}

/** 201 with the sent message, or 202 with the draft the approval policy holds for the org admin. */
function answer(ctx: Context, outcome: Outcome): void {
  if ('sent' in outcome) {
    ctx.status = 201;
    ctx.body = presentSent(outcome.sent);
  } else {
    ctx.status = 202;
    ctx.body = presentDraft(outcome.held);
  }
}

export interface MailRouteDeps extends AuthDeps {
  mail: MailService;
}

/** SPEC 4.2 messages: identity keys only, each route behind its mail scope. */
export function messageRoutes({ keys, identities, mail }: MailRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/messages' });

  // A page kept in memory (mail-reader.ts) is the same object for as long as its inbox is unchanged, and
  // the answer is a function of it alone: its JSON is made once, not on every poll of an unchanged inbox
  // (50 messages, each with its authentication verdict, about 27 kB). A body lives as long as its page:
  // when the page cache lets a page go, its body goes with it. The cache's byte bound counts pages, so the
  // bodies of the pages it keeps add at most about as much again.
  const listBodies = new WeakMap<MessagePage, Buffer>();
  router.get('/', requireScope('mail:read'), async (ctx) => {
    const query = parseInput(listMessagesInput, ctx.query, 'query');
    const page = await mail.listMessages(identityIdOf(ctx), query);
    let body = listBodies.get(page);
    if (!body) {
      const messages = page.items.map((m) => presentMessage(m));
      body = Buffer.from(JSON.stringify({ messages, count: messages.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) }));
      listBodies.set(page, body);
    }
    ctx.type = 'json';
    ctx.body = body;
  });

  router.post('/send', requireScope('mail:send'), async (ctx) => {
    const body = parseInput(sendInput, ctx.request.body, 'body');
    answer(ctx, await mail.sendChecked(identityIdOf(ctx), body));
  });

  // Before /:messageId, which would take "search" for a message id.
  router.get('/search', requireScope('mail:read'), async (ctx) => {
    const query = parseInput(searchInput, ctx.query, 'query');
    const result = await mail.search(identityIdOf(ctx), query);
    const messages = result.items.map((hit) => ({ ...presentMessage(hit.message), score: hit.score }));
    ctx.body = { messages, count: messages.length, ...(result.nextPageToken ? { nextPageToken: result.nextPageToken } : {}) };
  });

  router.get('/:messageId', requireScope('mail:read'), async (ctx) => {
    const { messageId } = parseInput(messageParams, ctx.params, 'params');
    ctx.body = presentMessage(await mail.readMessage(identityIdOf(ctx), messageId), { single: true });
  });

  router.get('/:messageId/attachments/:attachmentId', requireScope('mail:read'), async (ctx) => {
    const { messageId, attachmentId } = parseInput(attachmentParams, ctx.params, 'params');
    const { attachment, open } = await mail.openAttachment(identityIdOf(ctx), messageId, attachmentId);
    ctx.type = attachment.contentType;
    ctx.length = attachment.size;
    ctx.set('Content-Disposition', contentDisposition(attachment.filename));
    // Even opened directly, an HTML or SVG attachment runs no script with our origin's rights.
    ctx.set('Content-Security-Policy', "default-src 'none'; sandbox");
    ctx.body = open();
  });

  router.post('/:messageId/reply', requireScope('mail:send'), async (ctx) => {
    const { messageId } = parseInput(messageParams, ctx.params, 'params');
    const body = parseInput(replyInput, ctx.request.body, 'body');
    answer(ctx, await mail.replyChecked(identityIdOf(ctx), messageId, body));
  });

  router.post('/:messageId/forward', requireScope('mail:send'), async (ctx) => {
    const { messageId } = parseInput(messageParams, ctx.params, 'params');
    const body = parseInput(forwardInput, ctx.request.body, 'body');
    answer(ctx, await mail.forwardChecked(identityIdOf(ctx), messageId, body));
  });

  router.patch('/:messageId', requireScope('mail:manage'), async (ctx) => {
    const { messageId } = parseInput(messageParams, ctx.params, 'params');
    const body = parseInput(labelsInput, ctx.request.body, 'body');
    ctx.body = presentLabels(await mail.updateLabels(identityIdOf(ctx), messageId, body));
  });

  return router;
}

/** SPEC 4.2 threads. */
export function threadRoutes({ keys, identities, mail }: MailRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/threads' });
  router.use(requireScope('mail:read'));

  router.get('/', async (ctx) => {
    const query = parseInput(listThreadsInput, ctx.query, 'query');
    const page = await mail.listThreads(identityIdOf(ctx), query);
    const threads = page.items.map((t) => presentThread(t));
    ctx.body = { threads, count: threads.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  });

  router.get('/:threadId', async (ctx) => {
    const { threadId } = parseInput(threadParams, ctx.params, 'params');
    const { thread, messages } = await mail.getThread(identityIdOf(ctx), threadId);
    ctx.body = presentThread(thread, messages);
  });

  return router;
}
