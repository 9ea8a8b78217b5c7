import { fallback, type EIP1193RequestFn, type Transport } from 'viem';
import { nodeFault } from './rpc-fault.js';
import { jsonRpcHttp } from './json-rpc-http.js';

/** A URL that failed a request by its own fault (see rpc-fault.ts); the request then went on to the next URL, if any. */
export interface RpcFailover {
  url: string;
  method: string;
  /** Short and loggable: "timed out", "HTTP 503", "connection failed: ECONNREFUSED", "JSON-RPC -32005: rate limited". */
  reason: string;
  error: Error;
}

export interface RpcTransportOptions {
  /** Per request and per URL: a node that has not answered by then counts as failed. */
  timeoutMs: number;
  /**
   * How long a URL that failed is passed over while another URL is healthy. Without it, every request
   * would wait out a hanging primary's timeout before trying the next URL. Default 30 s.
   */
  cooldownMs?: number;
  /** Called for every node failure, so the caller can log and count failovers. */
  onFailover?: (failover: RpcFailover) => void;
}

const DEFAULT_COOLDOWN_MS = 30_000;

/**
 * The chain's JSON-RPC transport: the URLs in order of preference, each asked in turn, built on viem's
 * `fallback` over one node:http JSON-RPC transport per URL (json-rpc-http.ts).
 *
 * - A URL that refuses, resets, times out, answers a non-2xx status or a JSON-RPC error that speaks of the
 *   node (internal error, rate limited, method not served, block not found yet) fails the request over to
 *   the next URL, at once. A request fails only when every URL failed: within about
 *   `urls.length × timeoutMs`, never longer, because nothing retries beyond the failover (viem's own
 *   retries are off at both levels: its fallback retry would run every URL again, and it honours a
 *   node's Retry-After header without a cap).
 * - The node's answer about the call (a revert, `nonce too low`, `insufficient funds`, `replacement
 *   transaction underpriced`, `already known`) comes back as it is, from the URL that gave it. viem's
 *   default `shouldThrow` would fail those over on geth (which says them with -32000), so another node
 *   would be asked and its answer, not the first one's, would reach the caller.
 * - `eth_sendRawTransaction` fails over like any call. A URL that timed out or dropped the connection
 *   may have taken the transaction anyway; sending the same signed bytes to the next URL is safe: it is
 *   the same transaction (same hash, same nonce), so it is mined at most once, and the second node may
 *   answer with its hash, `already known` or (when it was mined meanwhile) `nonce too low`. Settlement
 *   reads those answers knowing that.
 * - A URL that failed is passed over for `cooldownMs`, but only while a later URL is not cooling down:
 *   the cooldown alone never fails a request, and when every URL has failed lately they are all asked
 *   again, in order.
 *
 * Batching stays off: one JSON-RPC call per HTTP request, so one slow call never holds others back and a
 * failure belongs to one call. viem's `rank` is not used: it would reorder the operator's preference by
 * sampled latency, its sampling loop can never be stopped, and it pings with `net_listening`, which some
 * providers do not serve.
 */
export function createRpcTransport(urls: readonly string[], options: RpcTransportOptions): Transport {
  if (urls.length === 0) throw new Error('createRpcTransport: at least one RPC URL is required');
  const health = new UrlHealth(urls.length, options.cooldownMs ?? DEFAULT_COOLDOWN_MS);
  // The errors after which the fallback moves on; every other error is thrown to the caller as it is.
  const moveOn = new WeakSet<object>();

  const urlTransport = (url: string, index: number): Transport => {
    const node = jsonRpcHttp(url, { timeoutMs: options.timeoutMs });
    return (params) => {
      const inner = node(params);
      const request = (async (args: { method: string; params?: unknown }, requestOptions?: Parameters<EIP1193RequestFn>[1]) => {
        if (health.passOver(index)) {
          const skipped = new Error(`${url} is cooling down after a failure`);
          moveOn.add(skipped);
          throw skipped;
        }
        try {
          const result = await inner.request(args as never, requestOptions);
          health.succeeded(index);
          return result;
        } catch (error) {
          const reason = nodeFault(error);
          if (reason === undefined) throw error;
          moveOn.add(error as object);
          health.failed(index);
          try {
            options.onFailover?.({ url, method: args.method, reason, error: error as Error });
          } catch {
            // A broken hook must not turn a failover into a failed request.
          }
          throw error;
        }
      }) as EIP1193RequestFn;
      return { ...inner, request };
    };
  };

  return fallback(urls.map(urlTransport), {
    retryCount: 0,
    shouldThrow: (error) => !moveOn.has(error),
  });
}

/** When each URL last failed, shared by every client built on one transport. */
class UrlHealth {
  private readonly coolingUntil: number[];

  constructor(count: number, private readonly cooldownMs: number) {
    this.coolingUntil = new Array<number>(count).fill(0);
  }

  /** Skip a cooling URL only while a later URL is not cooling: some URL is always really asked. */
  passOver(index: number): boolean {
    const now = Date.now();
    const cooling = (i: number) => this.coolingUntil[i]! > now;
    if (!cooling(index)) return false;
    for (let i = index + 1; i < this.coolingUntil.length; i++) if (!cooling(i)) return true;
    return false;
  }

  failed(index: number): void {
    this.coolingUntil[index] = Date.now() + this.cooldownMs;
  }

  succeeded(index: number): void {
    this.coolingUntil[index] = 0;
  }
}
