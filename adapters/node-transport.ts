import http from 'node:http';
import https from 'node:https';
import type { BackendTransport } from '../middleware/index.js';

// One keep-alive pool per process: every paywall of the process talks to the same backend. As Node's own
// global agent: an idle socket is closed after 5 s (before a backend's usual keep-alive timeout, so a call
// never lands on a socket the backend is closing), and the most recently used one is reused first.
const options = { keepAlive: true, timeout: 5_000, scheduling: 'lifo' } as const;
const agents = { http: new http.Agent(options), https: new https.Agent(options) };

/**
 * Backend calls over node:http(s) with keep-alive connections, for the adapters that only run on Node
 * (Express, Koa, Fastify). Same exchange as fetch: status and body text, a rejection when no answer came.
 * Measured on the bench's paid path: about a third of fetch's CPU per call. Hono may run anywhere, so it
 * keeps fetch.
 */
export const nodeTransport: BackendTransport = ({ method, url, headers, body, timeoutMs }) =>
  new Promise((resolve, reject) => {
    const target = new URL(url);
    const secure = target.protocol === 'https:';
    const request = (secure ? https : http).request(target, {
      method,
      agent: secure ? agents.https : agents.http,
      headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
    }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => { clearTimeout(timer); resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }); });
      response.on('error', (error) => { clearTimeout(timer); reject(error); });
    });
    // The whole exchange, as fetch's AbortSignal.timeout: the backend answers a redeem only once settled.
    const timer = setTimeout(() => request.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { name: 'TimeoutError' })), timeoutMs);
    request.on('error', (error) => { clearTimeout(timer); reject(error); });
    request.end(body);
  });
