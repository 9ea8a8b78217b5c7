import { createSolanaRpcFromTransport, type Rpc, type RpcTransport, type SolanaRpcApi } from '@solana/kit';
import { parseJsonWithBigInts, stringifyJsonWithBigInts } from '@solana/rpc-spec-types';
import { keepAliveJsonPost } from '../json-rpc-http.js';

/**
 * A Solana node's JSON-RPC as @solana/kit's `createSolanaRpc` makes it, over node:http keep-alive
 * connections instead of fetch (as the EVM transport, json-rpc-http.ts). A payment asks the node twice
 * while its buyer waits (the send, its status): 2.8-3.1 ms through fetch, 1.9-2.1 ms this way, on the
 * bench's local node at concurrency 1 (fetch makes Request, Headers and AbortSignal objects and a web
 * stream per body). The body is kit's own JSON with big integers (u64 amounts stay exact), and a JSON-RPC error is
 * kit's to raise (its response transformer), as with its own transport. `timeoutMs` bounds one exchange:
 * a node that never answers fails the call instead of holding it forever (fetch has no timeout).
 */
export function solanaRpc(url: string, options: { timeoutMs: number }): Rpc<SolanaRpcApi> {
  const node = keepAliveJsonPost(url);
  const transport: RpcTransport = async <T>({ payload, signal }: { payload: unknown; signal?: AbortSignal }): Promise<T> => {
    const { status, text } = await node.post(stringifyJsonWithBigInts(payload), options.timeoutMs, signal);
    if (status < 200 || status >= 300) throw new Error(`the Solana node ${node.href} answered HTTP ${status}: ${text.slice(0, 200) || 'no body'}`);
    return parseJsonWithBigInts(text) as T;
  };
  return createSolanaRpcFromTransport(transport);
}
