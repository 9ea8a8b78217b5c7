import { address, createKeyPairSignerFromBytes, createSolanaRpc, getBase58Encoder, type Address, type KeyPairSigner, type Rpc, type SolanaRpcApi } from '@solana/kit';
import { findSolanaNetwork, type SolanaNetworkInfo } from 'agentgate-x402-wire';
import type { SolanaNetworkSettings } from '../../platform/config.js';

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
    readonly feePayers: readonly KeyPairSigner[],
  ) {}

  static async open(settings: SolanaNetworkSettings): Promise<SolanaChain> {
    const info = findSolanaNetwork(settings.network);
    if (!info) throw new Error(`${settings.network} is not a Solana network`);
    const base58 = getBase58Encoder();
    const feePayers = await Promise.all(settings.feePayerKeys.map((key) => createKeyPairSignerFromBytes(new Uint8Array(base58.encode(key)))));
    return new SolanaChain(info, createSolanaRpc(settings.rpcUrl), settings.rpcUrl, address(settings.usdcMint), feePayers);
  }

  /** v1 name ("solana-devnet"): what records and receipts name. */
  get network(): string { return this.info.name; }
  get caip2(): string { return this.info.caip2; }

  feePayer(addressOrName: string): KeyPairSigner | undefined {
    return this.feePayers.find((signer) => signer.address === addressOrName);
  }

  /** A fee payer for a new 402: spread over the pool. */
  pickFeePayer(): KeyPairSigner {
    return this.feePayers[Math.floor(Math.random() * this.feePayers.length)]!;
  }
}
