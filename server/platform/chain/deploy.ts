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

/** Where Multicall3 lives on Base, Base Sepolia and most EVM chains (deployed by a pre-signed transaction). */
export const MULTICALL3_ADDRESS: Address = '0xcA11bde05977b3631167028862bE2a173976CA11';

/**
 * Puts Multicall3 at its canonical address on a local node, as on Base: the settlement batches go
 * through it. The creation code is the one viem ships for its deployless multicall (the canonical
 * Multicall3 build); it is deployed once from the deployer to learn its runtime code, which
 * `anvil_setCode` then places at the canonical address. Idempotent.
 */
export async function installMulticall3({ rpcUrl, deployerKey }: { rpcUrl: string; deployerKey: Hex }): Promise<Address> {
  const probe = createPublicClient({ transport: http(rpcUrl) });
  const existing = await probe.getCode({ address: MULTICALL3_ADDRESS });
  if (existing && existing !== '0x') return MULTICALL3_ADDRESS;
  const chain = localChain({ chainId: await probe.getChainId(), rpcUrl });
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 100 });
  const wallet = createWalletClient({ chain, account: privateKeyToAccount(deployerKey), transport: http(rpcUrl) });
  const hash = await wallet.deployContract({ abi: [], bytecode: await multicall3CreationCode() });
  const deployed = await deployedAddress(publicClient, hash, 'Multicall3');
  const runtime = await publicClient.getCode({ address: deployed });
  if (!runtime) throw new Error('Multicall3 deployment left no code');
  await publicClient.request({ method: 'anvil_setCode' as never, params: [MULTICALL3_ADDRESS, runtime] as never });
  return MULTICALL3_ADDRESS;
}

/** viem keeps the bytecode in a module it does not export by name, so it is read from the installed package. */
async function multicall3CreationCode(): Promise<Hex> {
  const { createRequire } = await import('node:module');
  const { readFile } = await import('node:fs/promises');
  const { dirname, join } = await import('node:path');
  const viemRoot = dirname(createRequire(import.meta.url).resolve('viem/package.json'));
  const source = await readFile(join(viemRoot, '_esm', 'constants', 'contracts.js'), 'utf8');
  const match = /export const multicall3Bytecode = '(0x[0-9a-f]+)'/.exec(source);
  if (!match) throw new Error('the Multicall3 bytecode was not found in the installed viem');
  return match[1] as Hex;
}
