import type { Signature } from '@solana/kit';
import { EXACT_SVM_REASONS as R } from 'agentgate-x402-wire';
import type { SolanaChain } from '../../../../chain/solana/solana-chain.js';
import type { SettleOutcome } from '../../../../settlement/settler.js';

// What the chain says of an `exact` payment on Solana once sent: landed (and how), or dropped for good
// because its blockhash expired first. Both settlement (settle.ts) and reconciliation ask it.

const json = (value: unknown) => JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? v.toString() : v));

/** What the chain did with a transaction: undefined while it may still land. */
export async function outcomeOnChain(chain: SolanaChain, id: string, blockhash: string): Promise<SettleOutcome | undefined> {
  const landed = await statusOf(chain, id);
  if (landed) return landed;
  // Not seen: it can still land while its blockhash lives (it was valid at `confirmed` when verified).
  const valid = await chain.rpc.isBlockhashValid(blockhash as never, { commitment: 'confirmed' }).send();
  if (valid.value) return undefined;
  // Expired: one last look (a status seen late), then it never will land.
  return await statusOf(chain, id) ?? { ok: false, reason: R.transactionFailed, message: "the transaction's blockhash expired before it landed; nothing moved", txHash: id as never };
}

async function statusOf(chain: SolanaChain, id: string): Promise<SettleOutcome | undefined> {
  const { value } = await chain.rpc.getSignatureStatuses([id as Signature], { searchTransactionHistory: true }).send();
  const status = value[0];
  if (!status || (status.confirmationStatus !== 'confirmed' && status.confirmationStatus !== 'finalized')) return undefined;
  if (status.err) return { ok: false, reason: R.transactionFailed, message: `the transaction failed on chain: ${json(status.err)}`, txHash: id as never };
  return { ok: true, txHash: id as never, batchSize: 1 };
}
