import { getBase64Decoder, type Transaction } from '@solana/kit';
import type { SolanaChain } from '../../../../chain/solana/solana-chain.js';
import type { Logger } from '../../../../platform/logger.js';
import type { SettleOutcome } from '../../../../settlement/settler.js';
import { outcomeOnChain } from './chain.js';
import { getTransactionBytes, simulationFailure, type SvmRefused, type SvmVerified } from './verify.js';

// Settling an `exact` payment on Solana: the buyer's transaction co-signed by the fee payer it names, sent,
// and waited for. No lane, no nonce: a fee payer's transactions are not ordered, so any process sends.

/** How often a sent transaction's status is asked while its buyer waits. */
const STATUS_POLL_MS = 150;
const base64 = getBase64Decoder();

/**
 * The transaction with its fee payer's signature: complete, and named by it (Ed25519 is deterministic).
 * The fee payer is already the first signer, its signature empty (verify.ts), so it keeps its place.
 */
export function cosign(verified: SvmVerified): Transaction {
  const tx = verified.transaction;
  return { ...tx, signatures: { ...tx.signatures, [verified.feePayer.address]: verified.feePayer.sign(tx.messageBytes) } } as Transaction;
}

/** base64 of a transaction's wire bytes (what sendTransaction takes, and what a record keeps). */
export const wireBase64 = (tx: Transaction) => base64.decode(getTransactionBytes(tx));

/** Sends a complete transaction without preflight (it was simulated when verified); an error is logged, the status decides. */
export async function send(chain: SolanaChain, wire: string, log: Logger, id: string): Promise<void> {
  try {
    await chain.rpc.sendTransaction(wire as never, { encoding: 'base64', skipPreflight: true, maxRetries: 0n }).send();
  } catch (err) {
    // It may have reached a node all the same: the status says.
    log.warn({ network: chain.caip2, transaction: id, err: (err as Error).message }, 'sending a Solana payment failed; asking its status');
  }
}

/**
 * Sends the complete transaction with the node's preflight (it simulates it first and forwards it only if
 * it would succeed, so a failing transaction costs the fee payer nothing) and waits for the chain to
 * process it: `confirmed` settles, an error on chain fails (nothing moved), and one whose blockhash expired
 * without landing never will (nothing moved). A preflight refusal comes back as `refused`: nothing was
 * sent. Past `timeoutMs` it is unconfirmed: the record stays open and reconciliation finishes it.
 */
export async function sendAndConfirm(chain: SolanaChain, signed: Transaction, id: string, blockhash: string, log: Logger, timeoutMs: number): Promise<SettleOutcome | { refused: SvmRefused }> {
  try {
    await chain.rpc.sendTransaction(wireBase64(signed) as never, { encoding: 'base64', preflightCommitment: 'confirmed', maxRetries: 0n }).send();
  } catch (err) {
    const preflight = preflightError(err);
    if (preflight !== undefined) return { refused: simulationRefusal(preflight, signed) };
    // It may have reached a node all the same: the status says.
    log.warn({ network: chain.caip2, transaction: id, err: (err as Error).message }, 'sending a Solana payment failed; asking its status');
  }
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const settled = await outcomeOnChain(chain, id, blockhash).catch(() => undefined);
    if (settled) return settled;
    await new Promise((resolve) => setTimeout(resolve, STATUS_POLL_MS));
  }
  return { ok: false, reason: 'settle_unconfirmed', message: `the transaction ${id} was sent and is not confirmed yet`, txHash: id as never, unconfirmed: true };
}

/**
 * A node's preflight refusal (JSON-RPC -32002: the transaction failed simulation, nothing was forwarded),
 * as @solana/kit raises it: the transaction error is its cause. Undefined: not one.
 */
function preflightError(err: unknown): unknown {
  const e = err as { context?: { __code?: number }; cause?: { message?: string; context?: { __code?: number } } } | undefined;
  if (e?.context?.__code !== -32002) return undefined;
  const cause = e.cause?.message ?? 'the transaction failed simulation';
  // Already processed: it landed (a send whose answer was lost); its status, not a refusal, says how.
  if (/already been processed/i.test(cause)) return undefined;
  return /blockhash not found/i.test(cause) ? 'BlockhashNotFound' : cause;
}

function simulationRefusal(err: unknown, tx: Transaction): SvmRefused {
  return simulationFailure(err, Object.keys(tx.signatures)[1] ?? '');
}
