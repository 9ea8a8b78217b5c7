import { createPublicClient } from 'viem';
import { jsonRpcHttp } from './json-rpc-http.js';
import { nodeFault } from './rpc-fault.js';

/** What one RPC URL answered at start-up: its chain id, or why it did not answer. */
export type RpcUrlCheck = { url: string; chainId: number } | { url: string; error: string };

/**
 * Asks every URL for its chain id at once, each within `timeoutMs`. A URL that does not answer is
 * reported, not thrown: a node down at start-up is an ordinary fault the failover handles, while a URL of
 * another chain is a configuration mistake the caller refuses.
 */
export async function checkRpcUrls(urls: readonly string[], timeoutMs: number): Promise<RpcUrlCheck[]> {
  return Promise.all(urls.map(async (url): Promise<RpcUrlCheck> => {
    const client = createPublicClient({ transport: jsonRpcHttp(url, { timeoutMs }) });
    try {
      return { url, chainId: await client.getChainId() };
    } catch (error) {
      return { url, error: nodeFault(error) ?? (error as Error).message.split('\n')[0]! };
    }
  }));
}
