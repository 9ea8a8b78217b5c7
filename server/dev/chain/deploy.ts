/**
 * Deploys agentgate's dev chain contracts to a local node: Circle's USDC (FiatTokenV2_2 behind its
 * FiatTokenProxy, as on Base) and our SmartAccount factory, and mints test USDC. Not idempotent: every
 * call deploys a fresh token, so the caller keeps the returned addresses (e.g. next to the anvil state
 * file). On a fresh node the token's addresses follow from the deployer's nonces, so they come out the
 * same every time; the factory is at one CREATE2 address on every chain (deployed once per chain).
 */
import {
  concat,
  createPublicClient,
  getContractAddress,
  keccak256,
  toHex,
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
import { DEV_PROXY_ADMIN } from './dev-accounts.js';
import { configureMinter, deployFiatToken, mint, USDC_METADATA } from './fiat-token.js';
import { USDC_DECIMALS } from '../../chain/usdc.js';

export interface DeployDevChainParams {
  rpcUrl: string;
  /**
   * Deploys everything and holds every role of the token: owner, master minter, the one minter,
   * pauser, blacklister. Usually DEV_DEPLOYER.privateKey.
   */
  deployerKey: Hex;
  /** Admin of the token's proxy; must never call the token. Default DEV_PROXY_ADMIN. */
  proxyAdmin?: Address;
  /** Addresses that receive `mintAmountUsdc` each. */
  mintTo: readonly Address[];
  /** The token's name, which is its EIP-712 domain name (default "USD Coin", as on Base). */
  tokenName?: string;
  /** Whole USDC per address, as a decimal ("10000", "0.5") or number. Default "10000". */
  mintAmountUsdc?: string | number;
}

export interface DevChainDeployment {
  /** The token's proxy: USDC's address. */
  usdcAddress: Address;
  /** FiatTokenV2_2 behind the proxy. */
  usdcImplementation: Address;
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
  proxyAdmin = DEV_PROXY_ADMIN.address,
  mintTo,
  mintAmountUsdc = '10000',
  tokenName,
}: DeployDevChainParams): Promise<DevChainDeployment> {
  const artifacts = await loadArtifacts();
  const probe = createPublicClient({ transport: http(rpcUrl) });
  const chain = localChain({ chainId: await probe.getChainId(), rpcUrl });
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 100 });
  const account = privateKeyToAccount(deployerKey);
  const wallet = createWalletClient({ chain, account, transport: http(rpcUrl) });

  // Explicit nonces (and the explicit gas limits in fiat-token.ts) let every transaction go out at once,
  // so a chain with a block time confirms them all in one or two blocks instead of one block each.
  let nonce = await publicClient.getTransactionCount({ address: account.address, blockTag: 'pending' });
  const me = account.address;
  const usdc = await deployFiatToken({
    deployer: wallet,
    nonce,
    roles: { owner: me, masterMinter: me, pauser: me, blacklister: me, lostAndFound: me, proxyAdmin },
    ...(tokenName ? { metadata: { ...USDC_METADATA, name: tokenName } } : {}),
  });
  nonce += usdc.transactions.length;
  const pending: Hash[] = [...usdc.transactions];
  pending.push(await configureMinter({ masterMinter: wallet, token: usdc.token, minter: me, nonce: nonce++ }));
  const amount = parseUnits(String(mintAmountUsdc), USDC_DECIMALS);
  for (const to of mintTo) pending.push(await mint({ minter: wallet, token: usdc.token, to, amount, nonce: nonce++ }));
  // The factory through the CREATE2 deployer: at one address on every chain, so a wallet (CREATE2 of the
  // factory, its owner and salt) has one address on every network, as a production factory does.
  const factoryAddress = getContractAddress({ opcode: 'CREATE2', from: CREATE2_DEPLOYER, salt: FACTORY_SALT, bytecode: artifacts.SmartAccountFactory.bytecode as Hex });
  const factoryCode = await publicClient.getCode({ address: factoryAddress });
  if (!factoryCode || factoryCode === '0x') {
    pending.push(await wallet.sendTransaction({ to: CREATE2_DEPLOYER, data: concat([FACTORY_SALT, artifacts.SmartAccountFactory.bytecode as Hex]), nonce: nonce++, gas: 3_000_000n }));
  }
  for (const hash of pending) await confirmed(publicClient, hash, 'USDC and factory deployment step');
  const deployed = await publicClient.getCode({ address: factoryAddress });
  if (!deployed || deployed === '0x') throw new Error(`the SmartAccountFactory has no code at ${factoryAddress} after its deployment through ${CREATE2_DEPLOYER}`);

  return { usdcAddress: getAddress(usdc.token), usdcImplementation: getAddress(usdc.implementation), factoryAddress, chainId: chain.id };
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

/** The deterministic deployment proxy (Arachnid's) anvil and most EVM chains have: CREATE2 of (salt ++ init code). */
export const CREATE2_DEPLOYER: Address = '0x4e59b44847b379578588920cA78FbF26c0B4956C';
const FACTORY_SALT: Hex = keccak256(toHex('agentgate:SmartAccountFactory:v1'));

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
