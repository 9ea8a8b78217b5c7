import { createHash } from 'node:crypto';
import type { Context, Next } from 'koa';
import type { Collection } from 'mongodb';
import { AppError, isDuplicateKey } from './errors.js';
import type { Logger } from './logger.js';
import type { SealedSecret, SecretBox } from './secret-box.js';

// `Idempotency-Key` on every POST that carries an API key: one intent, one effect, across every process
// on the database. The first request with a key inserts the key's record (a unique `_id`: the only write
// FerretDB makes happen once); any other request with that key, in any process, finds it there. A record
// is written by the one request that inserted it and by nobody else.

/** How long a key's answer is kept and replayed. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600_000;
/** A request still running after this long is taken for dead (its process crashed): the key may be used again. */
const ABANDONED_MS = 60_000;
/** How long a request waits for another request with its key to finish before answering 409 in progress. */
const WAIT_MS = 10_000;

interface KeyDoc {
  _id: string;
  requestHash: string;
  state: 'pending' | 'done';
  status?: number;
  /**
   * The answer's JSON, as the client got it, sealed under the master key: an answer may carry what is
   * returned once (a new API key, a webhook secret) and must not lie in the database in the clear.
   */
  body?: SealedSecret;
  createdAt: Date;
}

const KEY = /^[\x21-\x7e]{1,255}$/;

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/** JSON with sorted keys: the same body, however its keys were ordered, is the same request. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export interface IdempotencyOptions {
  /** Paths it does not apply to (MCP's JSON-RPC, form pages). */
  except: (path: string) => boolean;
}

/**
 * Koa middleware, after the body parser. A POST with `Idempotency-Key` and an `Authorization` header is
 * run once per (API key, Idempotency-Key) within IDEMPOTENCY_TTL_MS:
 * - the same key and the same request (path, query, body) answer the first answer again, with
 *   `Idempotent-Replayed: true`, and do nothing;
 * - the same key with another request is `409 idempotency_key_reused`;
 * - while the first is still running elsewhere, the second waits for its answer (WAIT_MS), else `409
 *   idempotency_key_in_progress`.
 * A request that fails (any non-2xx answer) leaves no record, so the client retries it with the same key.
 * Keys are scoped to the API key (its hash): two callers never see each other's answers.
 */
export type IdempotencyKeys = Collection<KeyDoc>;
export const IDEMPOTENCY_COLLECTION = 'idempotency_keys';
/** Where rotate-master-key finds the sealed answers. */
export const idempotencySealedFields = [{ collection: IDEMPOTENCY_COLLECTION, path: 'body' }];

export function idempotency(keys: IdempotencyKeys, secrets: SecretBox, log: Logger, options: IdempotencyOptions) {
  let lastTrim = 0;
  const trim = () => {
    const now = Date.now();
    if (now - lastTrim < 60_000) return;
    lastTrim = now;
    // FerretDB 1.x has no TTL indexes: expired records go here, at most once a minute per process.
    keys.deleteMany({ createdAt: { $lt: new Date(now - IDEMPOTENCY_TTL_MS) } }).catch((err) => log.warn({ err }, 'expired idempotency keys not trimmed'));
  };

  const once = async (ctx: Context, next: Next, given: string, authorization: string) => {
    if (!KEY.test(given)) throw new AppError(400, 'invalid_idempotency_key', 'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces');
    trim();
    const id = `${sha256(authorization)}:${given}`;
    const requestHash = sha256(`${ctx.method} ${ctx.path}?${ctx.querystring}\n${canonical((ctx.request as { body?: unknown }).body ?? null)}`);

    const claim = async (): Promise<KeyDoc | null> => {
      for (let attempt = 0; attempt < 5; attempt++) {
        const doc: KeyDoc = { _id: id, requestHash, state: 'pending', createdAt: new Date() };
        try {
          await keys.insertOne(doc);
          return null; // ours
        } catch (err) {
          if (!isDuplicateKey(err)) throw err;
        }
        const existing = await keys.findOne({ _id: id });
        if (!existing) continue; // removed meanwhile (a failed request): try again
        const age = Date.now() - existing.createdAt.getTime();
        const stale = age > IDEMPOTENCY_TTL_MS || (existing.state === 'pending' && age > ABANDONED_MS);
        if (!stale) return existing;
        // Expired, or left by a process that died: removed (only that very record) and claimed anew.
        await keys.deleteOne({ _id: id, createdAt: existing.createdAt });
      }
      throw new AppError(409, 'idempotency_key_in_progress', 'Another request with this Idempotency-Key is being processed; retry shortly');
    };

    let existing = await claim();
    if (existing) {
      if (existing.requestHash !== requestHash) {
        throw new AppError(409, 'idempotency_key_reused', 'This Idempotency-Key was used with a different request in the last 24 hours; use a new key for a new request');
      }
      const deadline = Date.now() + WAIT_MS;
      while (existing?.state === 'pending' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        existing = await keys.findOne({ _id: id });
      }
      if (!existing) {
        // The first request failed and gave the key back: this one is the retry.
        if (await claim()) throw new AppError(409, 'idempotency_key_in_progress', 'Another request with this Idempotency-Key is being processed; retry shortly');
      } else if (existing.state === 'pending') {
        throw new AppError(409, 'idempotency_key_in_progress', 'Another request with this Idempotency-Key is being processed; retry shortly');
      } else {
        ctx.status = existing.status ?? 200;
        const answer = existing.body ? secrets.openText(existing.body, `idempotency:${id}`) : 'null';
        ctx.body = answer === 'null' ? null : JSON.parse(answer);
        ctx.set('Idempotent-Replayed', 'true');
        return;
      }
    }

    try {
      await next();
    } catch (err) {
      await keys.deleteOne({ _id: id }).catch((e) => log.warn({ err: e }, 'idempotency key not released after a failed request'));
      throw err;
    }
    const body = ctx.body;
    const storable = ctx.status >= 200 && ctx.status < 300 && (body === undefined || body === null || (typeof body === 'object' && !Buffer.isBuffer(body) && typeof (body as { pipe?: unknown }).pipe !== 'function'));
    if (!storable) {
      await keys.deleteOne({ _id: id }).catch((e) => log.warn({ err: e }, 'idempotency key not released'));
      return;
    }
    const stored = secrets.seal(JSON.stringify(body ?? null), `idempotency:${id}`);
    await keys.updateOne({ _id: id }, { $set: { state: 'done', status: ctx.status, body: stored } })
      .catch((err) => log.error({ err }, 'idempotent answer not recorded; a retry with the key waits, then runs again after the abandon time'));
  };

  // Every request passes here: those it does not apply to (every GET) go on without an async step of
  // their own, which would cost each of them a promise and its turns of the microtask queue.
  return (ctx: Context, next: Next) => {
    if (ctx.method !== 'POST') return next();
    // Present but empty is a malformed key, not no key.
    const sent = ctx.headers['idempotency-key'] !== undefined;
    const authorization = ctx.get('authorization');
    if (!sent || !authorization || options.except(ctx.path)) return next();
    return once(ctx, next, ctx.get('idempotency-key'), authorization);
  };
}
