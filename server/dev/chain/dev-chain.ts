import { createPublicClient, createWalletClient, http, parseUnits, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAnvil } from './anvil.js';
import { deployDevChain, installMulticall3, localChain } from './deploy.js';
import { installPermit2Contracts } from './permit2-contracts.js';
import { installEscrowContracts } from './escrow.js';
import { installChannelContracts } from './channel-contracts.js';
import { installSanctionsOracle } from './sanctions-oracle.js';
import { DEV_BUYERS, DEV_DEPLOYER } from './dev-accounts.js';
import { mint, USDC_METADATA } from './fiat-token.js';
import { balanceOf, USDC_DECIMALS } from '../../chain/usdc.js';

/**
 * The local chain of `agentgate dev` and the tests: Circle's USDC (FiatTokenV2_2 behind FiatTokenProxy)
 * and our SmartAccount factory on anvil. It runs with Base Sepolia's chain id (84532) and calls itself
 * `base-sepolia`, because the official x402 v1 client signs only for networks it knows by name. Payments
 * stay local: the EIP-712 domain binds every signature to the token's address on this node, so nothing
 * signed here is valid on the real network.
 */
export const DEV_CHAIN_ID = 84532;
export const DEV_NETWORK = 'base-sepolia';
/**
 * The dev token's EIP-712 domain name and version: what its `name()` and `version()` return. The name is
 * the one deploy.ts initializes the token with (as Base mainnet USDC; Base Sepolia's says "USDC"); the
 * version is FiatTokenV2_2's own constant.
 */
export const DEV_USDC_NAME = USDC_METADATA.name;
export const DEV_USDC_VERSION = '2';

/** A local chain of `agentgate dev`: the network it stands in for, and its token's EIP-712 name. */
export interface DevNetwork { network: string; chainId: number; tokenName: string }

/**
 * The local chains `agentgate dev` runs, the first the default network. Each is anvil with the real
 * network's chain id, Circle's FiatToken under that network's EIP-712 name (Polygon Amoy's signs as
 * "USDC", Arbitrum Sepolia's as "USD Coin"; the Base Sepolia stand-in keeps "USD Coin", the name its saved
 * chains were deployed with), and the x402 contracts at their canonical addresses.
 */
export const DEV_NETWORKS: readonly DevNetwork[] = Object.freeze([
  { network: DEV_NETWORK, chainId: DEV_CHAIN_ID, tokenName: DEV_USDC_NAME },
  { network: 'polygon-amoy', chainId: 80002, tokenName: 'USDC' },
  { network: 'arbitrum-sepolia', chainId: 421614, tokenName: 'USD Coin' },
]);

export interface DevChain {
  rpcUrl: string;
  chainId: number;
  usdcAddress: Address;
  factoryAddress: Address;
  stop(): Promise<void>;
  /** Resolves with a reason when anvil ends, whoever ended it. */
  exited: Promise<string>;
}

export async function startDevChain(options: { stateFile?: string; mintAmountUsdc?: string; deployed?: { usdcAddress: Address; factoryAddress: Address }; blockTime?: number; network?: DevNetwork } = {}): Promise<DevChain & { freshlyDeployed: boolean }> {
  const { chainId, tokenName } = options.network ?? DEV_NETWORKS[0]!;
  // blockTime: seconds between blocks, as on Base (2); default: a block per transaction, the instant a test wants.
  const node = await startAnvil({ chainId, stateFile: options.stateFile, blockTime: options.blockTime });
  const mintAmountUsdc = options.mintAmountUsdc ?? '10000';
  try {
    // Settlement batches go through Multicall3, as on Base; a chain state saved before it existed gets it now.
    await installMulticall3({ rpcUrl: node.rpcUrl, deployerKey: DEV_DEPLOYER.privateKey });
    if (options.deployed) {
      const client = createPublicClient({ transport: http(node.rpcUrl) });
      const code = await client.getCode({ address: options.deployed.usdcAddress });
      if (code && code !== '0x') {
        await installX402Contracts(node.rpcUrl);
        await fundRelayer(node.rpcUrl, chainId, options.deployed.usdcAddress, mintAmountUsdc);
        return { ...node, ...options.deployed, freshlyDeployed: false };
      }
    }
    const deployment = await deployDevChain({
      rpcUrl: node.rpcUrl,
      deployerKey: DEV_DEPLOYER.privateKey,
      mintTo: DEV_BUYERS.map((b) => b.address),
      mintAmountUsdc,
      tokenName,
    });
    // After the deployment, so USDC and the factory keep the addresses the deployer's nonces give them.
    await installX402Contracts(node.rpcUrl);
    await fundRelayer(node.rpcUrl, chainId, deployment.usdcAddress, mintAmountUsdc);
    return { ...node, usdcAddress: deployment.usdcAddress, factoryAddress: deployment.factoryAddress, freshlyDeployed: true };
  } catch (err) {
    await node.stop();
    throw err;
  }
}

/**
 * Test USDC for account 0, the relayer `agentgate dev` sends with and so the auth-capture escrow's
 * operator: the escrow's refund collector pulls refunds from the operator, and an operator holding
 * nothing refuses every refund (503 refund_funding_unavailable). Minted at a start that finds it holding
 * none: a fresh chain, a chain saved by a version that did not fund it, one whose refunds used it up.
 * Last, so the deployments before it keep the addresses the deployer's nonces give them.
 */
async function fundRelayer(rpcUrl: string, chainId: number, usdcAddress: Address, amountUsdc: string): Promise<void> {
  const chain = localChain({ chainId, rpcUrl });
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 100 });
  if (await balanceOf({ client: publicClient, token: usdcAddress, account: DEV_DEPLOYER.address }) > 0n) return;
  const minter = createWalletClient({ chain, account: privateKeyToAccount(DEV_DEPLOYER.privateKey), transport: http(rpcUrl) });
  const hash = await mint({ minter, token: usdcAddress, to: DEV_DEPLOYER.address, amount: parseUnits(amountUsdc, USDC_DECIMALS) });
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== 'success') throw new Error(`minting test USDC to the relayer (${hash}) reverted`);
}

/**
 * The x402 contracts the official SDKs expect at fixed addresses, as on Base: `upto` and Permit2 `exact`
 * settle through Permit2 and the x402 upto and exact proxies, `auth-capture` holds payments in Commerce Payments' escrow (v1.1 addresses),
 * `batch-settlement` goes through x402BatchSettlement and its two deposit collectors, and screening asks a
 * sanctions oracle at the public oracle's address. A chain state saved
 * before one of them existed gets it now.
 */
export async function installX402Contracts(rpcUrl: string): Promise<void> {
  await installPermit2Contracts({ rpcUrl, deployerKey: DEV_DEPLOYER.privateKey });
  await installEscrowContracts({ rpcUrl, deployerKey: DEV_DEPLOYER.privateKey });
  await installChannelContracts({ rpcUrl, deployerKey: DEV_DEPLOYER.privateKey });
  await installSanctionsOracle({ rpcUrl, deployerKey: DEV_DEPLOYER.privateKey });
}
