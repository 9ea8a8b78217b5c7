import { createWalletClient, erc20Abi, http, parseUnits, publicActions, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { baseSepolia } from 'viem/chains';
import { DEV_ACCOUNTS } from '../../server/dev/chain/dev-accounts.js';
import type { DevChain } from '../../server/dev/chain/dev-chain.js';

/** Fresh buyers with `usdc` each, in groups (one group per stack or scheme), sent by a dev buyer, mined before it returns. */
export async function fundBuyers(chain: DevChain, groups: number[], usdc: string): Promise<Hex[][]> {
  const funder = privateKeyToAccount(DEV_ACCOUNTS[1]!.privateKey);
  const wallet = createWalletClient({ account: funder, chain: { ...baseSepolia, rpcUrls: { default: { http: [chain.rpcUrl] } } }, transport: http(chain.rpcUrl) }).extend(publicActions);
  const keys = groups.map((n) => Array.from({ length: n }, () => generatePrivateKey()));
  let nonce = await wallet.getTransactionCount({ address: funder.address, blockTag: 'pending' });
  const hashes: Hex[] = [];
  for (const key of keys.flat()) {
    hashes.push(await wallet.writeContract({ address: chain.usdcAddress, abi: erc20Abi, functionName: 'transfer', args: [privateKeyToAccount(key).address, parseUnits(usdc, 6)], nonce: nonce++ }));
  }
  for (const hash of hashes) {
    const receipt = await wallet.waitForTransactionReceipt({ hash, pollingInterval: 200 });
    if (receipt.status !== 'success') throw new Error(`funding ${hash} reverted`);
  }
  return keys;
}
