/**
 * Puts what the x402 `upto` scheme needs on a local node, where the real networks have it: Permit2 at
 * its canonical address and the x402 upto proxy at the address the official SDK signs for. Both are our
 * own implementations of the published interfaces (contracts/Permit2.sol, contracts/X402UptoPermit2Proxy.sol):
 * each is deployed once from the deployer to learn its runtime code, which `anvil_setCode` then places at
 * the canonical address (neither keeps state from its constructor, so the copy is the whole contract).
 * Idempotent. Nothing of this runs against a real network: there the real contracts are already deployed.
 */
import { createPublicClient, createWalletClient, http, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { loadArtifacts, type ContractName } from '../../../contracts/compile.js';
import { PERMIT2_ADDRESS, UPTO_PROXY_ADDRESS } from '../../chain/permit2.js';
import { localChain } from './deploy.js';

const PLACEMENTS: ReadonlyArray<readonly [ContractName, Address]> = [
  ['Permit2', PERMIT2_ADDRESS],
  ['X402UptoPermit2Proxy', UPTO_PROXY_ADDRESS],
];

export async function installUptoContracts({ rpcUrl, deployerKey }: { rpcUrl: string; deployerKey: Hex }): Promise<{ permit2: Address; uptoProxy: Address }> {
  const probe = createPublicClient({ transport: http(rpcUrl) });
  const chain = localChain({ chainId: await probe.getChainId(), rpcUrl });
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 100 });
  const wallet = createWalletClient({ chain, account: privateKeyToAccount(deployerKey), transport: http(rpcUrl) });
  const artifacts = await loadArtifacts();
  for (const [name, address] of PLACEMENTS) {
    const existing = await publicClient.getCode({ address });
    if (existing && existing !== '0x') continue;
    const hash = await wallet.deployContract({ abi: artifacts[name].abi, bytecode: artifacts[name].bytecode });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== 'success' || !receipt.contractAddress) throw new Error(`${name} deployment ${hash} failed`);
    const runtime = await publicClient.getCode({ address: receipt.contractAddress });
    if (!runtime) throw new Error(`${name} deployment left no code`);
    await publicClient.request({ method: 'anvil_setCode' as never, params: [address, runtime] as never });
  }
  return { permit2: PERMIT2_ADDRESS, uptoProxy: UPTO_PROXY_ADDRESS };
}
