import { z } from 'zod';
import { FacilitatorUnavailable } from './facilitator.js';

/**
 * One authenticated JSON call to the agentgate backend, shared by the seller-key client
 * (backend-client.ts) and the platform-key endpoint sync (endpoint-sync.ts). An unreachable backend, a
 * 5xx or a non-JSON answer is FacilitatorUnavailable (503/502); any other status is returned for the
 * caller to judge, and `unexpectedAnswer` turns the backend's `{error, message}` into BackendRequestError.
 */

export interface BackendConnection {
  /** e.g. "https://api.agentgate.dev" (no trailing path). */
  readonly backendUrl: string;
  readonly apiKey: string;
  readonly fetch?: typeof globalThis.fetch;
  /**
   * How a call reaches the backend when no `fetch` is given. Default: the global fetch. The Node adapters
   * (Express, Koa, Fastify) pass node:http with a keep-alive agent (adapters/node-transport.ts): a paid
   * request makes two backend calls, and Node's fetch costs several times more CPU per call.
   */
  readonly transport?: BackendTransport;
  /** Per request. Default 30 s (redeem waits for on-chain settlement). */
  readonly timeoutMs?: number;
}

/** One HTTP exchange with the backend. Rejects when no answer came (unreachable, timed out: name `TimeoutError`). */
export type BackendTransport = (request: { method: string; url: string; headers: Record<string, string>; body?: string; timeoutMs: number }) => Promise<{ status: number; body: string }>;

/** A BackendTransport over a fetch function. */
export function fetchTransport(doFetch: typeof globalThis.fetch): BackendTransport {
  return async ({ method, url, headers, body, timeoutMs }) => {
    const response = await doFetch(url, { method, headers, body, signal: AbortSignal.timeout(timeoutMs) });
    return { status: response.status, body: await response.text() };
  };
}

export type BackendCall = (method: 'GET' | 'POST' | 'PATCH', path: string, body?: unknown) => Promise<{ status: number; json: unknown }>;

const DEFAULT_TIMEOUT_MS = 30_000;

/** The backend answered, but not with success: wrong key (401/403), unknown payment (404), bad input (400). */
export class BackendRequestError extends Error {
  override readonly name = 'BackendRequestError';
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
  ) {
    super(message);
  }
}

export function backendCall(options: BackendConnection): BackendCall {
  const base = new URL(options.backendUrl).toString().replace(/\/+$/, '');
  const send = options.fetch ? fetchTransport(options.fetch) : options.transport ?? fetchTransport(globalThis.fetch);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;

  return async (method, path, body) => {
    let response: { status: number; body: string };
    try {
      response = await send({
        method,
        url: base + path,
        headers: {
          authorization: `Bearer ${options.apiKey}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        timeoutMs,
      });
    } catch (error) {
      throw new FacilitatorUnavailable(`payment backend unreachable: ${describeError(error)}`, 503, { cause: error });
    }
    const json = parseJson(response.body);
    if (response.status >= 500) {
      // 503 is the backend saying it cannot settle now (no relayer, chain unreachable): the buyer may retry.
      const said = (json.ok ? json.value as { message?: unknown } : undefined)?.message;
      throw new FacilitatorUnavailable(`payment backend answered ${response.status}${typeof said === 'string' ? `: ${said}` : ''}`, response.status === 503 ? 503 : 502);
    }
    if (!json.ok) throw new FacilitatorUnavailable(`payment backend answered ${response.status} without JSON`, 502, { cause: json.error });
    return { status: response.status, json: json.value };
  };
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false; error: unknown } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, error };
  }
}

const ProblemSchema = z.object({ error: z.string(), message: z.string() });

/** The backend's `{error, message}` as a BackendRequestError; `context` (e.g. the URL concerned) leads the message. */
export function unexpectedAnswer(status: number, json: unknown, context?: string): never {
  const parsed = ProblemSchema.safeParse(json);
  const prefix = context ? `${context}: ` : '';
  if (parsed.success) throw new BackendRequestError(status, parsed.data.error, prefix + parsed.data.message);
  throw new BackendRequestError(status, 'unexpected_response', `${prefix}payment backend answered ${status} with an unexpected body`);
}

function describeError(error: unknown): string {
  // Duck-typed: the abort DOMException may come from another realm, where instanceof Error fails.
  const { name, message } = (typeof error === 'object' && error !== null ? error : {}) as { name?: unknown; message?: unknown };
  if (name === 'TimeoutError') return 'timed out';
  return typeof message === 'string' ? message : String(error);
}
