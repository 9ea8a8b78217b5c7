/**
 * Puts what the x402 `auth-capture` scheme needs on a local node, where Base has it: Commerce Payments'
 * AuthCaptureEscrow and its three token collectors (ERC-3009, Permit2, operator refunds) at the v1.1
 * addresses the official @x402/evm client signs for. All four are our own implementations of the published
 * interfaces (contracts/AuthCaptureEscrow.sol and the collectors beside it).
 *
 * As for Permit2 (canonical-placement.ts), each contract is deployed once from the deployer to learn its
 * runtime code, which `anvil_setCode` then places at the canonical address; the constructors' arguments
 * (the collectors' escrow, Permit2 and Multicall3) are the canonical addresses, so the immutables in the
 * copied code are right. One immutable is not: the escrow's constructor deploys the token store
 * implementation with its own (temporary) address as the only escrow allowed to spend. That implementation
 * gets a second copy, of a TokenStore built for the canonical escrow. Idempotent. Nothing of this runs
 * against a real network: there the real contracts are already deployed.
 */
import { createPublicClient, http, isAddressEqual, parseAbi, type Address, type Hex, type PublicClient } from 'viem';
import {
  AUTH_CAPTURE_ESCROW_ADDRESS,
  EIP3009_TOKEN_COLLECTOR_ADDRESS,
  OPERATOR_REFUND_COLLECTOR_ADDRESS,
  PERMIT2_TOKEN_COLLECTOR_ADDRESS,
  authCaptureEscrowAbi,
} from '../../payments/schemes/auth-capture/evm/chain.js';
import { PERMIT2_ADDRESS } from '../../chain/permit2.js';
import { MULTICALL3_ADDRESS } from './deploy.js';
import { placeAtCanonicalAddresses, type Placement } from './canonical-placement.js';

const PLACEMENTS: readonly Placement[] = [
  { name: 'AuthCaptureEscrow', address: AUTH_CAPTURE_ESCROW_ADDRESS },
  { name: 'ERC3009PaymentCollector', address: EIP3009_TOKEN_COLLECTOR_ADDRESS, constructorArgs: [AUTH_CAPTURE_ESCROW_ADDRESS, MULTICALL3_ADDRESS] },
  { name: 'Permit2PaymentCollector', address: PERMIT2_TOKEN_COLLECTOR_ADDRESS, constructorArgs: [AUTH_CAPTURE_ESCROW_ADDRESS, PERMIT2_ADDRESS, MULTICALL3_ADDRESS] },
  { name: 'OperatorRefundCollector', address: OPERATOR_REFUND_COLLECTOR_ADDRESS, constructorArgs: [AUTH_CAPTURE_ESCROW_ADDRESS] },
];

const tokenStoreAbi = parseAbi(['function authCaptureEscrow() view returns (address)']);

export interface EscrowContracts {
  escrow: Address;
  eip3009Collector: Address;
  permit2Collector: Address;
  operatorRefundCollector: Address;
}

export async function installEscrowContracts(node: { rpcUrl: string; deployerKey: Hex }): Promise<EscrowContracts> {
  await placeAtCanonicalAddresses(node, PLACEMENTS);
  const client = createPublicClient({ transport: http(node.rpcUrl) }) as PublicClient;
  const implementation = await client.readContract({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName: 'tokenStoreImplementation' });
  if (!(await tokenStoreServes(client, implementation))) {
    await placeAtCanonicalAddresses(node, [{ name: 'TokenStore', address: implementation, constructorArgs: [AUTH_CAPTURE_ESCROW_ADDRESS], replace: true }]);
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

/** Whether the escrow's token store implementation has code that lets the canonical escrow (not the temporary one) spend. */
async function tokenStoreServes(client: PublicClient, implementation: Address): Promise<boolean> {
  const code = await client.getCode({ address: implementation });
  if (!code || code === '0x') return false;
  const escrow = await client.readContract({ address: implementation, abi: tokenStoreAbi, functionName: 'authCaptureEscrow' });
  return isAddressEqual(escrow, AUTH_CAPTURE_ESCROW_ADDRESS);
}
