import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  /** When the request's body had fully arrived (ms since epoch). */
  at: number;
  headers: http.IncomingHttpHeaders;
  raw: string;
  json: any;
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
  const hung: http.ServerResponse[] = [];
  const replies = [...script];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try { json = JSON.parse(raw); } catch { json = undefined; }
      received.push({ at: Date.now(), headers: req.headers, raw, json });
      const reply = replies.length ? replies.shift()! : fallback;
      if (reply === 'hang') hung.push(res);
      else res.writeHead(reply, { 'content-type': 'application/json' }).end(JSON.stringify({ status: reply }));
      for (const w of [...waiters]) if (received.length >= w.count) { waiters.splice(waiters.indexOf(w), 1); w.resolve(); }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    setReplies(next: Reply[], nextFallback?: Reply) { replies.splice(0, replies.length, ...next); if (nextFallback !== undefined) fallback = nextFallback; },
    next(count: number, timeoutMs = 30_000): Promise<void> {
      if (received.length >= count) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`receiver got ${received.length} of ${count} requests`)), timeoutMs);
        waiters.push({ count, resolve: () => { clearTimeout(timer); resolve(); } });
      });
    },
    async close() {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
