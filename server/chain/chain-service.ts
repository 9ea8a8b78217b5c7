import { createPublicClient, defineChain, type Address, type Chain, type PublicClient, type PrivateKeyAccount, type Transport } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import * as viemChains from 'viem/chains';
import { configFor, type Config, type NetworkSettings } from '../platform/config.js';
import { networkByName, type NetworkInfo } from 'agentgate-x402-wire';
import { createRpcTransport, type RpcFailover } from './rpc-transport.js';
import { checkRpcUrls, type RpcUrlCheck } from './rpc-check.js';
import { ContractCode } from './contract-code.js';

/**
 * The chain the facilitator settles on and the relayer accounts that may pay its gas. Built once at
 * start-up. Transactions from a relayer account are sent only through the relayer pool
 * (settlement/relayer-pool.ts): it leases each account to one process and keeps its nonce sequence.
 */
export interface ChainService {
  /** v1 network name ("base", "base-sepolia"). */
  network: string;
  chainId: number;
  caip2: `eip155:${number}`;
  /** CHAIN_RPC_URL, the preferred node. */
  rpcUrl: string;
  /** Every node, in the order they are asked: CHAIN_RPC_URL, then CHAIN_RPC_URLS. */
  rpcUrls: string[];
  /** What each node answered at start-up (a node that did not answer is worth a warning, not a refusal to start). */
  rpcCheck: RpcUrlCheck[];
  usdc: { address: Address; name: string; version: string };
  publicClient: PublicClient<Transport, Chain>;
  /**
   * The relayer keys this process was given: RELAYER_PRIVATE_KEY first, then RELAYER_PRIVATE_KEYS, each key
   * once. Empty for a process that only accepts payments and leaves sending to processes with keys.
   */
  relayerAccounts: PrivateKeyAccount[];
  /** Which of the contracts the schemes rely on have code here (asked at start-up, see contract-code.ts). */
  code: ContractCode;
}

/**
 * viem's definition of the chain where it has one (its formatters: Celo's fee currency fields, the OP
 * stack's deposit transactions), else a plain EVM chain: reads, EIP-1559 transactions and their receipts
 * are all settlement needs.
 */
function viemChain(info: NetworkInfo): Chain {
  return Object.values(viemChains).find((c) => (c as Chain).id === info.chainId) as Chain | undefined
    ?? defineChain({ id: info.chainId, name: info.label, nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [] } } });
}

export class ChainConfigError extends Error {}

export interface ChainServiceOptions {
  /** Every time an RPC URL fails a request and it goes to the next one (see rpc-transport.ts). */
  onFailover?: (failover: RpcFailover) => void;
}

/** The default network's chain (the first of config.networks); undefined when it has no RPC URL (payments are off). */
export async function createChainService(config: Config, options: ChainServiceOptions = {}): Promise<ChainService | undefined> {
  const [first] = config.networks;
  return first?.rpcUrl ? chainServiceFor(first, config, options) : undefined;
}

/** Every network's chain, the default one first; none when the default one has no RPC URL (payments are off). */
export async function createChainServices(config: Config, options: ChainServiceOptions = {}): Promise<ChainService[]> {
  if (!config.networks[0]?.rpcUrl) return [];
  // Side by side: a slow node of one network does not hold up the others' start. Only the default
  // network's nodes must answer: another network whose nodes are all down starts without them (its
  // payments answer 503 until one answers, /ready says so), so a restart never waits on one network.
  return Promise.all(config.networks.map((settings, i) => chainServiceFor(settings, config, { ...options, mayBeDown: i > 0 })));
}

async function chainServiceFor(settings: NetworkSettings, global: Config, options: ChainServiceOptions & { mayBeDown?: boolean }): Promise<ChainService> {
  const config = configFor(global, settings);
  const info = networkByName(settings.network);
  if (!info) throw new ChainConfigError(`configuration error: network ${settings.network} is not supported`);
  const usdcAddress = (settings.usdcAddress ?? info.usdc?.address) as Address | undefined;
  if (!usdcAddress) {
    const names = (['USDC_ADDRESS', 'USDC_EIP712_NAME', 'USDC_EIP712_VERSION'] as const).map((n) => settings.variable(n)).join(', ');
    throw new ChainConfigError(`configuration error: ${info.label} has no 6-decimal EIP-3009 dollar token in the network table${info.assets.length ? ` (its ${info.assets.map((a) => a.symbol).join(', ')} move only through Permit2 or have ${info.assets[0]!.decimals} decimals)` : ''}: set ${names} to the token to price in`);
  }
  // The table's EIP-712 domain belongs to the table's token: a token of the operator's own is named by them.
  const tableToken = info.usdc && info.usdc.address.toLowerCase() === usdcAddress.toLowerCase() ? info.usdc : undefined;
  const rpcUrl = settings.rpcUrl!;
  const rpcUrls = distinctUrls([rpcUrl, ...settings.rpcUrls]);
  const rpcCheck = await checkRpcUrls(rpcUrls, config.CHAIN_RPC_TIMEOUT_MS);
  for (const check of rpcCheck) {
    if ('chainId' in check && check.chainId !== info.chainId) {
      const variable = check.url === rpcUrl ? settings.variable('RPC_URL') : `${settings.variable('RPC_URLS')} entry ${check.url}`;
      const named = variable.startsWith('CHAIN_') ? `CHAIN_NETWORK ${info.name}` : info.name;
      throw new ChainConfigError(`configuration error: ${variable} serves chain ${check.chainId}, but ${named} is chain ${info.chainId}`);
    }
  }
  if (!options.mayBeDown && !rpcCheck.some((check) => 'chainId' in check)) {
    throw new Error(`chain ${info.name}: no RPC URL answered: ${rpcCheck.map((check) => `${check.url} (${'error' in check ? check.error : ''})`).join(', ')}`);
  }
  const chain: Chain = { ...viemChain(info), rpcUrls: { default: { http: rpcUrls } } };
  const transport = createRpcTransport(rpcUrls, { timeoutMs: config.CHAIN_RPC_TIMEOUT_MS, onFailover: options.onFailover });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 100 }) as PublicClient<Transport, Chain>;
  return {
    network: info.name,
    chainId: info.chainId,
    caip2: info.caip2,
    rpcUrl,
    rpcUrls,
    rpcCheck,
    usdc: {
      address: usdcAddress,
      name: settings.usdcEip712Name ?? tableToken?.eip712Name ?? 'USD Coin',
      version: settings.usdcEip712Version ?? tableToken?.eip712Version ?? '2',
    },
    publicClient,
    relayerAccounts: settings.relayerKeys.map((key) => privateKeyToAccount(key as `0x${string}`)),
    code: new ContractCode(publicClient),
  };
}

/** The same node listed twice would only be asked twice after failing once. */
function distinctUrls(urls: string[]): string[] {
  const seen = new Set<string>();
  return urls.filter((url) => {
    const key = new URL(url).href;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
