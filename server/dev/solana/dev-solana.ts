import { createHash } from 'node:crypto';
import {
  address, appendTransactionMessageInstructions, createKeyPairSignerFromPrivateKeyBytes, createTransactionMessage,
  getAddressEncoder, getBase64EncodedWireTransaction, getBase64Encoder, lamports, pipe, setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash, signTransactionMessageWithSigners, type Address, type Blockhash, type KeyPairSigner,
} from '@solana/kit';
import { findAssociatedTokenPda, getCreateAssociatedTokenIdempotentInstruction, getMintEncoder, getMintSize, getMintToCheckedInstruction, TOKEN_PROGRAM_ADDRESS } from '@solana-program/token';
import { findSolanaNetwork, type SolanaNetworkInfo } from 'agentgate-x402-wire';
import { LocalLedger } from './local-ledger.js';
import { LocalSolanaRpc } from './local-rpc.js';

/**
 * The local Solana of `agentgate dev` and the tests: LiteSVM behind the Solana JSON-RPC API, standing in
 * for Solana Devnet (`solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1`), because the official clients sign for
 * the three public Solana networks only. USDC is a 6-decimal SPL Token mint at Devnet USDC's address,
 * whose mint authority only this chain holds, so nothing paid here is valid on the real network.
 */
export const DEV_SOLANA_NETWORK: SolanaNetworkInfo = findSolanaNetwork('solana-devnet')!;

/** Slot time, as on Solana. */
const SLOT_MS = 400;
const SOL = 1_000_000_000n;

/** A dev key of the local Solana, the same on every start (named by role and number). */
export function devSolanaSigner(role: 'mint-authority' | 'fee-payer' | 'buyer' | 'seller', index = 0): Promise<KeyPairSigner> {
  const seed = createHash('sha256').update(`agentgate dev solana ${role} ${index}`).digest();
  return createKeyPairSignerFromPrivateKeyBytes(new Uint8Array(seed));
}

/** The 64-byte secret key (seed then public key) of a dev key: the form SOLANA_*_FEE_PAYER_KEYS take, base58. */
export async function devSolanaSecretKey(role: 'fee-payer' | 'buyer' | 'seller', index = 0): Promise<Uint8Array> {
  const signer = await devSolanaSigner(role, index);
  const bytes = new Uint8Array(64);
  bytes.set(createHash('sha256').update(`agentgate dev solana ${role} ${index}`).digest(), 0);
  bytes.set(getAddressEncoder().encode(signer.address), 32);
  return bytes;
}

/**
 * A transaction that gives `owner` `usdcAtomic` dev USDC: its token account made if missing, then a
 * MintToChecked signed by the dev mint authority (which also pays the fee). base64 wire bytes. Only the
 * local Solana honours it: elsewhere the mint has another authority.
 */
export async function devMintTransaction(mint: Address, owner: Address, usdcAtomic: bigint, lifetime: { blockhash: string; lastValidBlockHeight: bigint | number }): Promise<string> {
  const authority = await devSolanaSigner('mint-authority');
  const [ata] = await findAssociatedTokenPda({ mint, owner, tokenProgram: TOKEN_PROGRAM_ADDRESS });
  const message = pipe(
    createTransactionMessage({ version: 0 }),
    (m) => setTransactionMessageFeePayerSigner(authority, m),
    (m) => setTransactionMessageLifetimeUsingBlockhash({ blockhash: lifetime.blockhash as Blockhash, lastValidBlockHeight: BigInt(lifetime.lastValidBlockHeight) }, m),
    (m) => appendTransactionMessageInstructions([
      getCreateAssociatedTokenIdempotentInstruction({ payer: authority, ata, owner, mint, tokenProgram: TOKEN_PROGRAM_ADDRESS }),
      ...(usdcAtomic > 0n ? [getMintToCheckedInstruction({ mint, token: ata, mintAuthority: authority, amount: usdcAtomic, decimals: 6 })] : []),
    ], m),
  );
  return getBase64EncodedWireTransaction(await signTransactionMessageWithSigners(message));
}

export interface DevSolana {
  rpcUrl: string;
  network: SolanaNetworkInfo;
  usdcMint: Address;
  ledger: LocalLedger;
  /** Gives `owner` `usdcAtomic` USDC (a MintToChecked into its token account, made if missing) and SOL for fees. */
  fund(owner: Address, usdcAtomic: bigint, solLamports?: bigint): Promise<void>;
  /** The USDC balance of `owner`'s associated token account (0 if it has none). */
  usdcBalance(owner: Address): Promise<bigint>;
  stop(): Promise<void>;
}

/**
 * `landAtSlot`: sent transactions land when their slot closes (every `slotMs`), as on Solana; by default
 * they land on arrival, the instant tests and local development want.
 */
export async function startDevSolana(options: { port?: number; slotMs?: number; network?: SolanaNetworkInfo; landAtSlot?: boolean } = {}): Promise<DevSolana> {
  const network = options.network ?? DEV_SOLANA_NETWORK;
  const ledger = new LocalLedger({ landAtSlot: options.landAtSlot });
  const usdcMint = address(network.usdcMint);
  const authority = await devSolanaSigner('mint-authority');
  // The mint, at the real network's USDC address, with our authority.
  const mintData = getMintEncoder().encode({ mintAuthority: authority.address, supply: 0n, decimals: 6, isInitialized: true, freezeAuthority: null });
  ledger.setAccount({ address: usdcMint, data: new Uint8Array(mintData), executable: false, lamports: lamports(ledger.svm.minimumBalanceForRentExemption(BigInt(getMintSize()))), programAddress: TOKEN_PROGRAM_ADDRESS, space: BigInt(getMintSize()) });
  ledger.airdrop(authority.address, 1_000n * SOL);

  const rpc = new LocalSolanaRpc(ledger, network);
  const rpcUrl = await rpc.listen(options.port ?? 0);
  ledger.startClock(options.slotMs ?? SLOT_MS);

  const tokenAccountOf = async (owner: Address) => (await findAssociatedTokenPda({ mint: usdcMint, owner, tokenProgram: TOKEN_PROGRAM_ADDRESS }))[0];

  const fund = async (owner: Address, usdcAtomic: bigint, solLamports = SOL) => {
    if (solLamports > 0n) ledger.airdrop(owner, solLamports);
    const wire = await devMintTransaction(usdcMint, owner, usdcAtomic, ledger.latestBlockhash());
    const outcome = ledger.process(new Uint8Array(getBase64Encoder().encode(wire)));
    if (outcome.dropped || outcome.landed?.err) throw new Error(`funding ${owner} failed: ${JSON.stringify(outcome.dropped ?? outcome.landed?.err)}`);
  };

  const usdcBalance = async (owner: Address) => {
    const account = ledger.account(await tokenAccountOf(owner));
    if (!account) return 0n;
    // The token account's amount: bytes 64..72, little-endian.
    return new DataView(account.data.buffer, account.data.byteOffset).getBigUint64(64, true);
  };

  return {
    rpcUrl, network, usdcMint, ledger, fund, usdcBalance,
    stop: async () => { ledger.stop(); await rpc.close(); },
  };
}
