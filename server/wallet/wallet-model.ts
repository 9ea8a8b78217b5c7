import { Schema } from 'mongoose';
import type { SealedSecret } from '../platform/secret-box.js';

/**
 * One smart-account wallet per identity. The owner key is sealed with the identity in its context, so a
 * sealed key copied onto another identity's record does not open.
 */
export interface WalletDoc {
  _id: string;
  orgId: string;
  identityId: string;
  /** The smart account (counterfactual until deployed), checksummed. */
  address: string;
  ownerAddress: string;
  ownerKey: SealedSecret;
  salt: string;
  factoryAddress: string;
  network: string;
  chainId: number;
  createdAt: Date;
  /** When the account was deployed on the default network (`network`). */
  deployedAt?: Date;
  /** When it was deployed on each other network, by `eip155_<chain id>`. */
  deployedOn?: Record<string, Date>;
  /** The one-time USDC approval of Permit2 (x402 `upto` payments), sent by the relayer: when, and its transaction. */
  permit2ApprovedAt?: Date;
  permit2ApprovalTx?: string;
}

export const walletSchema = new Schema<WalletDoc>({
  _id: String,
  orgId: { type: String, required: true },
  identityId: { type: String, required: true, unique: true },
  address: { type: String, required: true, unique: true },
  ownerAddress: { type: String, required: true },
  ownerKey: { type: Schema.Types.Mixed, required: true },
  salt: { type: String, required: true },
  factoryAddress: { type: String, required: true },
  network: { type: String, required: true },
  chainId: { type: Number, required: true },
  createdAt: { type: Date, required: true },
  deployedAt: Date,
  deployedOn: { type: Schema.Types.Mixed },
  permit2ApprovedAt: Date,
  permit2ApprovalTx: String,
}, { versionKey: false });
