/**
 * Puts what the x402 `batch-settlement` scheme needs on a local node, where the real networks have it: the
 * x402BatchSettlement contract and its EIP-3009 and Permit2 deposit collectors, at the addresses the official
 * SDK signs for and sends to. All three are our own implementations of the published interface
 * (contracts/X402BatchSettlement.sol, contracts/ERC3009DepositCollector.sol, contracts/Permit2DepositCollector.sol),
 * placed by canonical-placement.ts; the collectors are built for the canonical settlement (and Permit2)
 * addresses. The Permit2 collector needs Permit2: install the upto contracts too (dev-chain.ts does).
 * Idempotent. Nothing of this runs against a real network: there the real contracts are already deployed.
 */
import type { Hex } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS } from '../../payments/schemes/batch-settlement/evm/chain.js';
import { PERMIT2_ADDRESS } from '../../chain/permit2.js';
import { placeAtCanonicalAddresses } from './canonical-placement.js';

export async function installChannelContracts(node: { rpcUrl: string; deployerKey: Hex }): Promise<void> {
  await placeAtCanonicalAddresses(node, [
    { name: 'X402BatchSettlement', address: BATCH_SETTLEMENT_ADDRESS },
    { name: 'ERC3009DepositCollector', address: ERC3009_DEPOSIT_COLLECTOR_ADDRESS, constructorArgs: [BATCH_SETTLEMENT_ADDRESS] },
    { name: 'Permit2DepositCollector', address: PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, constructorArgs: [BATCH_SETTLEMENT_ADDRESS, PERMIT2_ADDRESS] },
  ]);
}
