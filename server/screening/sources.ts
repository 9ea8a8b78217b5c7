import { findNetwork, findSolanaNetwork } from 'agentgate-x402-wire';
/**
 * What one screening source answers of an address on a network. Sources are the operator's: a list file
 * (address-list.ts), an on-chain sanctions oracle (oracle-source.ts), an HTTP screening provider
 * (provider-source.ts). Each is optional; screening.ts combines those configured.
 */
export type SourceName = 'list' | 'oracle' | 'provider';

export interface SourceVerdict {
  listed: boolean;
  /** What the source says of a listed address (a list entry's note, a provider's reason). */
  detail?: string;
}

/** A network as sources need it: its v1 name (`base-sepolia`, `solana-devnet`) and its CAIP-2 id. */
export interface ScreenedNetwork { name: string; caip2: string; family: 'evm' | 'solana' }

export interface ScreeningSource {
  readonly name: SourceName;
  /** Whether this source says anything of addresses on this network (an oracle only of the chains it is on). */
  covers(network: ScreenedNetwork): boolean;
  /**
   * Whether the address is listed. Throws when it cannot answer now (a provider down, an RPC fault):
   * screening.ts applies the operator's policy for that.
   */
  check(address: string, network: ScreenedNetwork): Promise<SourceVerdict>;
}

/** One form per address: EVM addresses in lower case (checksums differ in case only), others as given (base58 is case-sensitive). */
export function addressKey(address: string): string {
  return /^0x[0-9a-fA-F]{40}$/.test(address) ? address.toLowerCase() : address;
}

/** A network of either family by v1 name or CAIP-2 id, as screening names it. */
export function screenedNetwork(network: string): ScreenedNetwork {
  const evm = findNetwork(network);
  if (evm) return { name: evm.name, caip2: evm.caip2, family: 'evm' };
  const solana = findSolanaNetwork(network);
  if (solana) return { name: solana.name, caip2: solana.caip2, family: 'solana' };
  return { name: network, caip2: network, family: network.startsWith('solana') ? 'solana' : 'evm' };
}
