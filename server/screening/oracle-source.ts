import type { Address, PublicClient } from 'viem';
import { isAddress } from 'viem';
import type { ScreenedNetwork, ScreeningSource, SourceVerdict } from './sources.js';

/** The sanctions oracle's interface, as deployed on the main EVM chains (the dev chain has our own: contracts/SanctionsOracle.sol). */
export const SANCTIONS_ORACLE_ABI = [
  { type: 'function', name: 'isSanctioned', stateMutability: 'view', inputs: [{ name: 'addr', type: 'address' }], outputs: [{ type: 'bool' }] },
  { type: 'function', name: 'addToSanctionsList', stateMutability: 'nonpayable', inputs: [{ name: 'addrs', type: 'address[]' }], outputs: [] },
  { type: 'function', name: 'removeFromSanctionsList', stateMutability: 'nonpayable', inputs: [{ name: 'addrs', type: 'address[]' }], outputs: [] },
] as const;

/** Where the public sanctions oracle is deployed on Ethereum and most EVM chains; the dev chain places ours there too. */
export const PUBLIC_SANCTIONS_ORACLE_ADDRESS: Address = '0x40C57923924B5c5c5455c48D93317139ADDaC8fb';

/**
 * The on-chain sanctions oracle of each EVM network that names one (SANCTIONS_ORACLE_ADDRESS, per network
 * <NAME>_SANCTIONS_ORACLE_ADDRESS): `isSanctioned(address)`, one eth_call. It says nothing of networks
 * without one, nor of Solana addresses.
 */
export class SanctionsOracles implements ScreeningSource {
  readonly name = 'oracle' as const;

  constructor(private readonly byNetwork: ReadonlyMap<string, { client: PublicClient; address: Address }>) {}

  covers(network: ScreenedNetwork): boolean {
    return this.byNetwork.has(network.name);
  }

  async check(address: string, network: ScreenedNetwork): Promise<SourceVerdict> {
    const oracle = this.byNetwork.get(network.name);
    // An address the contract cannot take (not an EVM address) is not on its list.
    if (!oracle || !isAddress(address, { strict: false })) return { listed: false };
    const listed = await oracle.client.readContract({ address: oracle.address, abi: SANCTIONS_ORACLE_ABI, functionName: 'isSanctioned', args: [address as Address] });
    return { listed };
  }
}
