import {
  address, decompileTransactionMessageFetchingLookupTables, getBase58Decoder, getBase64Encoder, getCompiledTransactionMessageDecoder,
  getTransactionDecoder, getTransactionEncoder, type Address, type Transaction,
} from '@solana/kit';
import { parseSetComputeUnitLimitInstruction, parseSetComputeUnitPriceInstruction } from '@solana-program/compute-budget';
import { findAssociatedTokenPda, parseTransferCheckedInstruction } from '@solana-program/token';
import {
  COMPUTE_BUDGET_PROGRAM_ADDRESS, EXACT_SVM_MAX_COMPUTE_UNIT_PRICE, EXACT_SVM_MAX_COMPUTE_UNITS, EXACT_SVM_MAX_INSTRUCTIONS, EXACT_SVM_REASONS as R,
  LIGHTHOUSE_PROGRAM_ADDRESS, MEMO_PROGRAM_ADDRESS, TOKEN_2022_PROGRAM_ADDRESS, TOKEN_PROGRAM_ADDRESS,
} from 'agentgate-x402-wire';
import { verifySignatureOf } from '../../../../chain/solana/ed25519.js';
import type { FeePayer, SolanaChain } from '../../../../chain/solana/solana-chain.js';
import { TtlCache } from '../../../../platform/ttl-cache.js';

// The checks of an `exact` payment on Solana, in the scheme's order (scheme_exact_svm.md, as @x402/svm
// runs them): whose fee payer, which signatures, which instructions, which transfer, and what the chain
// says of it. Nothing here moves money: settle.ts co-signs and sends what passes.

/** What a payment must pay: the requirements' terms, already bounded to this seller (facilitator.ts). */
export interface SvmTerms { payTo: string; amountAtomic: bigint; mint: Address; feePayer: string; memo?: string }

export type SvmVerified = { ok: true; payer: string; transaction: Transaction; feePayer: FeePayer; blockhash: string };
export type SvmRefused = { ok: false; reason: string; message: string; payer?: string };

const wireDecoder = getTransactionDecoder();
const wireEncoder = getTransactionEncoder();
const messageDecoder = getCompiledTransactionMessageDecoder();
const base64 = getBase64Encoder();
const base58 = getBase58Decoder();

const refuse = (reason: string, message: string, payer?: string): SvmRefused => ({ ok: false, reason, message, ...(payer ? { payer } : {}) });

/** The wire transaction of a payload, or why it cannot be read. */
export function decodeSvmTransaction(encoded: unknown): Transaction | undefined {
  if (typeof encoded !== 'string' || encoded.length > 2_000) return undefined;
  try {
    return wireDecoder.decode(new Uint8Array(base64.encode(encoded)));
  } catch {
    return undefined;
  }
}

/** The transaction's id once its fee payer has signed: the fee payer's signature, base58. */
export function transactionId(tx: Transaction): string {
  const first = Object.values(tx.signatures)[0];
  return first ? base58.decode(first) : '';
}

export async function verifySvmPayment(tx: Transaction, terms: SvmTerms, chain: SolanaChain, options: { simulate: boolean }): Promise<SvmVerified | SvmRefused> {
  const feePayer = chain.feePayer(terms.feePayer);
  if (!feePayer) return refuse(R.feePayerNotManaged, `extra.feePayer ${terms.feePayer} is not one of this facilitator's fee payers on ${chain.caip2}`);

  let compiled;
  try { compiled = messageDecoder.decode(tx.messageBytes); } catch { return refuse(R.couldNotDecode, 'the transaction message cannot be decoded'); }
  // Signatures: the fee payer's (first, empty until settlement) and the client's, and no one else's.
  const signers = Object.keys(tx.signatures);
  if (signers[0] !== feePayer.address) return refuse(R.feePayerMismatch, `the transaction's fee payer is ${signers[0] ?? 'missing'}, not extra.feePayer ${feePayer.address}`);
  if (signers.length !== 2) return refuse(R.excessiveSigners, `the transaction needs ${signers.length} signatures; only the client's and the fee payer's are allowed`);
  for (const signer of signers.slice(1)) {
    const signature = tx.signatures[signer as Address];
    const valid = signature ? verifySignatureOf(signer as Address, signature, tx.messageBytes) : false;
    if (!valid) return refuse(R.signatureInvalid, `the signature of ${signer} is ${signature ? 'not valid' : 'missing'}`);
  }
  const payer = signers[1]!;

  // Lookup tables resolved, then the instructions as the chain will run them.
  let message;
  try { message = await decompileTransactionMessageFetchingLookupTables(compiled, chain.rpc); } catch (err) {
    return refuse(R.couldNotDecode, `the transaction's address lookup tables cannot be resolved: ${(err as Error).message}`, payer);
  }
  const instructions = message.instructions;
  if (instructions.length < 3 || instructions.length > EXACT_SVM_MAX_INSTRUCTIONS) {
    return refuse(R.instructionsLength, `the transaction has ${instructions.length} instructions: a compute-unit limit, a compute-unit price, the transfer and at most ${EXACT_SVM_MAX_INSTRUCTIONS - 3} memo or Lighthouse instructions`, payer);
  }
  // The fee payer pays fees and nothing else: it is in no instruction's accounts.
  if (instructions.some((ix) => (ix.accounts ?? []).some((meta) => meta.address === feePayer.address))) {
    return refuse(R.feePayerInInstruction, "the fee payer is one of an instruction's accounts", payer);
  }

  const [limitIx, priceIx, transferIx, ...rest] = instructions as [typeof instructions[number], typeof instructions[number], typeof instructions[number], ...typeof instructions];
  if (limitIx.programAddress !== COMPUTE_BUDGET_PROGRAM_ADDRESS || limitIx.data?.[0] !== 2) return refuse(R.computeLimitInstruction, 'the first instruction must set the compute-unit limit', payer);
  const units = parseSetComputeUnitLimitInstruction(limitIx as never).data.units;
  if (units > EXACT_SVM_MAX_COMPUTE_UNITS) return refuse(R.computeLimitTooHigh, `the compute-unit limit ${units} is above ${EXACT_SVM_MAX_COMPUTE_UNITS}`, payer);
  if (priceIx.programAddress !== COMPUTE_BUDGET_PROGRAM_ADDRESS || priceIx.data?.[0] !== 3) return refuse(R.computePriceInstruction, 'the second instruction must set the compute-unit price', payer);
  const price = BigInt(parseSetComputeUnitPriceInstruction(priceIx as never).data.microLamports);
  if (price > EXACT_SVM_MAX_COMPUTE_UNIT_PRICE) return refuse(R.computePriceTooHigh, `the compute-unit price ${price} micro-lamports is above ${EXACT_SVM_MAX_COMPUTE_UNIT_PRICE}`, payer);

  // The one transfer: TransferChecked of the mint, to the payTo's associated token account, of the amount.
  const tokenProgram = transferIx.programAddress;
  if ((tokenProgram !== TOKEN_PROGRAM_ADDRESS && tokenProgram !== TOKEN_2022_PROGRAM_ADDRESS) || transferIx.data?.[0] !== 12 || (transferIx.accounts ?? []).length < 4) {
    return refuse(R.noTransferInstruction, 'the third instruction must be an SPL Token or Token-2022 TransferChecked', payer);
  }
  let transfer;
  try { transfer = parseTransferCheckedInstruction(transferIx as never); } catch { return refuse(R.noTransferInstruction, 'the transfer instruction cannot be read', payer); }
  const accounts = transfer.accounts as unknown as Record<'source' | 'mint' | 'destination' | 'authority', { address: string }>;
  if (chain.feePayer(accounts.authority.address)) return refuse(R.feePayerTransferringFunds, 'the transfer is authorized by a fee payer of this facilitator', payer);
  if (accounts.mint.address !== terms.mint) return refuse(R.mintMismatch, `the transfer moves the mint ${accounts.mint.address}, not ${terms.mint}`, payer);
  const expected = await associatedTokenAccount(terms.payTo, terms.mint, tokenProgram);
  if (accounts.destination.address !== expected) return refuse(R.recipientMismatch, `the transfer goes to ${accounts.destination.address}, not payTo's token account ${expected}`, payer);
  if (BigInt(transfer.data.amount) !== terms.amountAtomic) return refuse(R.amountMismatch, `the transfer is of ${transfer.data.amount}, not ${terms.amountAtomic}`, payer);

  // After it, only memos (the seller's, or the client's nonce) and Lighthouse assertions.
  if (rest.some((ix) => ix.programAddress !== MEMO_PROGRAM_ADDRESS && ix.programAddress !== LIGHTHOUSE_PROGRAM_ADDRESS)) {
    return refuse(R.unknownOptionalInstruction, 'after the transfer, a payment may carry only memo and Lighthouse instructions', payer);
  }
  if (terms.memo !== undefined) {
    const memos = rest.filter((ix) => ix.programAddress === MEMO_PROGRAM_ADDRESS);
    if (memos.length !== 1) return refuse(R.memoCount, `the payment must carry exactly one memo, the seller's; it carries ${memos.length}`, payer);
    if (new TextDecoder().decode(new Uint8Array(memos[0]!.data ?? [])) !== terms.memo) return refuse(R.memoMismatch, "the memo is not the seller's extra.memo", payer);
  }

  const blockhash = message.lifetimeConstraint && 'blockhash' in message.lifetimeConstraint ? message.lifetimeConstraint.blockhash : '';
  if (options.simulate) {
    const simulated = await simulateSvmPayment(tx, chain, payer);
    if (simulated) return simulated;
  }
  return { ok: true, payer, transaction: tx, feePayer, blockhash };
}

/**
 * The associated token account of an owner for a mint: where a payment to the owner must go. Deriving it
 * hashes and tests candidate points on the curve (about 0.7 ms of the event loop, half a payment's checks),
 * and it never changes: kept per (owner, mint, token program), as many as a busy facilitator's sellers.
 */
function associatedTokenAccount(owner: string, mint: Address, tokenProgram: string): Promise<string> {
  return tokenAccounts.through(`${owner} ${mint} ${tokenProgram}`, async () => (await findAssociatedTokenPda({ mint, owner: address(owner), tokenProgram: address(tokenProgram) }))[0]);
}
/** A derivation never goes stale: no expiry, the oldest of 10,000 dropped first. */
const tokenAccounts = new TtlCache<string>(Number.POSITIVE_INFINITY, 10_000);

/**
 * The scheme's last check: the chain runs the transaction (without the fee payer's signature) and
 * changes nothing. Undefined: it would succeed; else why not (an expired blockhash said as such).
 */
export async function simulateSvmPayment(tx: Transaction, chain: SolanaChain, payer: string): Promise<SvmRefused | undefined> {
  const wire = Buffer.from(getTransactionBytes(tx)).toString('base64');
  let simulated;
  try {
    simulated = await chain.rpc.simulateTransaction(wire as never, { encoding: 'base64', sigVerify: false, replaceRecentBlockhash: false, commitment: 'confirmed' }).send();
  } catch (err) {
    return refuse(R.simulationFailed, `the chain could not simulate the transaction: ${(err as Error).message}`, payer);
  }
  return simulated.value.err ? simulationFailure(simulated.value.err, payer) : undefined;
}

/** A simulation's (or a node's preflight's) transaction error as the refusal; an expired blockhash said as such. */
export function simulationFailure(err: unknown, payer: string): SvmRefused {
  if (err === 'BlockhashNotFound') return refuse(R.simulationFailed, "the transaction's blockhash has expired (a blockhash lives about 60-90 s): sign a new payment", payer);
  return refuse(R.simulationFailed, `the transaction fails on chain: ${JSON.stringify(err, (_, v) => (typeof v === 'bigint' ? v.toString() : v))}`, payer);
}

/** The wire bytes of a transaction. */
export function getTransactionBytes(tx: Transaction): Uint8Array {
  return new Uint8Array(wireEncoder.encode(tx));
}
