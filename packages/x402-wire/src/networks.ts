/**
 * The chains we settle on, and the two spellings x402 uses for them: v1 network names ("base") and
 * v2 CAIP-2 ids ("eip155:8453"). The official v1 client only knows a fixed list of names (see
 * PROTOCOL.md); our local dev chain has no official v1 name, so "anvil" is ours alone.
 */

export type Caip2Id = `eip155:${number}`;

export interface NetworkInfo {
  /** v1 network name as it appears in `accepts[].network` and in X-Payment. */
  readonly name: string;
  readonly chainId: number;
  readonly caip2: Caip2Id;
  /** Canonical USDC for this chain, when there is one (the local chain's token is deployed at start). */
  readonly usdc?: { readonly address: `0x${string}`; readonly eip712Name: string; readonly eip712Version: string };
  /** Whether the official `x402` 1.x client accepts this v1 name (its NetworkSchema enum). */
  readonly knownToOfficialV1Client: boolean;
}

export const LOCAL_CHAIN_ID = 31337;

export const NETWORKS: readonly NetworkInfo[] = Object.freeze([
  {
    name: 'base',
    chainId: 8453,
    caip2: 'eip155:8453',
    usdc: { address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', eip712Name: 'USD Coin', eip712Version: '2' },
    knownToOfficialV1Client: true,
  },
  {
    name: 'base-sepolia',
    chainId: 84532,
    caip2: 'eip155:84532',
    // Circle's Base Sepolia USDC signs EIP-712 under the name "USDC", not "USD Coin".
    usdc: { address: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', eip712Name: 'USDC', eip712Version: '2' },
    knownToOfficialV1Client: true,
  },
  {
    name: 'anvil',
    chainId: LOCAL_CHAIN_ID,
    caip2: `eip155:${LOCAL_CHAIN_ID}`,
    knownToOfficialV1Client: false,
  },
]);

const byName = new Map(NETWORKS.map((n) => [n.name, n]));
const byChainId = new Map(NETWORKS.map((n) => [n.chainId, n]));

export function networkByName(name: string): NetworkInfo | undefined {
  return byName.get(name);
}

export function networkByChainId(chainId: number): NetworkInfo | undefined {
  return byChainId.get(chainId);
}

const CAIP2_EIP155 = /^eip155:(\d{1,15})$/;

export function chainIdFromCaip2(id: string): number | undefined {
  const match = CAIP2_EIP155.exec(id);
  return match ? Number(match[1]) : undefined;
}

export function caip2FromChainId(chainId: number): Caip2Id {
  return `eip155:${chainId}`;
}

/**
 * The v1 name for a network given in either spelling. A chain id we have no name for keeps its CAIP-2
 * form, which is the honest answer (no v1 client could pay it anyway).
 */
export function toV1Network(network: string): string {
  if (byName.has(network)) return network;
  const chainId = chainIdFromCaip2(network);
  return chainId === undefined ? network : (byChainId.get(chainId)?.name ?? network);
}

/** The CAIP-2 id for a network given in either spelling; unknown names are returned unchanged. */
export function toCaip2Network(network: string): string {
  if (chainIdFromCaip2(network) !== undefined) return network;
  return byName.get(network)?.caip2 ?? network;
}
