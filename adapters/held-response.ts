import type { ServerResponse } from 'node:http';
import type { HeldPayment } from '../middleware/index.js';

type Call = { method: 'writeHead' | 'write' | 'end'; args: unknown[] };

/**
 * Holds back a Node response while a payment is held (settle after the handler), for every framework that
 * writes through Node's `ServerResponse` (Express, Koa, Fastify's raw reply).
 *
 * The handler writes as it always does. Nothing reaches the client until the handler commits its
 * response: its first body byte or its end. Then, with a status below 400, the payment is captured; only
 * once it is settled do the held status, headers and bytes go out, with the settlement headers added, and
 * the rest of a streamed response (res.write, a piped file, server-sent events) flows as usual. If the
 * settlement fails, the held response is dropped and the buyer gets the 402 (or 5xx) that says why. With
 * a status of 400 or more (the handler failed, or threw and the framework answered 500), the payment is
 * released, nothing is charged, and the handler's answer goes out as it was. A client that goes away
 * before the commit releases it too.
 *
 * A streamed response is charged when it starts: a handler that fails after its first byte has been paid
 * for. While the payment settles, writes report backpressure (a piped stream waits for 'drain').
 */
export function holdResponse(res: ServerResponse, hold: HeldPayment): void {
  const original = { writeHead: res.writeHead, write: res.write, end: res.end, flushHeaders: res.flushHeaders };
  const queue: Call[] = [];
  let state: 'holding' | 'deciding' | 'open' | 'dropped' = 'holding';

  // Our wrappers stay in place once the response is open (they pass straight through): restoring the
  // originals would undo whatever a middleware mounted after us wrapped around them (compression, say).
  const send = (method: Call['method'], ...args: unknown[]) => (original[method] as (...a: unknown[]) => unknown).apply(res, args);

  const decide = async () => {
    if (state !== 'holding') return;
    state = 'deciding';
    if (res.statusCode >= 400) {
      await hold.release();
      open();
      return;
    }
    const outcome = await hold.capture();
    if (outcome.kind === 'paid') {
      for (const [name, value] of Object.entries(outcome.responseHeaders)) res.setHeader(name, value as string);
      // Headers given to writeHead itself (Fastify passes all of them there) would win over setHeader.
      const ours = new Set(Object.keys(outcome.responseHeaders).map((name) => name.toLowerCase()));
      for (const call of queue) if (call.method === 'writeHead') call.args = call.args.map((arg, i) => (i > 0 ? withoutHeaders(arg, ours) : arg));
      open();
      return;
    }
    // Not settled: none of the held response may reach the buyer; the refusal goes out instead, and
    // whatever the handler still writes goes nowhere.
    state = 'dropped';
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    for (const call of queue) callbackOf(call)?.(new Error('response dropped: the payment was not settled'));
    queue.length = 0;
    if (outcome.kind === 'payment-required') {
      send('writeHead', 402, outcome.headers);
      send('end', outcome.bodyText);
    } else {
      send('writeHead', outcome.status, { 'content-type': 'application/json' });
      send('end', JSON.stringify(outcome.body));
    }
  };

  const open = () => {
    state = 'open';
    for (const call of queue.splice(0)) send(call.method, ...call.args);
    res.emit('drain');
  };

  const commit = () => {
    void decide().catch((error: unknown) => {
      // The paywall's own failure (not the payment's): nothing was sent yet, so a 502 is still possible.
      if (state === 'open' || state === 'dropped') return;
      state = 'dropped';
      void hold.release();
      if (!res.headersSent) send('writeHead', 502, { 'content-type': 'application/json' });
      send('end', JSON.stringify({ error: 'facilitator_unavailable', message: `payment could not be settled: ${(error as Error).message}`, status: 502 }));
    });
  };

  // Once the handler has called end(), the response says so, held or not: a framework that reads
  // writableEnded to know whether it still has to answer (Fastify's reply.sent, after an async handler
  // that called reply.send() without returning it; Koa's ctx.writable) must not send a second answer.
  let ended = false;
  Object.defineProperty(res, 'writableEnded', {
    configurable: true,
    get: () => ended || Reflect.get(Object.getPrototypeOf(res) as object, 'writableEnded', res) === true,
  });

  res.writeHead = function writeHead(this: ServerResponse, ...args: unknown[]) {
    if (state === 'open') return original.writeHead.apply(res, args as never);
    if (state === 'dropped') return res;
    // Keep the status now (the decision reads it); the call itself goes out with the rest.
    if (typeof args[0] === 'number') res.statusCode = args[0];
    queue.push({ method: 'writeHead', args });
    return res;
  } as typeof res.writeHead;
  // While held, the headers are not sent, whatever the framework asks.
  res.flushHeaders = function flushHeaders() {
    if (state === 'open') original.flushHeaders.call(res);
  };
  res.write = function write(this: ServerResponse, ...args: unknown[]) {
    if (state === 'open') return original.write.apply(res, args as never);
    if (state === 'dropped') return false;
    queue.push({ method: 'write', args });
    commit();
    return false;
  } as typeof res.write;
  res.end = function end(this: ServerResponse, ...args: unknown[]) {
    ended = true;
    if (state === 'open') return original.end.apply(res, args as never);
    if (state === 'dropped') return res;
    queue.push({ method: 'end', args });
    commit();
    return res;
  } as typeof res.end;

  // The buyer went away before anything was committed: nothing to deliver, nothing to charge.
  res.once('close', () => {
    if (state === 'holding') {
      state = 'dropped';
      void hold.release();
    }
  });
}

/** The callback a write or end call was given, if any (Node's optional last argument). */
function callbackOf(call: Call): ((error?: Error | null) => void) | undefined {
  const last = call.args[call.args.length - 1];
  return typeof last === 'function' ? (last as (error?: Error | null) => void) : undefined;
}

/** A writeHead headers argument (an object, a flat [name, value, ...] list or [name, value] pairs) without the given names. */
function withoutHeaders(arg: unknown, names: Set<string>): unknown {
  const keep = (name: unknown) => !names.has(String(name).toLowerCase());
  if (Array.isArray(arg)) {
    if (arg.length > 0 && Array.isArray(arg[0])) return arg.filter((pair: unknown[]) => keep(pair[0]));
    const kept: unknown[] = [];
    for (let i = 0; i + 1 < arg.length; i += 2) if (keep(arg[i])) kept.push(arg[i], arg[i + 1]);
    return kept;
  }
  if (arg !== null && typeof arg === 'object') return Object.fromEntries(Object.entries(arg).filter(([name]) => keep(name)));
  return arg;
}
