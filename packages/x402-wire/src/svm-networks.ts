/**
 * The Solana networks x402 is spoken on: the second chain family beside EVM (networks.ts). Facts, not
 * code, from `@x402/svm` 2.27 (its constants and DEFAULT_ASSETS): a network's CAIP-2 id is `solana:` and
 * the first 32 characters of its genesis hash, its v1 name is "solana", "solana-devnet" or
 * "solana-testnet", and the official clients sign for these three only. Our local dev chain therefore
 * stands in for Solana Devnet, as the local EVM chain stands in for Base Sepolia.
 */

export type SolanaCaip2Id = `solana:${string}`;

export interface SolanaNetworkInfo {
  /** v1 name ("solana-devnet"). */
  readonly name: string;
  readonly label: string;
  readonly caip2: SolanaCaip2Id;
  /** The full genesis hash, which getGenesisHash answers on this network. */
  readonly genesisHash: string;
  readonly testnet: boolean;
  /** USDC's mint, an SPL Token (not Token-2022) mint of 6 decimals. */
  readonly usdcMint: string;
}

export const TOKEN_PROGRAM_ADDRESS = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
export const TOKEN_2022_PROGRAM_ADDRESS = 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb';
export const COMPUTE_BUDGET_PROGRAM_ADDRESS = 'ComputeBudget111111111111111111111111111111';
export const MEMO_PROGRAM_ADDRESS = 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr';
/** Lighthouse: assertion instructions some wallets (Phantom) add; the spec allows them. */
export const LIGHTHOUSE_PROGRAM_ADDRESS = 'L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95';

export const SOLANA_NETWORKS: readonly SolanaNetworkInfo[] = Object.freeze([
  { name: 'solana', label: 'Solana', caip2: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp', genesisHash: '5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d', testnet: false, usdcMint: 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v' },
  { name: 'solana-devnet', label: 'Solana Devnet', caip2: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1', genesisHash: 'EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG', testnet: true, usdcMint: '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU' },
  { name: 'solana-testnet', label: 'Solana Testnet', caip2: 'solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z', genesisHash: '4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zZ2Uh5zTdgkGQ', testnet: true, usdcMint: '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU' },
].map((n) => Object.freeze(n as SolanaNetworkInfo)));

/** A Solana network by v1 name or CAIP-2 id. */
export function findSolanaNetwork(network: string): SolanaNetworkInfo | undefined {
  return SOLANA_NETWORKS.find((n) => n.name === network || n.caip2 === network);
}

/** Whether a network id names the Solana family (`solana:*` or a v1 Solana name), known or not. */
export function isSolanaNetwork(network: unknown): boolean {
  return typeof network === 'string' && (network.startsWith('solana:') || network === 'solana' || network.startsWith('solana-'));
}

/** A base58 Solana address (32 bytes: 32 to 44 characters). */
export const SOLANA_ADDRESS = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/;
