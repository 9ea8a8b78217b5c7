import type { Context, Next } from 'koa';
import { AppError } from './errors.js';
import { isDatabaseUnavailable } from './database-outage.js';

/** Outermost middleware: every failure leaves as `{error, message, status}`; never a stack trace. */
export function errorHandler(log: (err: unknown, ctx: Context) => void) {
  return async (ctx: Context, next: Next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new AppError(404, 'not_found', `No route for ${ctx.method} ${ctx.path}`);
      }
    } catch (err) {
      const appError = toAppError(err);
      if (appError.status >= 500) log(err, ctx);
      ctx.status = appError.status;
      ctx.set(appError.headers);
      ctx.body = appError.toBody();
    }
  };
}

function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  // A database restarting or failing over: the client may try again in a moment (and is told so).
  if (isDatabaseUnavailable(err)) return new AppError(503, 'database_unavailable', 'The database did not answer; try again in a moment', undefined, { 'Retry-After': '2' });
  const e = err as { status?: number; statusCode?: number; expose?: boolean; message?: string };
  const status = e?.status ?? e?.statusCode;
  // Koa/router HttpErrors (405 Method Not Allowed, 501) are safe to pass on.
  if (typeof status === 'number' && status >= 400 && status < 500 && e.expose) {
    const code = status === 405 ? 'method_not_allowed' : 'bad_request';
    return new AppError(status, code, e.message ?? 'Bad request');
  }
  return new AppError(500, 'internal_error', 'Internal server error');
}
