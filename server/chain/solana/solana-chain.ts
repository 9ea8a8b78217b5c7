import { address, createKeyPairSignerFromBytes, getBase58Encoder, type Address, type ReadonlyUint8Array, type Rpc, type SignatureBytes, type SolanaRpcApi } from '@solana/kit';
import { findSolanaNetwork, type SolanaNetworkInfo } from 'agentgate-x402-wire';
import type { SolanaNetworkSettings } from '../../platform/config.js';
import { ed25519Signer } from './ed25519.js';
import { solanaRpc } from './solana-rpc.js';

/** A fee-payer key: its address, and its signature over a transaction message (ed25519.ts). */
export interface FeePayer {
  readonly address: Address;
  sign(message: ReadonlyUint8Array): SignatureBytes;
}

/**
 * One Solana network as this backend settles on it: its RPC, its USDC mint, and the fee payers that
 * co-sign buyers' transfers and pay their fees. Every process holds every fee-payer key: a buyer's
 * transaction names its fee payer, and may reach any process; Solana has no account nonce, so nothing
 * orders one key's transactions and no lease is needed to send from it (unlike an EVM relayer's lane).
 */
export class SolanaChain {
  private constructor(
    readonly info: SolanaNetworkInfo,
    readonly rpc: Rpc<SolanaRpcApi>,
    readonly rpcUrl: string,
    readonly usdcMint: Address,
    readonly feePayers: readonly FeePayer[],
  ) {}

  static async open(settings: SolanaNetworkSettings): Promise<SolanaChain> {
    const info = findSolanaNetwork(settings.network);
    if (!info) throw new Error(`${settings.network} is not a Solana network`);
    const base58 = getBase58Encoder();
    const feePayers = await Promise.all(settings.feePayerKeys.map(async (key): Promise<FeePayer> => {
      const bytes = new Uint8Array(base58.encode(key));
      // kit checks that the public half is the seed's (a key pasted wrong fails the start, not a payment).
      const { address: feePayer } = await createKeyPairSignerFromBytes(bytes);
      return { address: feePayer, sign: ed25519Signer(bytes.slice(0, 32)) };
    }));
    return new SolanaChain(info, solanaRpc(settings.rpcUrl, { timeoutMs: settings.rpcTimeoutMs }), settings.rpcUrl, address(settings.usdcMint), feePayers);
  }

  /** v1 name ("solana-devnet"): what records and receipts name. */
  get network(): string { return this.info.name; }
  get caip2(): string { return this.info.caip2; }

  feePayer(addressOrName: string): FeePayer | undefined {
    return this.feePayers.find((signer) => signer.address === addressOrName);
  }

  /** A fee payer for a new 402: spread over the pool. */
  pickFeePayer(): FeePayer {
    return this.feePayers[Math.floor(Math.random() * this.feePayers.length)]!;
  }
}
