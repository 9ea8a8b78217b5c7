import { BaseError, ContractFunctionRevertedError, hashTypedData, isAddressEqual, recoverTypedDataAddress, type Abi, type Address, type HashTypedDataParameters, type Hex, type RecoverTypedDataAddressParameters, type VerifyTypedDataParameters } from 'viem';
import { recoverSigner } from '../../chain/recover.js';
import type { ChainService } from '../../chain/chain-service.js';
import { AppError } from '../../platform/errors.js';
import { nodeFault } from '../../chain/rpc-fault.js';
import { shortReason } from '../../settlement/relayer-lane.js';

// What every EVM scheme's verification asks of the chain alike: whether an address signed typed data
// (an EOA's signature checked here, a smart account's asked of the chain), and what to answer when the
// chain cannot be asked at all.

/**
 * The chain could not be asked (every RPC URL refused, timed out or failed): the buyer did nothing wrong,
 * so it is a 503 the seller's client may retry, never a refusal of the payment.
 */
export const chainUnavailable = (err: unknown) => new AppError(503, 'chain_unavailable', `The chain could not be reached to check the payment: ${shortReason(err)}`, undefined, { 'Retry-After': '2' });

/**
 * Whether `from` signed the typed data (whose hash the caller may pass as `digest`, computed its own
 * way). An EOA's signature is checked here, with no RPC call; anything else (an ERC-1271 smart account,
 * an ERC-6492 wrapped one) is asked of the chain (503 when it cannot be asked). libsecp256k1's recovery
 * decides only a match; anything else goes the way it always went (viem's recovery, then the chain), so
 * the fast path changes no verdict.
 */
export async function signedBy(chain: ChainService, from: Address, typedData: RecoverTypedDataAddressParameters, digest?: Hex): Promise<boolean> {
  const fast = recoverSigner(digest ?? hashTypedData(typedData as HashTypedDataParameters), typedData.signature as Hex);
  if (fast !== undefined && isAddressEqual(fast, from)) return true;
  const recovered = await recoverTypedDataAddress(typedData).catch(() => undefined);
  if (recovered !== undefined && isAddressEqual(recovered, from)) return true;
  return chain.publicClient.verifyTypedData({ address: from, ...typedData } as VerifyTypedDataParameters).catch((err) => {
    if (nodeFault(err)) throw chainUnavailable(err);
    return false;
  });
}

/**
 * The name of the custom error a call reverted with, decoded with the contract's ABI (`functionName`: the
 * call, for viem's message), or Error(string)'s text; undefined when the revert is not the contract's.
 */
export function revertName(err: unknown, abi: Abi, functionName: string): string | undefined {
  if (!(err instanceof BaseError)) return undefined;
  const data = (err.walk((e) => typeof (e as { data?: unknown }).data === 'string') as { data?: Hex } | null)?.data;
  if (data && data.length >= 10) {
    try {
      const decoded = new ContractFunctionRevertedError({ abi, data, functionName });
      return decoded.data?.errorName === 'Error' ? String(decoded.reason) : decoded.data?.errorName ?? decoded.reason;
    } catch { /* not one of the contract's */ }
  }
  return undefined;
}
