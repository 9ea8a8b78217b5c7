import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  /** When the request's body had fully arrived (ms since epoch). */
  at: number;
  headers: http.IncomingHttpHeaders;
  raw: string;
  json: any;
  /** The status it was answered with, once the answer was handed to the connection. */
  answered?: number;
  /** The sender went away (closed or was killed) before it had an answer. */
  aborted?: boolean;
}

/** What the receiver does with the next request: answer with a status, or hold the connection open. */
export type Reply = number | 'hang';

/**
 * A real HTTP receiver on loopback. Replies follow `script` in order, then `fallback`; every request is
 * recorded, and `next(n)` waits until n requests have arrived.
 */
export async function startReceiver(script: Reply[] = [], fallback: Reply = 200) {
  const received: ReceivedRequest[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const hung: Array<{ res: http.ServerResponse; request: ReceivedRequest }> = [];
  const answer = (res: http.ServerResponse, request: ReceivedRequest, status: number) => {
    request.answered = status;
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ status }));
  };
  const replies = [...script];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try { json = JSON.parse(raw); } catch { json = undefined; }
      const request: ReceivedRequest = { at: Date.now(), headers: req.headers, raw, json };
      received.push(request);
      res.on('close', () => { if (request.answered === undefined) request.aborted = true; });
      const reply = replies.length ? replies.shift()! : fallback;
      if (reply === 'hang') hung.push({ res, request });
      else answer(res, request, reply);
      for (const w of [...waiters]) if (received.length >= w.count) { waiters.splice(waiters.indexOf(w), 1); w.resolve(); }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    setReplies(next: Reply[], nextFallback?: Reply) { replies.splice(0, replies.length, ...next); if (nextFallback !== undefined) fallback = nextFallback; },
    /** Answers every request still held open (whose sender is still there) with `status`. */
    release(status: number) {
      for (const { res, request } of hung.splice(0)) if (!request.aborted) answer(res, request, status);
    },
    next(count: number, timeoutMs = 30_000): Promise<void> {
      if (received.length >= count) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`receiver got ${received.length} of ${count} requests`)), timeoutMs);
        waiters.push({ count, resolve: () => { clearTimeout(timer); resolve(); } });
      });
    },
    async close() {
      for (const { res } of hung) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
