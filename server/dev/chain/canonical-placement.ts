/**
 * Puts contracts on a local node at the addresses the real ones have on every network (anvil only): each is
 * deployed once from the deployer to learn its runtime code, which `anvil_setCode` then places at the
 * canonical address. The copy is the whole contract as long as its constructor writes no storage: constructor
 * arguments kept in immutables are part of the runtime code, so they travel with it. Storage already at the
 * address stays as it is. Idempotent: an address that already has code is left alone, unless the placement
 * says `replace` (code built for the wrong address, as a constructor that deploys a helper leaves).
 */
import { createPublicClient, createWalletClient, http, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { loadArtifacts, type ContractName } from '../../../contracts/compile.js';
import { localChain } from './deploy.js';

export interface Placement {
  name: ContractName;
  address: Address;
  constructorArgs?: readonly unknown[];
  /** Place it even where code already is. */
  replace?: boolean;
}

export async function placeAtCanonicalAddresses({ rpcUrl, deployerKey }: { rpcUrl: string; deployerKey: Hex }, placements: readonly Placement[]): Promise<void> {
  const probe = createPublicClient({ transport: http(rpcUrl) });
  const chain = localChain({ chainId: await probe.getChainId(), rpcUrl });
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 100 });
  const wallet = createWalletClient({ chain, account: privateKeyToAccount(deployerKey), transport: http(rpcUrl) });
  const artifacts = await loadArtifacts();
  const missing: Placement[] = [];
  for (const placement of placements) {
    const existing = await publicClient.getCode({ address: placement.address });
    if (placement.replace || !existing || existing === '0x') missing.push(placement);
  }
  // All deployments go out at once (explicit nonces): on a chain with a block time they confirm together.
  let nonce = await publicClient.getTransactionCount({ address: wallet.account.address, blockTag: 'pending' });
  const sent: Array<{ placement: Placement; hash: Hex }> = [];
  for (const placement of missing) {
    const { abi, bytecode } = artifacts[placement.name];
    sent.push({ placement, hash: await wallet.deployContract({ abi, bytecode, args: (placement.constructorArgs ?? []) as unknown[], nonce: nonce++ }) });
  }
  for (const { placement, hash } of sent) {
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== 'success' || !receipt.contractAddress) throw new Error(`${placement.name} deployment ${hash} failed`);
    const runtime = await publicClient.getCode({ address: receipt.contractAddress });
    if (!runtime) throw new Error(`${placement.name} deployment left no code`);
    await publicClient.request({ method: 'anvil_setCode' as never, params: [placement.address, runtime] as never });
  }
}
