import http from 'node:http';
import https from 'node:https';
import { createTransport, HttpRequestError, RpcRequestError, TimeoutError, type EIP1193RequestFn, type Transport } from 'viem';

/**
 * One chain node's JSON-RPC over node:http(s) with keep-alive connections: the exchange viem's `http`
 * transport makes (POST one call, read the answer), without fetch. Settlement asks the node a few times
 * per payment (the payer's reads, the send, the receipt); through fetch each call cost about 0.7 ms of
 * the event loop in the bench's paid run (Request and Headers objects, an AbortSignal per call, a web
 * stream for the body), most of the RPC's share of a paid request.
 *
 * Failures are viem's own error classes, as `http` throws them, so rpc-fault.ts tells a node's fault from
 * its answer the same way: no answer in time is a TimeoutError, no answer at all (refused, reset) an
 * HttpRequestError carrying the socket's error as its cause, a non-2xx status an HttpRequestError with
 * the status (an RpcRequestError when the body is a JSON-RPC error), and a JSON-RPC error in a 2xx
 * answer an RpcRequestError. Credentials in the URL (`https://user:pass@node`) go as basic auth, as
 * viem sends them.
 */
export function jsonRpcHttp(url: string, options: { timeoutMs: number }): Transport {
  const node = keepAliveJsonPost(url);
  const href = node.href;
  let id = 0;

  const post = async (body: { jsonrpc: '2.0'; id: number; method: string; params?: unknown }) => {
    try {
      const { status, text } = await node.post(JSON.stringify(body), options.timeoutMs);
      let json: unknown;
      try { json = JSON.parse(text); } catch { json = undefined; }
      return { status, json, text };
    } catch (error) {
      if (error instanceof NoAnswerInTime) throw new TimeoutError({ body, url: href });
      throw new HttpRequestError({ body, url: href, details: (error as Error).message, cause: error as Error });
    }
  };

  return ({ chain }) => createTransport({
    key: 'http',
    name: 'HTTP JSON-RPC',
    type: 'http',
    retryCount: 0,
    timeout: options.timeoutMs,
    request: (async ({ method, params }: { method: string; params?: unknown }) => {
      const body = { jsonrpc: '2.0' as const, id: ++id, method, params };
      const { status, json, text } = await post(body);
      const answer = json as { result?: unknown; error?: { code: number; message: string; data?: unknown } } | undefined;
      if (status < 200 || status >= 300) {
        if (answer?.error && typeof answer.error.code === 'number') throw new RpcRequestError({ body, error: answer.error, url: href, status });
        throw new HttpRequestError({ body, url: href, status, details: text.slice(0, 500) || http.STATUS_CODES[status] || 'no body' });
      }
      if (answer === undefined || typeof answer !== 'object') throw new HttpRequestError({ body, url: href, status, details: `not a JSON-RPC answer: ${text.slice(0, 200)}` });
      if (answer.error) throw new RpcRequestError({ body, error: answer.error, url: href });
      return answer.result;
    }) as EIP1193RequestFn,
  }, { url: href, chain });
}

/** No whole answer (headers and body) within the exchange's timeout. */
export class NoAnswerInTime extends Error {
  override readonly name = 'NoAnswerInTime';
}

/**
 * POSTs JSON bodies to one node over node:http(s) keep-alive connections: the exchange under the EVM
 * transport above and the Solana one (solana/solana-rpc.ts). Resolves with the status and the body text
 * whatever the status; rejects with the socket's error when no answer came, or NoAnswerInTime. Credentials
 * in the URL go as basic auth, and `href` is the URL without them (for errors and logs).
 */
export function keepAliveJsonPost(url: string): { href: string; post(payload: string, timeoutMs: number, signal?: AbortSignal): Promise<{ status: number; text: string }> } {
  const target = new URL(url);
  const secure = target.protocol === 'https:';
  const auth = target.username || target.password ? `Basic ${Buffer.from(`${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`).toString('base64')}` : undefined;
  target.username = '';
  target.password = '';
  const agent = secure ? new https.Agent(AGENT_OPTIONS) : new http.Agent(AGENT_OPTIONS);
  const post = (payload: string, timeoutMs: number, signal?: AbortSignal) => new Promise<{ status: number; text: string }>((resolve, reject) => {
    if (signal?.aborted) { reject(signal.reason); return; }
    const request = (secure ? https : http).request(target, {
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)), ...(auth ? { authorization: auth } : {}) },
    }, (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_RESPONSE_BYTES) { request.destroy(new Error(`the answer is over ${MAX_RESPONSE_BYTES} bytes`)); return; }
        chunks.push(chunk);
      });
      response.on('end', () => {
        done();
        resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
      });
      response.on('error', fail);
    });
    // The whole exchange, headers and body, within the timeout (as viem's http transport times it).
    const timer = setTimeout(() => request.destroy(new NoAnswerInTime(`no answer from ${target.href} within ${timeoutMs} ms`)), timeoutMs);
    const abort = () => request.destroy(signal!.reason instanceof Error ? signal!.reason : new Error('aborted'));
    signal?.addEventListener('abort', abort, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
    }
    function fail(error: Error) {
      done();
      reject(error);
    }
    request.on('error', fail);
    request.end(payload);
  });
  return { href: target.href, post };
}

/** viem's own cap on an answer (10 MiB): a log query can be large, a node that streams forever is not. */
const MAX_RESPONSE_BYTES = 10_485_760;
/** Idle sockets closed after 5 s (before a node's or gateway's usual keep-alive timeout), the newest reused first. */
const AGENT_OPTIONS = { keepAlive: true, timeout: 5_000, scheduling: 'lifo' } as const;
