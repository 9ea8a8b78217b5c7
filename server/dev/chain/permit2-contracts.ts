/**
 * Puts what the x402 Permit2 schemes need on a local node, where the real networks have it: Permit2 at
 * its canonical address and the x402 `upto` and `exact` Permit2 proxies at the addresses the official SDK
 * signs for. All are our own implementations of the published interfaces (contracts/Permit2.sol,
 * contracts/X402UptoPermit2Proxy.sol, contracts/X402ExactPermit2Proxy.sol), placed by
 * canonical-placement.ts. Idempotent. Nothing of this runs against a real network: there the real
 * contracts are already deployed.
 */
import type { Address, Hex } from 'viem';
import { PERMIT2_ADDRESS } from '../../chain/permit2.js';
import { EXACT_PROXY_ADDRESS } from '../../payments/schemes/exact/evm/chain.js';
import { UPTO_PROXY_ADDRESS } from '../../payments/schemes/upto/evm/chain.js';
import { placeAtCanonicalAddresses } from './canonical-placement.js';

export async function installPermit2Contracts(node: { rpcUrl: string; deployerKey: Hex }): Promise<{ permit2: Address; uptoProxy: Address; exactProxy: Address }> {
  await placeAtCanonicalAddresses(node, [
    { name: 'Permit2', address: PERMIT2_ADDRESS },
    { name: 'X402UptoPermit2Proxy', address: UPTO_PROXY_ADDRESS },
    { name: 'X402ExactPermit2Proxy', address: EXACT_PROXY_ADDRESS },
  ]);
  return { permit2: PERMIT2_ADDRESS, uptoProxy: UPTO_PROXY_ADDRESS, exactProxy: EXACT_PROXY_ADDRESS };
}
