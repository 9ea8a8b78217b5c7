import { randomBytes } from 'node:crypto';
import { address, createKeyPairSignerFromPrivateKeyBytes, type Address, type KeyPairSigner } from '@solana/kit';
import { findAssociatedTokenPda, TOKEN_PROGRAM_ADDRESS } from '@solana-program/token';
import { Schema, type Connection, type Model } from 'mongoose';
import { formatUsdc } from 'agentgate-x402-wire';
import type { SolanaChain } from '../chain/solana/solana-chain.js';
import type { ActivityLog } from '../platform/activity-log.js';
import { isDuplicateKey } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import type { SealedSecret, SecretBox } from '../platform/secret-box.js';

/**
 * One Solana key per identity, beside its EVM smart account: the same address on every Solana network
 * (a Solana address is its public key). The agent sees the address and its balances, never the key: it
 * is generated here, sealed at rest with the identity in its context (AES-256-GCM under the master key),
 * and opened only to sign a payment.
 */
export interface SolanaWalletDoc {
  _id: string;
  orgId: string;
  identityId: string;
  address: string;
  /** The Ed25519 seed (32 bytes). */
  secretKey: SealedSecret;
  createdAt: Date;
}

const solanaWalletSchema = new Schema<SolanaWalletDoc>({
  _id: String,
  orgId: { type: String, required: true },
  identityId: { type: String, required: true, unique: true },
  address: { type: String, required: true, unique: true },
  secretKey: { type: Schema.Types.Mixed, required: true },
  createdAt: { type: Date, required: true },
}, { versionKey: false });

/** Whose wallet: an identity of an org. */
type WalletOwner = { orgId: string; identityId: string };

/** The wallet on one Solana network, as GET /v0/wallet lists it (a Solana account needs no deployment). */
export interface SolanaNetworkBalance { network: string; caip2: string; address: string; deployed: true | null; balanceUsdc: string | null; balanceUsdcRaw: string | null; unavailable?: string }

export class SolanaWallets {
  readonly wallets: Model<SolanaWalletDoc>;

  constructor(conn: Connection, readonly networks: readonly SolanaChain[], private readonly secrets: SecretBox, private readonly logs: ActivityLog) {
    this.wallets = conn.models.SolanaWallet ?? conn.model<SolanaWalletDoc>('SolanaWallet', solanaWalletSchema, 'solana_wallets');
  }

  get available(): boolean {
    return this.networks.length > 0;
  }

  /** The Solana network by v1 name or CAIP-2 id, if this deployment pays there. */
  on(network: string): SolanaChain | undefined {
    return this.networks.find((n) => n.network === network || n.caip2 === network);
  }

  /**
   * The identity's Solana wallet, created on first use. Concurrent first calls may each generate a key,
   * but the unique index on identityId lets exactly one record in; the others read it back.
   */
  async forIdentity(owner: WalletOwner): Promise<SolanaWalletDoc> {
    const existing = await this.wallets.findOne({ identityId: owner.identityId }).lean();
    if (existing) return existing;
    const seed = randomBytes(32);
    const signer = await createKeyPairSignerFromPrivateKeyBytes(new Uint8Array(seed));
    const doc: SolanaWalletDoc = {
      _id: newId('swal'), orgId: owner.orgId, identityId: owner.identityId, address: signer.address,
      secretKey: this.secrets.seal(seed, this.keyContext(owner.identityId)), createdAt: new Date(),
    };
    try {
      await this.wallets.create(doc);
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const winner = await this.wallets.findOne({ identityId: owner.identityId }).lean();
      if (winner) return winner;
      throw err;
    }
    await this.logs.record({ orgId: owner.orgId, identityId: owner.identityId, action: 'wallet.created', category: 'wallet', description: `Solana wallet ${doc.address} created`, targetType: 'wallet', targetId: doc._id, metadata: { address: doc.address, family: 'solana' } });
    return doc;
  }

  /** The wallet's key as a signer, opened for one payment. */
  signer(wallet: SolanaWalletDoc): Promise<KeyPairSigner> {
    return createKeyPairSignerFromPrivateKeyBytes(new Uint8Array(this.secrets.open(wallet.secretKey, this.keyContext(wallet.identityId))));
  }

  /** The USDC `owner` holds on a network: its associated token account's amount (0 without one). */
  async balance(chain: SolanaChain, owner: string): Promise<bigint> {
    const [account] = await findAssociatedTokenPda({ mint: chain.usdcMint, owner: address(owner), tokenProgram: TOKEN_PROGRAM_ADDRESS });
    const info = await chain.rpc.getAccountInfo(account, { encoding: 'base64' }).send();
    if (!info.value) return 0n;
    const data = Buffer.from(info.value.data[0], 'base64');
    // An SPL token account: the amount is bytes 64..72, little-endian.
    return data.length >= 72 ? data.readBigUInt64LE(64) : 0n;
  }

  /** The wallet's balance on every Solana network (a network whose RPC does not answer says why). */
  async balances(wallet: SolanaWalletDoc): Promise<SolanaNetworkBalance[]> {
    return Promise.all(this.networks.map(async (chain) => {
      try {
        const balance = await this.balance(chain, wallet.address);
        return { network: chain.network, caip2: chain.caip2, address: wallet.address, deployed: true as const, balanceUsdc: formatUsdc(balance), balanceUsdcRaw: balance.toString() };
      } catch (err) {
        return { network: chain.network, caip2: chain.caip2, address: wallet.address, deployed: null, balanceUsdc: null, balanceUsdcRaw: null, unavailable: (err as Error).message.slice(0, 200) };
      }
    }));
  }

  private keyContext(identityId: string): string {
    return `solana-wallet:${identityId}`;
  }
}

export type { Address };
