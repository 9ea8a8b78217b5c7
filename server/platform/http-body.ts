import type { Context, Next } from 'koa';
import { AppError, badRequest } from './errors.js';
import { nulPath } from './nul-input.js';
import { MAX_JSON_DEPTH } from './json-input.js';
import { exceedsJsonDepth } from 'agentgate-x402-wire';

declare module 'koa' {
  interface Request {
    /** Parsed JSON body ({} when the request had none). */
    body?: unknown;
    rawBody?: Buffer;
  }
}

/** The raw body, refused above `maxBytes` by its declared length and again while streaming; kept as rawBody. */
async function readCapped(ctx: Context, maxBytes: number): Promise<Buffer> {
  const declared = Number(ctx.get('content-length') || 0);
  if (declared > maxBytes) throw tooLarge(maxBytes);
  const raw = await readLimited(ctx, maxBytes);
  ctx.request.rawBody = raw;
  return raw;
}

/**
 * Reads and parses a JSON body with a hard size cap. The cap is checked against Content-Length first
 * and again while streaming, so a lying or chunked client cannot push more than `maxBytes` into memory.
 */
export function jsonBody(maxBytes: number) {
  // A request without a body goes on without an async step of its own (every GET passes here).
  return (ctx: Context, next: Next) => (ctx.method === 'GET' || ctx.method === 'HEAD' || ctx.method === 'OPTIONS' ? next() : parse(ctx, next));
  async function parse(ctx: Context, next: Next) {
    const raw = await readCapped(ctx, maxBytes);
    if (raw.length === 0) {
      ctx.request.body = {};
      return next();
    }
    const type = ctx.request.type;
    if (type && type !== 'application/json' && !type.endsWith('+json')) {
      throw new AppError(415, 'unsupported_media_type', 'Request bodies must be JSON (Content-Type: application/json)');
    }
    const text = raw.toString('utf8');
    if (exceedsJsonDepth(text, MAX_JSON_DEPTH)) {
      throw new AppError(400, 'json_too_deep', `Request body nests arrays or objects deeper than ${MAX_JSON_DEPTH} levels`);
    }
    try {
      ctx.request.body = JSON.parse(text);
    } catch {
      throw new AppError(400, 'invalid_json', 'Request body is not valid JSON');
    }
    const nulAt = nulPath(ctx.request.body, 'body');
    if (nulAt) throw badRequest(`${nulAt}: must not contain NUL (\\u0000)`);
    return next();
  }
}

/**
 * Reads an HTML form post (application/x-www-form-urlencoded) with the same size cap, for the browser
 * console: its pages post forms, which carry no JSON. Values are strings; a repeated field keeps its last
 * value. NUL is refused as in JSON bodies (the embedded database can neither store nor compare it).
 */
export function formBody(maxBytes: number) {
  return async (ctx: Context, next: Next) => {
    if (ctx.method === 'GET' || ctx.method === 'HEAD' || ctx.method === 'OPTIONS') return next();
    const raw = await readCapped(ctx, maxBytes);
    const type = ctx.request.type;
    if (raw.length > 0 && type !== 'application/x-www-form-urlencoded') {
      throw new AppError(415, 'unsupported_media_type', 'Console forms are posted as application/x-www-form-urlencoded');
    }
    const fields: Record<string, string> = {};
    for (const [name, value] of new URLSearchParams(raw.toString('utf8'))) fields[name] = value;
    const nulAt = nulPath(fields, 'body');
    if (nulAt) throw badRequest(`${nulAt}: must not contain NUL (\\u0000)`);
    ctx.request.body = fields;
    return next();
  };
}

const tooLarge = (maxBytes: number) => new AppError(413, 'payload_too_large', `Request body exceeds ${maxBytes} bytes`);

function readLimited(ctx: Context, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const req = ctx.req;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        cleanup();
        req.resume(); // drain what is left so the 413 can be written
        reject(tooLarge(maxBytes));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => { cleanup(); resolve(Buffer.concat(chunks)); };
    const onError = (err: Error) => { cleanup(); reject(new AppError(400, 'invalid_body', `Could not read request body: ${err.message}`)); };
    const cleanup = () => { req.off('data', onData); req.off('end', onEnd); req.off('error', onError); };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}
