import type { Context, Next } from 'koa';
import type { ApiKeyService } from '../platform/auth/api-keys.js';
import { AppError } from '../platform/errors.js';
import { csrfMatches, type ConsoleSessions, type LiveSession } from './sessions.js';

export const COOKIE = 'agentgate_console';
export const CONSOLE_PREFIX = '/console';
export const SIGN_IN_PATH = `${CONSOLE_PREFIX}/sign-in`;

declare module 'koa' {
  interface DefaultState {
    consoleSession?: LiveSession;
  }
}

export function sessionOf(ctx: Context): LiveSession {
  const session = ctx.state.consoleSession;
  if (!session) throw new AppError(401, 'unauthorized', 'Sign in to use the console');
  return session;
}

/**
 * The signed-in session, from the cookie. The key it came from must still be live: revoking a key ends
 * its sessions at their next request even when the revocation came through the API. A page request
 * without a session goes to the sign-in form; anything else (a form post, a live-refresh fetch) gets 401.
 */
export function requireSession(keys: ApiKeyService, sessions: ConsoleSessions) {
  return async (ctx: Context, next: Next) => {
    const session = await sessions.resolve(ctx.cookies.get(COOKIE));
    const key = session && await keys.findOwned(session.keyId, session.orgId, session.role === 'admin' ? 'platform' : 'seller');
    if (session && (!key || key.revokedAt)) await sessions.end(session._id);
    if (!session || !key || key.revokedAt) {
      ctx.cookies.set(COOKIE, null, { path: CONSOLE_PREFIX });
      if (ctx.method === 'GET' && !ctx.get('x-console-live')) {
        ctx.status = 303;
        ctx.redirect(SIGN_IN_PATH);
        return;
      }
      throw new AppError(401, 'unauthorized', 'Your console session has ended; sign in again');
    }
    ctx.state.consoleSession = session;
    return next();
  };
}

/**
 * Cross-site request forgery: a state-changing request must come from a page of this origin. SameSite=
 * Strict already keeps the cookie off cross-site requests; the Origin check (Referer when a browser sent
 * no Origin) and the per-session token in every form each stop a forged post on their own.
 */
export function sameOrigin() {
  return async (ctx: Context, next: Next) => {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      const claimed = ctx.get('origin') || originOfUrl(ctx.get('referer'));
      // Not ctx.origin: Koa 3 returns the request's own Origin header there. This is the origin the
      // browser addressed (the protocol and host honour TRUST_PROXY as the rest of the app does).
      if (!claimed || claimed !== `${ctx.protocol}://${ctx.host}`) {
        throw new AppError(403, 'cross_origin', 'This form was not posted from the console itself, so it was refused');
      }
    }
    return next();
  };
}

export function requireCsrfToken() {
  return async (ctx: Context, next: Next) => {
    const submitted = (ctx.request.body as Record<string, unknown> | undefined)?._csrf;
    if (!csrfMatches(sessionOf(ctx), submitted)) {
      throw new AppError(403, 'csrf_token_invalid', 'The form is out of date or was not made by the console (CSRF token mismatch). Reload the page and try again');
    }
    return next();
  };
}

/** Actions that change anything need the platform key; a seller-key session only reads. */
export function requireAdmin() {
  return async (ctx: Context, next: Next) => {
    if (sessionOf(ctx).role !== 'admin') {
      throw new AppError(403, 'read_only', 'Signed in with a seller key: the console is read-only. Sign in with the platform key to make changes');
    }
    return next();
  };
}

function originOfUrl(url: string): string | undefined {
  if (!url) return undefined;
  try { return new URL(url).origin; } catch { return undefined; }
}

export type Middleware = (ctx: Context, next: Next) => Promise<unknown>;
export interface ConsoleGuards { sameOrigin: Middleware; session: Middleware; csrf: Middleware; admin: Middleware }

export function consoleGuards(keys: ApiKeyService, sessions: ConsoleSessions): ConsoleGuards {
  return { sameOrigin: sameOrigin(), session: requireSession(keys, sessions), csrf: requireCsrfToken(), admin: requireAdmin() };
}
