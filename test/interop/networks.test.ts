// Our network table (packages/x402-wire/src/networks.ts) against the official SDKs installed here: a buyer
// signs under the token's EIP-712 domain, so one wrong name or version makes every payment on that network
// fail verification; a wrong v1 name makes an official v1 client refuse the whole 402.
import { DEFAULT_ASSETS } from '@x402/evm';
import { EVM_NETWORK_CHAIN_ID_MAP } from '@x402/evm/v1';
import { EvmNetworkToChainId, SupportedEVMNetworks } from 'x402/types';
import { NETWORKS, networkByChainId, networkByName, toCaip2Network, toV1Network } from 'agentgate-x402-wire';

describe('the network table, held to the official SDKs', () => {
  it('has every network @x402/evm ships default assets for, with the same assets in the same order', () => {
    const official = Object.entries(DEFAULT_ASSETS as Record<string, Array<{ asset: string; name: string; version: string; decimals: number; symbol: string; assetTransferMethod?: string }>>);
    expect(official.length).toBeGreaterThanOrEqual(26);
    for (const [caip2, assets] of official) {
      const ours = networkByChainId(Number(caip2.split(':')[1]));
      expect({ caip2, found: ours?.caip2 }).toEqual({ caip2, found: caip2 });
      expect(ours!.assets.map((a) => ({ asset: a.address.toLowerCase(), name: a.eip712Name, version: a.eip712Version, decimals: a.decimals, permit2: a.transfer === 'permit2' })))
        .toEqual(assets.map((a) => ({ asset: a.asset.toLowerCase(), name: a.name, version: a.version, decimals: a.decimals, permit2: a.assetTransferMethod === 'permit2' })));
    }
  });

  it('names each network as @x402/evm v1 does, and marks what the x402 1.x client accepts', () => {
    for (const [name, chainId] of Object.entries(EVM_NETWORK_CHAIN_ID_MAP as Record<string, number>)) {
      expect({ name, chainId: networkByName(name)?.chainId }).toEqual({ name, chainId });
      expect(toV1Network(`eip155:${chainId}`)).toBe(name);
      expect(toCaip2Network(name)).toBe(`eip155:${chainId}`);
    }
    const v1Client = new Set<string>(SupportedEVMNetworks as string[]);
    for (const network of NETWORKS) {
      expect({ name: network.name, known: network.knownToOfficialV1Client }).toEqual({ name: network.name, known: v1Client.has(network.name) });
      if (v1Client.has(network.name)) expect(EvmNetworkToChainId.get(network.name as never)).toBe(network.chainId);
    }
  });

  it('prices in a 6-decimal EIP-3009 dollar token where there is one, and has no two networks on one chain id', () => {
    expect(new Set(NETWORKS.map((n) => n.chainId)).size).toBe(NETWORKS.length);
    expect(new Set(NETWORKS.map((n) => n.name)).size).toBe(NETWORKS.length);
    expect(networkByName('polygon-amoy')!.usdc).toEqual({ address: '0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582', eip712Name: 'USDC', eip712Version: '2' });
    expect(networkByName('arbitrum-sepolia')!.usdc?.eip712Name).toBe('USD Coin');
    // MegaETH's dollar token has 18 decimals and moves only through Permit2: no USDC price is paid in it.
    expect(networkByName('megaeth')!.usdc).toBeUndefined();
  });
});
