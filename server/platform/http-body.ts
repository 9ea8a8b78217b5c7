import type { Context, Next } from 'koa';
import { AppError } from './errors.js';
import { exceedsJsonDepth, MAX_JSON_DEPTH } from './json-input.js';

declare module 'koa' {
  interface Request {
    /** Parsed JSON body ({} when the request had none). */
    body?: unknown;
    rawBody?: Buffer;
  }
}

/**
 * Reads and parses a JSON body with a hard size cap. The cap is checked against Content-Length first
 * and again while streaming, so a lying or chunked client cannot push more than `maxBytes` into memory.
 */
export function jsonBody(maxBytes: number) {
  return async (ctx: Context, next: Next) => {
    if (ctx.method === 'GET' || ctx.method === 'HEAD' || ctx.method === 'OPTIONS') return next();
    const declared = Number(ctx.get('content-length') || 0);
    if (declared > maxBytes) throw tooLarge(maxBytes);
    const raw = await readLimited(ctx, maxBytes);
    ctx.request.rawBody = raw;
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
    if (containsNul(ctx.request.body)) throw nulRefused('the request body');
    return next();
  };
}

/**
 * PostgreSQL (under our embedded FerretDB) can store no NUL character in any text, and a query that
 * carries one fails inside the database: NUL is refused at the edge, in the path, the query string and
 * every key and string of a JSON body, with a 400 that says where.
 */
export function refuseNulInUrl() {
  return async (ctx: Context, next: Next) => {
    if (/%00/.test(ctx.path) || ctx.path.includes('\0')) throw nulRefused('the path');
    if (/%00/.test(ctx.querystring) || ctx.querystring.includes('\0')) throw nulRefused('the query string');
    return next();
  };
}

const nulRefused = (where: string) => new AppError(400, 'invalid_character', `NUL characters are not allowed in ${where}`);

/** Walks a parsed body without recursion (its depth is already bounded by MAX_JSON_DEPTH). */
function containsNul(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length) {
    const item = stack.pop();
    if (typeof item === 'string') { if (item.includes('\0')) return true; }
    else if (Array.isArray(item)) stack.push(...item);
    else if (item && typeof item === 'object') {
      for (const [key, child] of Object.entries(item)) {
        if (key.includes('\0')) return true;
        stack.push(child);
      }
    }
  }
  return false;
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
