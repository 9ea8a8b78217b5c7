/**
 * The EVM networks x402 is spoken on, and the two spellings it uses for them: v1 network names ("base")
 * and v2 CAIP-2 ids ("eip155:8453"). Facts, not code, from the official SDKs: every network `@x402/evm`
 * ships default assets for (its DEFAULT_ASSETS, the first asset being a network's default), the v1 names
 * of `x402` 1.x and `@x402/evm` (EVM_NETWORK_CHAIN_ID_MAP), and the USDC `x402` 1.x knew on v1 networks
 * the newer table leaves out (Polygon Amoy, Avalanche Fuji, Abstract, ...). test/interop/networks.test.ts
 * holds this table to the installed SDKs. Our local dev chain has no official v1 name: "anvil" is ours.
 */

import { findSolanaNetwork } from './svm-networks.js';

export type Caip2Id = `eip155:${number}`;

/** How a buyer's signature moves the token: its own EIP-3009 transferWithAuthorization, or Permit2. */
export type AssetTransfer = 'eip3009' | 'permit2';

export interface NetworkAsset {
  readonly address: `0x${string}`;
  readonly symbol: string;
  readonly decimals: number;
  /** The token's EIP-712 domain, which a buyer's authorization is signed under. */
  readonly eip712Name: string;
  readonly eip712Version: string;
  readonly transfer: AssetTransfer;
}

export interface NetworkInfo {
  /** v1 network name as it appears in `accepts[].network` and in X-Payment (ours where x402 has none). */
  readonly name: string;
  /** What people call it ("Polygon Amoy"). */
  readonly label: string;
  readonly chainId: number;
  readonly caip2: Caip2Id;
  readonly testnet: boolean;
  /** The tokens x402 prices in on this chain; the first is the default. Empty: none is known (a local chain's is deployed at start). */
  readonly assets: readonly NetworkAsset[];
  /**
   * The dollar token our USDC prices are paid in: the first 6-decimal EIP-3009 asset. Absent where the
   * chain's stablecoins move only through Permit2 or have 18 decimals (MegaETH, Mezo, Radius, Igra).
   */
  readonly usdc?: { readonly address: `0x${string}`; readonly eip712Name: string; readonly eip712Version: string };
  /** Whether the official `x402` 1.x client accepts this v1 name (its NetworkSchema enum). */
  readonly knownToOfficialV1Client: boolean;
}

export const LOCAL_CHAIN_ID = 31337;

type AssetRow = [address: `0x${string}`, symbol: string, decimals: number, eip712Name: string, eip712Version: string, transfer?: AssetTransfer];
type NetworkRow = [name: string, label: string, chainId: number, testnet: boolean, v1: boolean, assets: AssetRow[]];

const USDC = (address: `0x${string}`, eip712Name: string): AssetRow => [address, 'USDC', 6, eip712Name, '2'];

const ROWS: NetworkRow[] = [
  ['base', 'Base', 8453, false, true, [USDC('0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', 'USD Coin')]],
  // Circle's testnet USDC signs EIP-712 under the name "USDC", not "USD Coin".
  ['base-sepolia', 'Base Sepolia', 84532, true, true, [USDC('0x036CbD53842c5426634e7929541eC2318f3dCF7e', 'USDC')]],
  ['ethereum', 'Ethereum', 1, false, false, [USDC('0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48', 'USD Coin')]],
  ['sepolia', 'Sepolia', 11155111, true, false, []],
  ['polygon', 'Polygon', 137, false, true, [USDC('0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359', 'USD Coin')]],
  ['polygon-amoy', 'Polygon Amoy', 80002, true, true, [USDC('0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582', 'USDC')]],
  ['arbitrum', 'Arbitrum One', 42161, false, false, [USDC('0xaf88d065e77c8cC2239327C5EDb3A432268e5831', 'USD Coin')]],
  ['arbitrum-sepolia', 'Arbitrum Sepolia', 421614, true, false, [USDC('0x75faf114eafb1BDbe2F0316DF893fd58CE46AA4d', 'USD Coin')]],
  ['avalanche', 'Avalanche C-Chain', 43114, false, true, [USDC('0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E', 'USD Coin')]],
  ['avalanche-fuji', 'Avalanche Fuji', 43113, true, true, [USDC('0x5425890298aed601595a70AB815c96711a31Bc65', 'USD Coin')]],
  ['monad', 'Monad', 143, false, false, [USDC('0x754704Bc059F8C67012fEd69BC8A327a5aafb603', 'USDC')]],
  ['sei', 'Sei', 1329, false, true, [USDC('0xe15fC38F6D8c56aF07bbCBe3BAf5708A2Bf42392', 'USDC')]],
  ['sei-testnet', 'Sei Testnet', 1328, true, true, [USDC('0x4fCF1784B31630811181f670Aea7A7bEF803eaED', 'USDC')]],
  ['celo', 'Celo', 42220, false, false, [
    USDC('0xcebA9300f2b948710d2653dD7B07f33A8B32118C', 'USDC'),
    ['0x48065fbBE25f71C9282ddf5e1cD6D6A887483D5e', 'USDT', 6, 'Tether USD', '1'],
    ['0xD2ab3C9A02DBBAB236BfEC45D1d755DF4267F771', 'USAT', 6, 'Tether America USD', '1'],
  ]],
  ['celo-sepolia', 'Celo Sepolia', 11142220, true, false, [USDC('0x01C5C0122039549AD1493B8220cABEdD739BC44E', 'USDC')]],
  ['stable', 'Stable', 988, false, false, [['0x779Ded0c9e1022225f8E0630b35a9b54bE713736', 'USDT0', 6, 'USDT0', '1']]],
  ['stable-testnet', 'Stable Testnet', 2201, true, false, [['0x78Cf24370174180738C5B8E352B6D14c83a6c9A9', 'USDT0', 6, 'USDT0', '1']]],
  ['flare', 'Flare', 14, false, false, [['0xe7cd86e13AC4309349F30B3435a9d337750fC82D', 'USDT0', 6, 'USD\u20AE0', '1']]],
  ['xdc', 'XDC Network', 50, false, false, [USDC('0xfA2958CB79b0491CC627c1557F441eF849Ca8eb1', 'USDC')]],
  ['xdc-apothem', 'XDC Apothem', 51, true, false, [USDC('0xb5AB69F7bBada22B28e79C8FFAECe55eF1c771D4', 'USDC')]],
  ['adi', 'ADI Chain', 36900, false, false, [['0x9cb8142aEBBcdc60AF7c97Af897A67A8f3CA71C2', 'USDC.e', 6, 'USDC.e', '2']]],
  ['hpp', 'HPP', 190415, false, false, [['0x401eCb1D350407f13ba348573E5630B83638E30D', 'USDC.e', 6, 'Bridged USDC', '2']]],
  ['hpp-sepolia', 'HPP Sepolia', 181228, true, false, [['0x401eCb1D350407f13ba348573E5630B83638E30D', 'USDC.e', 6, 'Bridged USDC', '2']]],
  // Dollar tokens without EIP-3009: paid through Permit2 only.
  ['megaeth', 'MegaETH', 4326, false, false, [['0xFAfDdbb3FC7688494971a79cc65DCa3EF82079E7', 'MegaUSD', 18, 'MegaUSD', '1', 'permit2']]],
  ['mezo', 'Mezo', 31612, false, false, [['0xdD468A1DDc392dcdbEf6db6e34E89AA338F9F186', 'mUSD', 18, 'Mezo USD', '1', 'permit2']]],
  ['mezo-testnet', 'Mezo Testnet', 31611, true, false, [['0x118917a40FAF1CD7a13dB0Ef56C86De7973Ac503', 'mUSD', 18, 'Mezo USD', '1', 'permit2']]],
  ['radius', 'Radius', 723487, false, false, [['0x33ad9e4BD16B69B5BFdED37D8B5D9fF9aba014Fb', 'SBC', 6, 'Stable Coin', '1', 'permit2']]],
  ['radius-testnet', 'Radius Testnet', 72344, true, false, [['0x33ad9e4BD16B69B5BFdED37D8B5D9fF9aba014Fb', 'SBC', 6, 'Stable Coin', '1', 'permit2']]],
  ['igra', 'Igra', 38833, false, false, [['0xA5b8BF902b2844dA17d4506cc827F7F1681735E7', 'USDC', 6, 'USDC', '1', 'permit2']]],
  // v1 networks of `x402` 1.x that the newer default-asset table leaves out.
  ['abstract', 'Abstract', 2741, false, true, [['0x84a71ccd554cc1b02749b35d22f684cc8ec987e1', 'USDC.e', 6, 'Bridged USDC', '2']]],
  ['abstract-testnet', 'Abstract Testnet', 11124, true, true, [['0xe4C7fBB0a626ed208021ccabA6Be1566905E2dFc', 'USDC.e', 6, 'Bridged USDC', '2']]],
  ['iotex', 'IoTeX', 4689, false, true, [['0xcdf79194c6c285077a58da47641d4dbe51f63542', 'USDC.e', 6, 'Bridged USDC', '2']]],
  ['peaq', 'peaq', 3338, false, true, [USDC('0xbbA60da06c2c5424f03f7434542280FCAd453d10', 'USDC')]],
  ['story', 'Story', 1514, false, true, [['0xF1815bd50389c46847f0Bda824eC8da914045D14', 'USDC.e', 6, 'Bridged USDC', '2']]],
  ['educhain', 'EDU Chain', 41923, false, true, [['0x12a272A581feE5577A5dFa371afEB4b2F3a8C2F8', 'USDC.e', 6, 'Bridged USDC (Stargate)', '2']]],
  ['skale-base-sepolia', 'SKALE Base Sepolia', 324705682, true, true, [['0x2e08028E3C4c2356572E096d8EF835cD5C6030bD', 'USDC', 6, 'Bridged USDC (SKALE Bridge)', '2']]],
  ['anvil', 'Local chain', LOCAL_CHAIN_ID, true, false, []],
];

function networkOf([name, label, chainId, testnet, v1, rows]: NetworkRow): NetworkInfo {
  const assets = rows.map(([address, symbol, decimals, eip712Name, eip712Version, transfer]) => Object.freeze({ address, symbol, decimals, eip712Name, eip712Version, transfer: transfer ?? 'eip3009' }));
  const dollar = assets.find((a) => a.transfer === 'eip3009' && a.decimals === 6);
  return Object.freeze({
    name, label, chainId, caip2: `eip155:${chainId}` as Caip2Id, testnet, assets: Object.freeze(assets),
    ...(dollar ? { usdc: Object.freeze({ address: dollar.address, eip712Name: dollar.eip712Name, eip712Version: dollar.eip712Version }) } : {}),
    knownToOfficialV1Client: v1,
  });
}

export const NETWORKS: readonly NetworkInfo[] = Object.freeze(ROWS.map(networkOf));

const byName = new Map(NETWORKS.map((n) => [n.name, n]));
const byChainId = new Map(NETWORKS.map((n) => [n.chainId, n]));

export function networkByName(name: string): NetworkInfo | undefined {
  return byName.get(name);
}

export function networkByChainId(chainId: number): NetworkInfo | undefined {
  return byChainId.get(chainId);
}

/** A network of the table named either way: its v1 name ("polygon-amoy") or its CAIP-2 id ("eip155:80002"). */
export function findNetwork(network: string): NetworkInfo | undefined {
  return byName.get(network) ?? byChainId.get(chainIdFromCaip2(network) ?? -1);
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
  if (network.startsWith('solana:')) return findSolanaNetwork(network)?.name ?? network;
  const chainId = chainIdFromCaip2(network);
  return chainId === undefined ? network : (byChainId.get(chainId)?.name ?? network);
}

/** The CAIP-2 id for a network given in either spelling; unknown names are returned unchanged. */
export function toCaip2Network(network: string): string {
  if (chainIdFromCaip2(network) !== undefined) return network;
  return byName.get(network)?.caip2 ?? findSolanaNetwork(network)?.caip2 ?? network;
}
