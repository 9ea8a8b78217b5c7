import { getAddress, parseEventLogs, type Address, type Hex } from 'viem';
import { usdcAbi, type Authorization } from '../chain/usdc.js';
import type { ChainService } from '../chain/chain-service.js';
import type { PaymentDoc } from './models.js';
import type { JwsReceipt } from '../../middleware/offer-receipt.js';

/** How one payment's settlement ended, for either door (redeem, the facilitator API). */
export type SettlementResult =
  /** amount and maxAmount: an `upto` payment's charge and the most the buyer allowed (atomic units). */
  | { ok: true; paymentId: string; txHash: string; payer: string; offerReceipt?: JwsReceipt; amount?: string; maxAmount?: string }
  | { ok: false; reason: string; message: string; payer?: string; txHash?: string; unavailable?: true };

export const authorizationOf = (doc: Pick<PaymentDoc, 'authorization'>): Authorization => ({
  from: getAddress(doc.authorization.from),
  to: getAddress(doc.authorization.to),
  value: BigInt(doc.authorization.value),
  validAfter: BigInt(doc.authorization.validAfter),
  validBefore: BigInt(doc.authorization.validBefore),
  nonce: doc.authorization.nonce as Hex,
});

/** The transaction that used this authorization on chain, if any (AuthorizationUsed event). */
export async function findSettlementTx(chain: ChainService, authorizer: Address, nonce: Hex, fromBlock: bigint): Promise<Hex | undefined> {
  const logs = await chain.publicClient.getContractEvents({
    address: chain.usdc.address,
    abi: usdcAbi,
    eventName: 'AuthorizationUsed',
    args: { authorizer, nonce },
    fromBlock,
    toBlock: 'latest',
  }).catch(async () => {
    // Some nodes refuse indexed-argument filters over long ranges: fall back to decoding every log.
    const raw = await chain.publicClient.getLogs({ address: chain.usdc.address, fromBlock, toBlock: 'latest' });
    return parseEventLogs({ abi: usdcAbi, logs: raw, eventName: 'AuthorizationUsed' })
      .filter((l) => (l.args as { authorizer: Address }).authorizer.toLowerCase() === authorizer.toLowerCase() && (l.args as { nonce: Hex }).nonce === nonce);
  });
  return logs[0]?.transactionHash ?? undefined;
}
