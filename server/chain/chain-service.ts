import { createPublicClient, http, type Address, type Chain, type PublicClient, type PrivateKeyAccount, type Transport } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { base, baseSepolia } from 'viem/chains';
import type { Config } from '../platform/config.js';
import { networkByName } from '../../middleware/networks.js';

/**
 * The chain the facilitator settles on and the relayer accounts that may pay its gas. Built once at
 * start-up. Transactions from a relayer account are sent only through the relayer pool
 * (payments/relayer-pool.ts): it leases each account to one process and keeps its nonce sequence.
 */
export interface ChainService {
  /** v1 network name ("base", "base-sepolia"). */
  network: string;
  chainId: number;
  caip2: `eip155:${number}`;
  rpcUrl: string;
  usdc: { address: Address; name: string; version: string };
  publicClient: PublicClient<Transport, Chain>;
  /** The deployment's relayer pool: RELAYER_PRIVATE_KEY first, then RELAYER_PRIVATE_KEYS, each key once. */
  relayerAccounts: PrivateKeyAccount[];
}

const VIEM_CHAINS: Record<string, Chain> = { base, 'base-sepolia': baseSepolia };

export class ChainConfigError extends Error {}

export async function createChainService(config: Config): Promise<ChainService | undefined> {
  if (!config.CHAIN_RPC_URL) return undefined;
  const info = networkByName(config.CHAIN_NETWORK);
  if (!info) throw new ChainConfigError(`configuration error: CHAIN_NETWORK ${config.CHAIN_NETWORK} is not supported`);
  const usdcAddress = (config.USDC_ADDRESS ?? info.usdc?.address) as Address | undefined;
  if (!usdcAddress) throw new ChainConfigError('configuration error: USDC_ADDRESS is required');
  if (!config.RELAYER_PRIVATE_KEY) throw new ChainConfigError('configuration error: RELAYER_PRIVATE_KEY is required when CHAIN_RPC_URL is set');
  const chain: Chain = { ...VIEM_CHAINS[config.CHAIN_NETWORK]!, rpcUrls: { default: { http: [config.CHAIN_RPC_URL] } } };
  const transport = http(config.CHAIN_RPC_URL, { batch: false, retryCount: 2 });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 100 }) as PublicClient<Transport, Chain>;
  const chainId = await publicClient.getChainId();
  if (chainId !== info.chainId) {
    throw new ChainConfigError(`configuration error: CHAIN_RPC_URL serves chain ${chainId}, but CHAIN_NETWORK ${info.name} is chain ${info.chainId}`);
  }
  const keys = [config.RELAYER_PRIVATE_KEY, ...(config.RELAYER_PRIVATE_KEYS ?? '').split(',')].filter(Boolean).map((k) => k!.toLowerCase());
  const relayerAccounts = [...new Set(keys)].map((key) => privateKeyToAccount(key as `0x${string}`));
  return {
    network: info.name,
    chainId,
    caip2: info.caip2,
    rpcUrl: config.CHAIN_RPC_URL,
    usdc: {
      address: usdcAddress,
      name: config.USDC_EIP712_NAME ?? info.usdc?.eip712Name ?? 'USD Coin',
      version: config.USDC_EIP712_VERSION,
    },
    publicClient,
    relayerAccounts,
  };
}
