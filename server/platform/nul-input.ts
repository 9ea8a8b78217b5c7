import type { Context, Next } from 'koa';
import { badRequest } from './errors.js';

/**
 * NUL (U+0000) is refused anywhere in a request, with a 400 naming where. PostgreSQL, which stores our dev
 * and test database under FerretDB, cannot hold or compare a string containing it (jsonb refuses \u0000:
 * "unsupported Unicode escape sequence"), so such input would end in a 500 there; MongoDB refuses it in
 * field names. No id, label, key or text we accept has a use for it.
 */
export function refuseNulInUrl() {
  // Not async: on every request; a throw here is a rejection for koa-compose all the same.
  return (ctx: Context, next: Next) => {
    // A NUL reaches us only percent-encoded: Node refuses a raw one in the request line.
    if (/%00/.test(ctx.path)) throw badRequest('path: must not contain NUL (%00)');
    if (/%00/.test(ctx.querystring)) throw badRequest('query: must not contain NUL (%00)');
    return next();
  };
}

/** Where a parsed JSON value holds a NUL in a string or a key ("body.data.note"), if anywhere. */
export function nulPath(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return value.includes('\0') ? path : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nulPath(value[i], `${path}.${i}`);
      if (found) return found;
    }
    return undefined;
  }
  if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (key.includes('\0')) return `${path} (a key)`;
      const found = nulPath(item, `${path}.${key}`);
      if (found) return found;
    }
  }
  return undefined;
}
