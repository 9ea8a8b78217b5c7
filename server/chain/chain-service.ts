import { createPublicClient, defineChain, type Address, type Chain, type PublicClient, type PrivateKeyAccount, type Transport } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import * as viemChains from 'viem/chains';
import type { Config } from '../platform/config.js';
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

export async function createChainService(config: Config, options: ChainServiceOptions = {}): Promise<ChainService | undefined> {
  if (!config.CHAIN_RPC_URL) return undefined;
  const info = networkByName(config.CHAIN_NETWORK);
  if (!info) throw new ChainConfigError(`configuration error: CHAIN_NETWORK ${config.CHAIN_NETWORK} is not supported`);
  const usdcAddress = (config.USDC_ADDRESS ?? info.usdc?.address) as Address | undefined;
  if (!usdcAddress) {
    throw new ChainConfigError(`configuration error: ${info.label} has no 6-decimal EIP-3009 dollar token in the network table${info.assets.length ? ` (its ${info.assets.map((a) => a.symbol).join(', ')} move only through Permit2 or have ${info.assets[0]!.decimals} decimals)` : ''}: set USDC_ADDRESS, USDC_EIP712_NAME and USDC_EIP712_VERSION to the token to price in`);
  }
  // The table's EIP-712 domain belongs to the table's token: a token of the operator's own is named by them.
  const tableToken = info.usdc && info.usdc.address.toLowerCase() === usdcAddress.toLowerCase() ? info.usdc : undefined;
  const rpcUrls = distinctUrls([config.CHAIN_RPC_URL, ...(config.CHAIN_RPC_URLS ?? [])]);
  const rpcCheck = await checkRpcUrls(rpcUrls, config.CHAIN_RPC_TIMEOUT_MS);
  for (const check of rpcCheck) {
    if ('chainId' in check && check.chainId !== info.chainId) {
      const variable = check.url === config.CHAIN_RPC_URL ? 'CHAIN_RPC_URL' : `CHAIN_RPC_URLS entry ${check.url}`;
      throw new ChainConfigError(`configuration error: ${variable} serves chain ${check.chainId}, but CHAIN_NETWORK ${info.name} is chain ${info.chainId}`);
    }
  }
  if (!rpcCheck.some((check) => 'chainId' in check)) {
    throw new Error(`chain: no RPC URL answered: ${rpcCheck.map((check) => `${check.url} (${'error' in check ? check.error : ''})`).join(', ')}`);
  }
  const chainId = info.chainId;
  const chain: Chain = { ...viemChain(info), rpcUrls: { default: { http: rpcUrls } } };
  const transport = createRpcTransport(rpcUrls, { timeoutMs: config.CHAIN_RPC_TIMEOUT_MS, onFailover: options.onFailover });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 100 }) as PublicClient<Transport, Chain>;
  const keys = [config.RELAYER_PRIVATE_KEY, ...(config.RELAYER_PRIVATE_KEYS ?? '').split(',')].filter(Boolean).map((k) => k!.toLowerCase());
  const relayerAccounts = [...new Set(keys)].map((key) => privateKeyToAccount(key as `0x${string}`));
  return {
    network: info.name,
    chainId,
    caip2: info.caip2,
    rpcUrl: config.CHAIN_RPC_URL,
    rpcUrls,
    rpcCheck,
    usdc: {
      address: usdcAddress,
      name: config.USDC_EIP712_NAME ?? tableToken?.eip712Name ?? 'USD Coin',
      version: config.USDC_EIP712_VERSION ?? tableToken?.eip712Version ?? '2',
    },
    publicClient,
    relayerAccounts,
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
