/**
 * Test helper for test/chain and test/channels: one private anvil node per test file (so a test may move its
 * clock), with Circle's USDC and our factory deployed, buyers funded, and the x402 contracts placed as on the
 * dev chain; plus viem clients and a revert-reason reader.
 */
import { randomBytes } from 'node:crypto';
import {
  BaseError,
  ContractFunctionRevertedError,
  createPublicClient,
  createWalletClient,
  http,
  parseUnits,
  toHex,
  type Account,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type Transport,
  type WalletClient,
} from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { startAnvil, type AnvilNode } from '../../server/dev/chain/anvil.js';
import { deployDevChain, installMulticall3, localChain, type DevChainDeployment } from '../../server/dev/chain/deploy.js';
import { DEV_ACCOUNTS, DEV_DEPLOYER } from '../../server/dev/chain/dev-accounts.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION, installX402Contracts } from '../../server/dev/chain/dev-chain.js';
import { transferWithAuthorizationTypes, usdcDomain, type Authorization } from '../../server/chain/usdc.js';

export const ONE_USDC = parseUnits('1', 6);
export const FUNDED_USDC = parseUnits('10000', 6);

export interface DevChain {
  node: AnvilNode;
  deployment: DevChainDeployment;
  chain: Chain;
  publicClient: PublicClient;
  /** Account 0: deployer, holder of the token's roles (minter, blacklister, pauser…), relayer. */
  relayer: WalletClient<Transport, Chain, Account>;
  /** Accounts 1..3 as viem local accounts; each holds FUNDED_USDC. */
  buyers: PrivateKeyAccount[];
  walletFor(account: Account): WalletClient<Transport, Chain, Account>;
  stop(): Promise<void>;
}

export async function startDevChain(): Promise<DevChain> {
  const node = await startAnvil();
  try {
    const buyers = DEV_ACCOUNTS.slice(1, 4).map((a) => privateKeyToAccount(a.privateKey));
    const deployment = await deployDevChain({
      rpcUrl: node.rpcUrl,
      deployerKey: DEV_DEPLOYER.privateKey,
      mintTo: buyers.map((b) => b.address),
      mintAmountUsdc: '10000',
    });
    // What the dev chain has besides: Multicall3 (the official facilitator reads through it) and the x402
    // contracts at their canonical addresses (Permit2, upto proxy, batch settlement and its collectors).
    await installMulticall3({ rpcUrl: node.rpcUrl, deployerKey: DEV_DEPLOYER.privateKey });
    await installX402Contracts(node.rpcUrl);
    const chain = localChain({ chainId: node.chainId, rpcUrl: node.rpcUrl });
    const transport = http(node.rpcUrl);
    const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 }) as PublicClient;
    const walletFor = (account: Account) => createWalletClient({ chain, account, transport, pollingInterval: 50 });
    return {
      node,
      deployment,
      chain,
      publicClient,
      relayer: walletFor(privateKeyToAccount(DEV_DEPLOYER.privateKey)),
      buyers,
      walletFor,
      stop: () => node.stop(),
    };
  } catch (err) {
    await node.stop();
    throw err;
  }
}

export function randomNonce(): Hex {
  return toHex(randomBytes(32));
}

/** An authorization valid from now-ish for an hour, with a fresh nonce. */
export function authorization(params: { from: Address; to: Address; value: bigint } & Partial<Authorization>): Authorization {
  const now = BigInt(Math.floor(Date.now() / 1000));
  return { validAfter: 0n, validBefore: now + 3600n, nonce: randomNonce(), ...params };
}

export function domainOf(dev: DevChain) {
  return usdcDomain({
    name: DEV_USDC_NAME,
    version: DEV_USDC_VERSION,
    chainId: dev.node.chainId,
    verifyingContract: dev.deployment.usdcAddress,
  });
}

/** EIP-712 TransferWithAuthorization signature by `signer` (viem signTypedData). */
export function signTransfer(dev: DevChain, signer: PrivateKeyAccount, auth: Authorization): Promise<Hex> {
  return signer.signTypedData({
    domain: domainOf(dev),
    types: transferWithAuthorizationTypes,
    primaryType: 'TransferWithAuthorization',
    message: auth,
  });
}

/** The revert reason a viem contract call failed with (`Error(string)`), or the error message. */
export async function revertReason(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof BaseError) {
      const reverted = err.walk((e) => e instanceof ContractFunctionRevertedError);
      if (reverted instanceof ContractFunctionRevertedError && reverted.reason) return reverted.reason;
      return err.shortMessage;
    }
    return String(err);
  }
  throw new Error('expected the call to revert, but it succeeded');
}
