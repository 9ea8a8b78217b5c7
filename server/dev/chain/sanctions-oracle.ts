/**
 * A sanctions oracle on a local node, at the address the public one has on Ethereum and most EVM chains
 * (contracts/SanctionsOracle.sol, our implementation of its interface), owned by the dev deployer, with
 * nothing listed. Screening asks it when SANCTIONS_ORACLE_ADDRESS names it (`agentgate dev` does);
 * `listOnDevOracle` lists addresses, as the oracle's maintainer would. Idempotent.
 */
import { createPublicClient, createWalletClient, http, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { PUBLIC_SANCTIONS_ORACLE_ADDRESS, SANCTIONS_ORACLE_ABI } from '../../screening/oracle-source.js';
import { placeAtCanonicalAddresses } from './canonical-placement.js';
import { localChain } from './deploy.js';
import { DEV_DEPLOYER } from './dev-accounts.js';

export async function installSanctionsOracle(node: { rpcUrl: string; deployerKey: Hex }): Promise<Address> {
  await placeAtCanonicalAddresses(node, [{ name: 'SanctionsOracle', address: PUBLIC_SANCTIONS_ORACLE_ADDRESS, constructorArgs: [privateKeyToAccount(node.deployerKey).address] }]);
  return PUBLIC_SANCTIONS_ORACLE_ADDRESS;
}

/** Lists (or, with `listed: false`, delists) addresses on the dev chain's oracle, and waits for it. */
export async function listOnDevOracle(rpcUrl: string, addresses: Address[], listed = true): Promise<void> {
  const probe = createPublicClient({ transport: http(rpcUrl) });
  const chain = localChain({ chainId: await probe.getChainId(), rpcUrl });
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 100 });
  const owner = createWalletClient({ chain, account: privateKeyToAccount(DEV_DEPLOYER.privateKey), transport: http(rpcUrl) });
  const hash = await owner.writeContract({ address: PUBLIC_SANCTIONS_ORACLE_ADDRESS, abi: SANCTIONS_ORACLE_ABI, functionName: listed ? 'addToSanctionsList' : 'removeFromSanctionsList', args: [addresses] });
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== 'success') throw new Error(`listing on the dev sanctions oracle (${hash}) reverted`);
}
