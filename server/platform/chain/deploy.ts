/**
 * Deploys agentgate's dev chain contracts (our USDC-compatible token and the SmartAccount factory) to a
 * local node and mints test USDC. Not idempotent: every call deploys fresh contracts, so the caller keeps
 * the returned addresses (e.g. next to the anvil state file).
 */
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  http,
  parseUnits,
  type Address,
  type Chain,
  type Hash,
  type Hex,
  type PublicClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { loadArtifacts } from '../../../contracts/compile.js';
import { USDC_DECIMALS } from './usdc.js';

export interface DeployDevChainParams {
  rpcUrl: string;
  /** Becomes the token owner (the only minter). Usually DEV_DEPLOYER.privateKey. */
  deployerKey: Hex;
  /** Addresses that receive `mintAmountUsdc` each. */
  mintTo: readonly Address[];
  /** Whole USDC per address, as a decimal ("10000", "0.5") or number. Default "10000". */
  mintAmountUsdc?: string | number;
}

export interface DevChainDeployment {
  usdcAddress: Address;
  factoryAddress: Address;
  chainId: number;
}

/** A viem chain for a local node (anvil) at `rpcUrl`. */
export function localChain({ chainId, rpcUrl }: { chainId: number; rpcUrl: string }): Chain {
  return defineChain({
    id: chainId,
    name: `agentgate local ${chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
    testnet: true,
  });
}

export async function deployDevChain({
  rpcUrl,
  deployerKey,
  mintTo,
  mintAmountUsdc = '10000',
}: DeployDevChainParams): Promise<DevChainDeployment> {
  const artifacts = await loadArtifacts();
  const probe = createPublicClient({ transport: http(rpcUrl) });
  const chain = localChain({ chainId: await probe.getChainId(), rpcUrl });
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 100 });
  const account = privateKeyToAccount(deployerKey);
  const wallet = createWalletClient({ chain, account, transport: http(rpcUrl) });

  // Explicit nonces let every transaction go out at once, so a chain with a block time confirms them
  // all in one or two blocks instead of one block each.
  let nonce = await publicClient.getTransactionCount({ address: account.address, blockTag: 'pending' });
  const usdcTx = await wallet.deployContract({ abi: artifacts.USDC.abi, bytecode: artifacts.USDC.bytecode, nonce: nonce++ });
  const factoryTx = await wallet.deployContract({
    abi: artifacts.SmartAccountFactory.abi,
    bytecode: artifacts.SmartAccountFactory.bytecode,
    nonce: nonce++,
  });
  const usdcAddress = await deployedAddress(publicClient, usdcTx, 'USDC');
  const amount = parseUnits(String(mintAmountUsdc), USDC_DECIMALS);
  const mintTxs: Hash[] = [];
  for (const to of mintTo) {
    mintTxs.push(
      await wallet.writeContract({
        address: usdcAddress,
        abi: artifacts.USDC.abi,
        functionName: 'mint',
        args: [to, amount],
        nonce: nonce++,
      }),
    );
  }
  const factoryAddress = await deployedAddress(publicClient, factoryTx, 'SmartAccountFactory');
  for (const hash of mintTxs) await confirmed(publicClient, hash, 'mint');

  return { usdcAddress, factoryAddress, chainId: chain.id };
}

async function confirmed(client: PublicClient, hash: Hash, what: string) {
  const receipt = await client.waitForTransactionReceipt({ hash });
  if (receipt.status !== 'success') throw new Error(`${what} transaction ${hash} reverted`);
  return receipt;
}

async function deployedAddress(client: PublicClient, hash: Hash, what: string): Promise<Address> {
  const receipt = await confirmed(client, hash, `${what} deployment`);
  if (!receipt.contractAddress) throw new Error(`${what} deployment ${hash} created no contract`);
  return getAddress(receipt.contractAddress);
}
