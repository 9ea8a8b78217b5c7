/**
 * Puts what the x402 `auth-capture` scheme needs on a local node, where Base has it: Commerce Payments'
 * AuthCaptureEscrow and its three token collectors (ERC-3009, Permit2, operator refunds) at the v1.1
 * addresses the official @x402/evm client signs for. All four are our own implementations of the published
 * interfaces (contracts/AuthCaptureEscrow.sol and the collectors beside it).
 *
 * As for Permit2 (upto-contracts.ts), each contract is deployed once from the deployer to learn its
 * runtime code, which `anvil_setCode` then places at the canonical address; the constructors' arguments
 * (the collectors' escrow, Permit2 and Multicall3) are the canonical addresses, so the immutables in the
 * copied code are right. One immutable is not: the escrow's constructor deploys the token store
 * implementation with its own (temporary) address as the only escrow allowed to spend. That implementation
 * gets a second copy, of a TokenStore built for the canonical escrow. Idempotent. Nothing of this runs
 * against a real network: there the real contracts are already deployed.
 */
import { createPublicClient, createWalletClient, http, isAddressEqual, parseAbi, type Address, type Hash, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { loadArtifacts, type ContractName } from '../../../contracts/compile.js';
import {
  AUTH_CAPTURE_ESCROW_ADDRESS,
  EIP3009_TOKEN_COLLECTOR_ADDRESS,
  OPERATOR_REFUND_COLLECTOR_ADDRESS,
  PERMIT2_TOKEN_COLLECTOR_ADDRESS,
  authCaptureEscrowAbi,
} from '../../chain/auth-capture.js';
import { PERMIT2_ADDRESS } from '../../chain/permit2.js';
import { localChain, MULTICALL3_ADDRESS } from './deploy.js';

interface Placement {
  name: ContractName;
  address: Address;
  args: readonly unknown[];
}

const PLACEMENTS: readonly Placement[] = [
  { name: 'AuthCaptureEscrow', address: AUTH_CAPTURE_ESCROW_ADDRESS, args: [] },
  { name: 'ERC3009PaymentCollector', address: EIP3009_TOKEN_COLLECTOR_ADDRESS, args: [AUTH_CAPTURE_ESCROW_ADDRESS, MULTICALL3_ADDRESS] },
  { name: 'Permit2PaymentCollector', address: PERMIT2_TOKEN_COLLECTOR_ADDRESS, args: [AUTH_CAPTURE_ESCROW_ADDRESS, PERMIT2_ADDRESS, MULTICALL3_ADDRESS] },
  { name: 'OperatorRefundCollector', address: OPERATOR_REFUND_COLLECTOR_ADDRESS, args: [AUTH_CAPTURE_ESCROW_ADDRESS] },
];

const tokenStoreAbi = parseAbi(['function authCaptureEscrow() view returns (address)']);

export interface EscrowContracts {
  escrow: Address;
  eip3009Collector: Address;
  permit2Collector: Address;
  operatorRefundCollector: Address;
}

export async function installEscrowContracts({ rpcUrl, deployerKey }: { rpcUrl: string; deployerKey: Hex }): Promise<EscrowContracts> {
  const probe = createPublicClient({ transport: http(rpcUrl) });
  const chain = localChain({ chainId: await probe.getChainId(), rpcUrl });
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 100 }) as PublicClient;
  const account = privateKeyToAccount(deployerKey);
  const wallet = createWalletClient({ chain, account, transport: http(rpcUrl) });
  const artifacts = await loadArtifacts();

  const missing: Placement[] = [];
  for (const placement of PLACEMENTS) if (!(await hasCode(publicClient, placement.address))) missing.push(placement);
  const storeNeedsFixing = missing.some((p) => p.name === 'AuthCaptureEscrow') || !(await tokenStoreServesCanonicalEscrow(publicClient));
  const deployments: Array<{ name: ContractName; args: readonly unknown[] }> = [...missing];
  if (storeNeedsFixing) deployments.push({ name: 'TokenStore', args: [AUTH_CAPTURE_ESCROW_ADDRESS] });
  if (deployments.length === 0) return installed();

  // All deployments leave at once (explicit nonces), so a chain with a block time mines them in one block.
  let nonce = await publicClient.getTransactionCount({ address: account.address, blockTag: 'pending' });
  const sent: Array<{ name: ContractName; hash: Hash }> = [];
  for (const { name, args } of deployments) {
    const { abi, bytecode } = artifacts[name];
    sent.push({ name, hash: await wallet.deployContract({ abi, bytecode, args: args as never, nonce: nonce++ }) });
  }
  const runtime = new Map<ContractName, Hex>();
  for (const { name, hash } of sent) {
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== 'success' || !receipt.contractAddress) throw new Error(`${name} deployment ${hash} failed`);
    const code = await publicClient.getCode({ address: receipt.contractAddress });
    if (!code) throw new Error(`${name} deployment left no code`);
    runtime.set(name, code);
  }

  for (const placement of missing) await setCode(publicClient, placement.address, runtime.get(placement.name)!);
  if (storeNeedsFixing) {
    const implementation = await publicClient.readContract({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName: 'tokenStoreImplementation' });
    await setCode(publicClient, implementation, runtime.get('TokenStore')!);
  }
  return installed();
}

function installed(): EscrowContracts {
  return {
    escrow: AUTH_CAPTURE_ESCROW_ADDRESS,
    eip3009Collector: EIP3009_TOKEN_COLLECTOR_ADDRESS,
    permit2Collector: PERMIT2_TOKEN_COLLECTOR_ADDRESS,
    operatorRefundCollector: OPERATOR_REFUND_COLLECTOR_ADDRESS,
  };
}

async function hasCode(client: PublicClient, address: Address): Promise<boolean> {
  const code = await client.getCode({ address });
  return !!code && code !== '0x';
}

/** Whether the escrow's token store implementation lets the canonical escrow (not the temporary one) spend. */
async function tokenStoreServesCanonicalEscrow(client: PublicClient): Promise<boolean> {
  const implementation = await client.readContract({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName: 'tokenStoreImplementation' });
  if (!(await hasCode(client, implementation))) return false;
  const escrow = await client.readContract({ address: implementation, abi: tokenStoreAbi, functionName: 'authCaptureEscrow' });
  return isAddressEqual(escrow, AUTH_CAPTURE_ESCROW_ADDRESS);
}

async function setCode(client: PublicClient, address: Address, code: Hex): Promise<void> {
  await client.request({ method: 'anvil_setCode' as never, params: [address, code] as never });
}
