import type { Context, Next } from 'koa';
import { AppError } from '../platform/errors.js';
import { errorPage } from './views/layout.js';

const TITLES: Record<number, string> = {
  400: 'That input was not accepted', 401: 'Please sign in', 403: 'Not allowed', 404: 'Not found', 409: 'Not possible right now',
  413: 'Too much data', 415: 'Unsupported form', 429: 'Too many attempts', 500: 'Something went wrong', 502: 'An upstream service failed', 503: 'Unavailable',
};

/**
 * Console failures as HTML pages with the right status: a bad input is a 4xx page naming the field,
 * another org's record is the same 404 as a missing one, and a failure of ours is a 500 page that tells
 * nothing about the internals.
 */
export function consoleErrors(log: (err: unknown, ctx: Context) => void) {
  return async (ctx: Context, next: Next) => {
    try {
      await next();
    } catch (err) {
      const e = err as { status?: number; expose?: boolean; message?: string };
      const known = err instanceof AppError || (typeof e?.status === 'number' && e.status >= 400 && e.status < 500 && e.expose);
      const status = known ? (err instanceof AppError ? err.status : e.status!) : 500;
      if (status >= 500) log(err, ctx);
      ctx.status = status;
      if (err instanceof AppError) ctx.set(err.headers);
      ctx.type = 'text/html; charset=utf-8';
      const message = !known ? 'The console could not finish this request. Try again; if it keeps failing, the server log has the details.' : e.message ?? 'Request refused';
      ctx.body = errorPage({ status, title: TITLES[status] ?? 'Request refused', message, session: ctx.state.consoleSession }).text;
    }
  };
}

/** Self-only Content-Security-Policy and framing refusal on every console response. */
export function consoleHeaders() {
  return async (ctx: Context, next: Next) => {
    ctx.set('Content-Security-Policy', "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    ctx.set('X-Frame-Options', 'DENY');
    // same-origin: the Referer fallback of the origin check still works, and no console URL leaks to an explorer link.
    ctx.set('Referrer-Policy', 'same-origin');
    return next();
  };
}
