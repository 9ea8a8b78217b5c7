import {
  appendTransactionMessageInstructions, createNoopSigner, createTransactionMessage, generateKeyPairSigner, getBase58Decoder,
  getBase64EncodedWireTransaction, partiallySignTransactionMessageWithSigners, pipe, setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash, type Address, type Blockhash, type Instruction, type KeyPairSigner,
} from '@solana/kit';
import { getSetComputeUnitLimitInstruction, getSetComputeUnitPriceInstruction } from '@solana-program/compute-budget';
import { findAssociatedTokenPda, getTransferCheckedInstruction, TOKEN_PROGRAM_ADDRESS } from '@solana-program/token';
import { MEMO_PROGRAM_ADDRESS } from 'agentgate-x402-wire';
import { devSolanaSecretKey, devSolanaSigner, startDevSolana, type DevSolana } from '../../server/dev/solana/dev-solana.js';

/** The local Solana and the backend variables that settle on it with the dev fee payer. */
export async function solanaForTests(): Promise<{ chain: DevSolana; env: Record<string, string>; feePayer: KeyPairSigner }> {
  const chain = await startDevSolana();
  const feePayer = await devSolanaSigner('fee-payer');
  chain.ledger.airdrop(feePayer.address, 100_000_000_000n);
  return {
    chain, feePayer,
    env: { SOLANA_DEVNET_RPC_URL: chain.rpcUrl, SOLANA_DEVNET_FEE_PAYER_KEYS: getBase58Decoder().decode(await devSolanaSecretKey('fee-payer')) },
  };
}

/** A new Solana account holding `usdcAtomic` USDC (and SOL), or only a USDC token account (0). */
export async function solanaAccount(chain: DevSolana, usdcAtomic = 0n): Promise<KeyPairSigner> {
  const signer = await generateKeyPairSigner();
  await chain.fund(signer.address, usdcAtomic, usdcAtomic > 0n ? 1_000_000_000n : 0n);
  return signer;
}

/** What a hand-made payment changes from the one the official client builds (each a way to cheat). */
export interface PaymentTweaks {
  amount?: bigint;
  mint?: Address;
  /** Whose token account receives it (default: payTo's). */
  destinationOwner?: Address;
  computeUnits?: number;
  microLamports?: bigint;
  /** Instructions after the transfer. */
  extra?: Instruction[];
  blockhash?: { blockhash: string; lastValidBlockHeight: number };
}

/**
 * A payment transaction as the exact scheme's client builds it (compute-unit limit, price, TransferChecked,
 * memo), partially signed by the buyer with the fee payer's signature left to the facilitator, base64.
 */
export async function buildSolanaPayment(chain: DevSolana, buyer: KeyPairSigner, feePayer: Address, payTo: Address, amount: bigint, tweaks: PaymentTweaks = {}): Promise<string> {
  const mint = tweaks.mint ?? chain.usdcMint;
  const [source] = await findAssociatedTokenPda({ mint, owner: buyer.address, tokenProgram: TOKEN_PROGRAM_ADDRESS });
  const [destination] = await findAssociatedTokenPda({ mint, owner: tweaks.destinationOwner ?? payTo, tokenProgram: TOKEN_PROGRAM_ADDRESS });
  const lifetime = tweaks.blockhash ?? chain.ledger.latestBlockhash();
  const message = pipe(
    createTransactionMessage({ version: 0 }),
    (m) => setTransactionMessageFeePayerSigner(createNoopSigner(feePayer), m),
    (m) => setTransactionMessageLifetimeUsingBlockhash({ blockhash: lifetime.blockhash as Blockhash, lastValidBlockHeight: BigInt(lifetime.lastValidBlockHeight) }, m),
    (m) => appendTransactionMessageInstructions([
      getSetComputeUnitLimitInstruction({ units: tweaks.computeUnits ?? 20_000 }),
      getSetComputeUnitPriceInstruction({ microLamports: tweaks.microLamports ?? 1n }),
      getTransferCheckedInstruction({ source, mint, destination, authority: buyer, amount: tweaks.amount ?? amount, decimals: 6 }),
      { programAddress: MEMO_PROGRAM_ADDRESS as Address, accounts: [], data: new TextEncoder().encode(crypto.randomUUID()) },
      ...(tweaks.extra ?? []),
    ], m),
  );
  return getBase64EncodedWireTransaction(await partiallySignTransactionMessageWithSigners(message));
}

export { startDevSolana };
