import { parseEther, toHex, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startDevChain, type DevChain } from '../../server/dev/chain/dev-chain.js';
import type { Metrics } from '../../server/platform/metrics.js';

/**
 * A chain of the test file's own that mines every second (as Base mines every 2), with Circle's USDC and
 * the dev buyers funded: started before the file's tests, stopped after them.
 */
export function useBlockTimeChain() {
  let chain: DevChain | undefined;
  beforeAll(async () => {
    chain = await startDevChain({ blockTime: 1, mintAmountUsdc: '100000' });
  }, 60_000);
  afterAll(async () => { await chain?.stop(); });

  const get = () => {
    if (!chain) throw new Error('the block-time chain is not started yet (use it inside a test or a hook)');
    return chain;
  };
  const rpc = (method: string, params: unknown[]): Promise<any> => rawRpc(get().rpcUrl, method, params);
  return {
    get chain() { return get(); },
    rpc,
    /** USDC balance (atomic units). */
    balanceOf: async (address: Address) => BigInt(await rpc('eth_call', [{ to: get().usdcAddress, data: `0x70a08231${address.slice(2).toLowerCase().padStart(64, '0')}` }, 'latest'])),
    fundGas: (key: `0x${string}`) => rpc('anvil_setBalance', [privateKeyToAccount(key).address, toHex(parseEther('100'))]),
  };
}

/** A raw JSON-RPC call to a node (anvil's own methods included); a JSON-RPC error throws. */
export async function rawRpc(rpcUrl: string, method: string, params: unknown[] = []): Promise<any> {
  const res = await fetch(rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const body = await res.json() as { result?: unknown; error?: { message: string } };
  if (body.error) throw new Error(body.error.message);
  return body.result;
}

/** The sum of a counter's values whose labels include `labels`. */
export async function counterValue(metrics: Metrics, name: string, labels: Record<string, string>): Promise<number> {
  const metric = await metrics.registry.getSingleMetric(name)!.get();
  return metric.values.filter((v) => Object.entries(labels).every(([k, value]) => v.labels[k] === value)).reduce((sum, v) => sum + v.value, 0);
}
