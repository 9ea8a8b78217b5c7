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

/** When a block was produced, as far as a watcher polling every few ms can tell: after `notBefore`, by `by`. */
export interface BlockSighting { number: bigint; notBefore: number; by: number }

/**
 * Watches a chain's head by polling it back to back, and tells for each block the window its production
 * fell in (ms since epoch). A chain's timestamps are whole seconds and anvil's timer, slipping on a loaded
 * machine, catches up with a burst: only wall-clock sightings show a block that came late. Resolves once
 * it has sighted a block.
 */
export async function watchBlocks(rpcUrl: string): Promise<{ stop(): Promise<Map<bigint, BlockSighting>> }> {
  const sightings = new Map<bigint, BlockSighting>();
  let firstSighting!: () => void;
  const sighted = new Promise<void>((resolve) => { firstSighting = resolve; });
  let stopped = false;
  let latest: bigint | undefined;
  let previousAsk = Date.now();
  const loop = (async () => {
    while (!stopped) {
      const asked = Date.now();
      const head = BigInt(await rawRpc(rpcUrl, 'eth_blockNumber'));
      const answered = Date.now();
      // Each block after the one seen last was not there when the previous ask left, and was by this answer.
      if (latest !== undefined) for (let n = latest + 1n; n <= head; n++) sightings.set(n, { number: n, notBefore: previousAsk, by: answered });
      if (sightings.size > 0) firstSighting();
      if (latest === undefined || head > latest) latest = head;
      previousAsk = asked;
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  // Resolved once a block is sighted, so the first block after it has a sighted predecessor.
  await Promise.race([sighted, loop]);
  return { async stop() { stopped = true; await loop; return sightings; } };
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
