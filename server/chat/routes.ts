import Router from '@koa/router';
import type { Context } from 'koa';
import { authenticatedRouter, identityIdOf, principalOf, requireScope, type AuthDeps } from '../platform/auth/authenticate.js';
import type { Config } from '../platform/config.js';
import { AppError } from '../platform/errors.js';
import { parseInput } from '../platform/validate.js';
import { presentChatMessage, type ChatOwner, type ChatService, type PlatformEventEnvelope } from './chat-service.js';
import { verifyPlatformSignature } from './event-signature.js';
import { callbackQuery, installParams, listMessagesQuery, sendBody } from './schemas.js';
import { escapeHtml } from '../platform/html.js';

const ownerOf = (ctx: Context): ChatOwner => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });

export interface ChatRouteDeps extends AuthDeps {
  chat: ChatService;
}

/** The agent's side of the chat integration (SPEC 4.3): identity key with chat:read / chat:send. */
export function chatRoutes({ keys, identities, chat }: ChatRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/chat' });
  const read = requireScope('chat:read');
  const send = requireScope('chat:send');

  router.get('/connection', read, async (ctx) => {
    ctx.body = await chat.status(ownerOf(ctx));
  });

  router.post('/connect', send, async (ctx) => {
    ctx.status = 201;
    ctx.body = await chat.connect(ownerOf(ctx));
  });

  router.delete('/connection', send, async (ctx) => {
    ctx.body = await chat.disconnect(ownerOf(ctx));
  });

  router.get('/channels', read, async (ctx) => {
    const channels = await chat.channels(ownerOf(ctx));
    ctx.body = { channels, count: channels.length };
  });

  router.post('/messages', send, async (ctx) => {
    const body = parseInput(sendBody, ctx.request.body, 'body');
    ctx.body = await chat.send(ownerOf(ctx), body);
  });

  router.get('/messages', read, async (ctx) => {
    const query = parseInput(listMessagesQuery, ctx.query, 'query');
    const page = await chat.listMessages(ownerOf(ctx), query);
    const messages = page.items.map(presentChatMessage);
    ctx.body = { messages, count: messages.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  });

  return router;
}

/**
 * What the browser and the platform call, without an API key: the install link (a capability valid 15
 * minutes), the OAuth callback, and the Events API endpoint (authenticated by the platform's signature).
 * Registered before chatRoutes, whose key check would otherwise run for these paths.
 */
export function chatPlatformRoutes({ config, chat }: { config: Pick<Config, 'CHAT_SIGNING_SECRET'>; chat: ChatService }): Router {
  const router = new Router({ prefix: '/v0/chat' });

  router.get('/install/:state', async (ctx) => {
    const params = installParams.safeParse(ctx.params);
    if (!params.success) return page(ctx, 400, 'Not an install link', 'This address is not an install link. Ask the agent for a new one.');
    const target = await chat.authorizeUrlFor(params.data.state);
    if (!target) return page(ctx, 410, 'Install link expired', 'This install link is unknown or has expired. Ask the agent for a new one.');
    ctx.redirect(target);
  });

  router.get('/oauth/callback', async (ctx) => {
    const query = callbackQuery.safeParse(ctx.query);
    if (!query.success) return page(ctx, 400, 'Invalid install callback', 'This page is reached from the chat platform after an install.');
    try {
      const { teamName } = await chat.completeInstall(query.data);
      page(ctx, 200, 'Connected', `The agent is now connected to ${teamName}. Invite its bot to the channels it should read or post in. You can close this window.`);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      page(ctx, err.status, 'Install not completed', err.message);
    }
  });

  router.post('/events', async (ctx) => {
    const secret = config.CHAT_SIGNING_SECRET;
    if (!secret) throw new AppError(503, 'chat_not_configured', 'The chat integration is not configured on this server');
    const valid = verifyPlatformSignature({
      rawBody: ctx.request.rawBody ?? Buffer.alloc(0), signingSecret: secret,
      timestamp: ctx.get('x-slack-request-timestamp') || undefined, signature: ctx.get('x-slack-signature') || undefined,
    });
    if (!valid) throw new AppError(401, 'invalid_signature', 'The request signature or timestamp is invalid');
    const envelope = ctx.request.body as PlatformEventEnvelope & { challenge?: unknown };
    if (envelope?.type === 'url_verification') {
      ctx.body = { challenge: String(envelope.challenge ?? '') };
      return;
    }
    ctx.body = { ok: true, ...(await chat.ingest(envelope)) };
  });

  return router;
}


/** The few pages a human sees in the browser during an install. */
function page(ctx: Context, status: number, title: string, text: string): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Content-Security-Policy', "default-src 'none'");
  ctx.body = `<!doctype html><meta charset="utf-8"><title>${escapeHtml(title)}</title><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p>`;
}
