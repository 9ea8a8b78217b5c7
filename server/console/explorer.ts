import type { ChainService } from '../chain/chain-service.js';
import type { SolanaChain } from '../chain/solana/solana-chain.js';

const LOOPBACK = /^(localhost|127\.\d+\.\d+\.\d+|\[::1\]|.*\.localhost)$/i;

/**
 * Where a transaction can be looked at: the viem chain's block explorer. The local dev chain borrows
 * base-sepolia's name and chain id (for the official v1 client) but its transactions exist only on the
 * local node, so an RPC on loopback means no explorer link.
 */
export function explorerTxUrl(chain: ChainService | undefined, txHash: string | undefined): string | undefined {
  if (!chain || !txHash) return undefined;
  let host: string;
  try { host = new URL(chain.rpcUrl).hostname; } catch { return undefined; }
  if (LOOPBACK.test(host)) return undefined;
  const base = chain.publicClient.chain.blockExplorers?.default?.url;
  return base ? `${base.replace(/\/+$/, '')}/tx/${txHash}` : undefined;
}

/** The same on Solana: the Solana Explorer, on the network's cluster (none for a local RPC). */
export function solanaExplorerTxUrl(chain: SolanaChain | undefined, txHash: string | undefined): string | undefined {
  if (!chain || !txHash) return undefined;
  let host: string;
  try { host = new URL(chain.rpcUrl).hostname; } catch { return undefined; }
  if (LOOPBACK.test(host)) return undefined;
  const cluster = chain.network === 'solana' ? '' : `?cluster=${chain.network.replace(/^solana-/, '')}`;
  return `https://explorer.solana.com/tx/${txHash}${cluster}`;
}
