import { BaseError, HttpRequestError, RpcRequestError, TimeoutError } from 'viem';

/**
 * Whether an RPC error is the node's fault (it was unreachable, slow, overloaded, broken) or the node's
 * answer (the call itself fails, and would fail the same on any node of this chain). The first is worth
 * asking another node; the second must reach the caller as it is: a revert, `nonce too low` or
 * `already known` masked by a failover would make settlement misjudge what happened to its transaction.
 *
 * The node's message decides before its code, because nodes disagree on codes: anvil answers
 * `nonce too low` with -32003, geth with -32000, and some providers send a revert with -32603 or HTTP 500.
 */

/** Answers about the call itself, in the words of geth, anvil, reth, Nethermind and Erigon. */
const ANSWER_MESSAGES = new RegExp([
  'revert', 'nonce too (low|high)', 'nonce has max value', 'insufficient funds', 'underpriced',
  'already known', 'already imported', 'known transaction', 'alreadyknown', 'intrinsic gas too (low|high)',
  'exceeds block gas limit', 'gas limit reached', 'gas required exceeds', 'fee cap (less than|lower than) block base fee',
  'max fee per gas less than block base fee', 'invalid sender', 'invalid signature', 'transaction type not supported',
  'exceeds the configured cap', 'out of gas', 'invalid opcode',
].join('|'), 'i');

/** -32000 is geth's catch-all: these of its messages say the node is behind, pruned or busy, not that the call is wrong. */
const NODE_STATE_MESSAGES = /header not found|unknown block|missing trie node|syncing|timed? ?out|rate limit|too many requests|capacity|busy|overloaded|unavailable|try again/i;

/** JSON-RPC codes by which a node says it cannot serve the call now (or at all), whatever the call. */
const NODE_CODES = new Set([
  -32603, // internal error
  -32005, // limit exceeded (rate limited)
  -32002, // resource unavailable
  -32001, // resource not found (a block this node does not have yet)
  -32601, // method not found: this node does not serve the method
  -32004, // method not supported
  429, // rate limited, as some providers say it in the body
  -32007, // QuickNode's rate limit
]);

/**
 * Why the node failed, when it is the node's fault; undefined when the error is the node's answer about
 * the call (or not an RPC error at all).
 */
export function nodeFault(error: unknown): string | undefined {
  if (!(error instanceof BaseError)) return undefined;
  const rpc = error.walk((e) => e instanceof RpcRequestError) as RpcRequestError | null;
  if (!rpc) {
    // No JSON-RPC answer at all: the node could not be reached, did not answer in time, or answered
    // something that is not JSON-RPC.
    if (error.walk((e) => e instanceof TimeoutError)) return 'timed out';
    const http = error.walk((e) => e instanceof HttpRequestError) as HttpRequestError | null;
    if (http?.status) return `HTTP ${http.status}`;
    if (http) return `connection failed: ${rootCause(http)}`;
    return undefined;
  }
  const message = rpc.details ?? '';
  const said = `JSON-RPC ${rpc.code}: ${message}`;
  if (rpc.code === 3 || rpc.code === -32003 || ANSWER_MESSAGES.test(message)) return undefined;
  if (NODE_CODES.has(rpc.code)) return said;
  if (rpc.code === -32000 && NODE_STATE_MESSAGES.test(message)) return said;
  // A JSON-RPC error in a non-2xx answer (a gateway's 502 or 429 with an error body) is the gateway's.
  if (rpc.status !== undefined && (rpc.status >= 500 || rpc.status === 429 || rpc.status === 408 || rpc.status === 403 || rpc.status === 401)) return `HTTP ${rpc.status}, ${said}`;
  return undefined;
}

/** The innermost cause's code or first line: ECONNREFUSED, UND_ERR_SOCKET, "other side closed". */
function rootCause(error: Error): string {
  // Duck-typed, not `instanceof Error`: fetch's errors may come from another realm (jest's VM contexts).
  let root: { cause?: unknown; code?: unknown; message?: unknown } = error;
  while (typeof root.cause === 'object' && root.cause !== null) root = root.cause as typeof root;
  return typeof root.code === 'string' ? root.code : String(root.message ?? 'unknown').split('\n')[0]!;
}
