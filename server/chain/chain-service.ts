import { createPublicClient, createWalletClient, http, nonceManager, type Address, type Chain, type PublicClient, type WalletClient, type Account, type PrivateKeyAccount, type Transport } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { base, baseSepolia } from 'viem/chains';
import type { Config } from '../platform/config.js';
import { networkByName } from '../../middleware/networks.js';

/**
 * The chain the facilitator settles on and the wallet it pays gas from. Built once at start-up; the
 * relayer account uses viem's nonce manager so concurrent settlements in one process get distinct
 * transaction nonces.
 */
export interface ChainService {
  /** v1 network name ("base", "base-sepolia"). */
  network: string;
  chainId: number;
  caip2: `eip155:${number}`;
  rpcUrl: string;
  usdc: { address: Address; name: string; version: string };
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain, Account>;
  relayer: Address;
  /** Every account that may send settlements: RELAYER_PRIVATE_KEY first, then RELAYER_PRIVATE_KEYS. */
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
  // One nonce manager (viem's, per address) for every sender of an account in this process.
  const account = privateKeyToAccount(config.RELAYER_PRIVATE_KEY as `0x${string}`, { nonceManager });
  const extra = (config.RELAYER_PRIVATE_KEYS ?? '').split(',').filter(Boolean).map((key) => privateKeyToAccount(key as `0x${string}`, { nonceManager }));
  const walletClient = createWalletClient({ chain, transport, account, pollingInterval: 100 });
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
    walletClient,
    relayer: account.address,
    relayerAccounts: [account, ...extra.filter((a) => a.address !== account.address)],
  };
}
