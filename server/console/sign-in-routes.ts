import type Router from '@koa/router';
import type { Context } from 'koa';
import type { ActivityLog } from '../platform/activity-log.js';
import type { ApiKeyService } from '../platform/auth/api-keys.js';
import type { RateLimiter } from '../platform/rate-limit.js';
import { AppError } from '../platform/errors.js';
import { COOKIE, CONSOLE_PREFIX, type ConsoleGuards } from './access.js';
import type { ConsoleSessions } from './sessions.js';
import { signInForm } from './schemas.js';
import { signInPage } from './views/sign-in.js';
import { sendHtml, seeOther } from './render.js';

/** Wrong keys allowed per client address and window before sign-in answers 429. */
export const SIGN_IN_FAILURES = { limit: 10, windowMs: 15 * 60 * 1000 };

export interface SignInDeps {
  keys: ApiKeyService;
  rateLimiter: RateLimiter;
  logs: ActivityLog;
}

/** Sign-in exchanges a platform or seller key for a session cookie; sign-out deletes the session. */
export function signInRoutes(router: Router, { keys, rateLimiter, logs }: SignInDeps, sessions: ConsoleSessions, guards: ConsoleGuards): void {
  router.get('/sign-in', async (ctx) => {
    if (await sessions.resolve(ctx.cookies.get(COOKIE))) return seeOther(ctx, `${CONSOLE_PREFIX}/payments`);
    sendHtml(ctx, signInPage({ notice: ctx.query.signedOut === '1' ? 'You are signed out.' : undefined }));
  });

  router.post('/sign-in', guards.sameOrigin, async (ctx) => {
    const bucket = `console-sign-in:${ctx.ip}`;
    const gate = await rateLimiter.exhausted(bucket, SIGN_IN_FAILURES.limit, SIGN_IN_FAILURES.windowMs);
    if (gate.exhausted) {
      throw new AppError(429, 'rate_limited', `Too many wrong keys from your address. Try again in ${Math.ceil(gate.retryAfter / 60)} minute(s).`, { retryAfter: gate.retryAfter }, { 'Retry-After': String(gate.retryAfter) });
    }
    const form = signInForm.safeParse(ctx.request.body);
    if (!form.success) return sendHtml(ctx, signInPage({ error: `Platform key: ${form.error.issues[0]?.message ?? 'invalid'}` }), 400);
    const key = await keys.resolve(form.data.key);
    if (!key) {
      await rateLimiter.consume(bucket, SIGN_IN_FAILURES.limit, SIGN_IN_FAILURES.windowMs);
      return sendHtml(ctx, signInPage({ error: 'That key is not valid, or it was revoked.' }), 401);
    }
    if (key.tier !== 'platform' && key.tier !== 'seller') {
      return sendHtml(ctx, signInPage({ error: 'An identity key cannot open the console: use the platform key or a seller key.' }), 403);
    }
    const role = key.tier === 'platform' ? 'admin' : 'viewer';
    const { token, expiresAt } = await sessions.create({ orgId: key.orgId, keyId: key._id, role });
    setSessionCookie(ctx, token, expiresAt);
    await logs.record({ orgId: key.orgId, action: 'console.signed_in', category: 'console', description: `Console sign-in with ${key.tier} key ${key.prefix}…${role === 'viewer' ? ' (read-only)' : ''}`, targetType: 'api_key', targetId: key._id, metadata: { ip: ctx.ip } });
    seeOther(ctx, `${CONSOLE_PREFIX}/payments`);
  });

  router.post('/sign-out', guards.sameOrigin, guards.session, guards.csrf, async (ctx) => {
    const session = ctx.state.consoleSession!;
    await sessions.end(session._id);
    ctx.cookies.set(COOKIE, null, { path: CONSOLE_PREFIX });
    await logs.record({ orgId: session.orgId, action: 'console.signed_out', category: 'console', description: 'Console sign-out', targetType: 'api_key', targetId: session.keyId });
    seeOther(ctx, `${CONSOLE_PREFIX}/sign-in?signedOut=1`);
  });
}

/** HttpOnly (no script reads it), Secure over https (ctx.secure honours TRUST_PROXY), SameSite=Strict, console paths only. */
function setSessionCookie(ctx: Context, token: string, expiresAt: Date): void {
  ctx.cookies.set(COOKIE, token, { httpOnly: true, secure: ctx.secure, sameSite: 'strict', path: CONSOLE_PREFIX, expires: expiresAt, overwrite: true });
}
