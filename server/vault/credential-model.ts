import { Schema } from 'mongoose';
import type { SealedSecret } from '../platform/secret-box.js';
import type { CredentialType } from './credential-types.js';

export interface VaultCredentialDoc {
  _id: string; // credentialId
  orgId: string;
  identityId: string;
  name: string;
  type: CredentialType;
  /** The whole `data` object as JSON, sealed under its own data key. */
  sealed: SealedSecret;
  metadata: Record<string, unknown>;
  expiresAt: Date | null;
  /** The codes live inside `sealed`; outside it only their number and the id of this set of codes. */
  backupCodeCount: number;
  backupGeneration: string | null;
  lastUsedAt: Date | null;
  lastRotatedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export const sealedSecretSchema = new Schema<SealedSecret>({
  v: { type: Number, required: true },
  keyVersion: { type: Number, required: true },
  wrappedKey: { type: String, required: true },
  iv: { type: String, required: true },
  ciphertext: { type: String, required: true },
  tag: { type: String, required: true },
}, { _id: false, versionKey: false });

export const credentialSchema = new Schema<VaultCredentialDoc>({
  _id: String,
  orgId: { type: String, required: true },
  identityId: { type: String, required: true },
  name: { type: String, required: true },
  type: { type: String, required: true },
  sealed: { type: sealedSecretSchema, required: true },
  metadata: { type: Schema.Types.Mixed, default: {} },
  expiresAt: { type: Date, default: null },
  backupCodeCount: { type: Number, default: 0 },
  backupGeneration: { type: String, default: null },
  lastRotatedAt: { type: Date, default: null },
  createdAt: { type: Date, required: true },
  updatedAt: { type: Date, required: true },
}, { versionKey: false, minimize: false });
credentialSchema.index({ identityId: 1, name: 1 }, { unique: true });

export const VAULT_COLLECTION = 'vault_credentials';

/**
 * One used backup code: `_id` is `<backupGeneration>:<index>`. Claiming a code is an insert against the
 * primary key, which is atomic on FerretDB too (its findAndModify is not isolated under concurrency), so
 * two concurrent callers can never both get the same index.
 */
export interface BackupClaimDoc {
  _id: string;
  credentialId: string;
  generation: string;
  claimedAt: Date;
}

export const backupClaimSchema = new Schema<BackupClaimDoc>({
  _id: String,
  credentialId: { type: String, required: true },
  generation: { type: String, required: true },
  claimedAt: { type: Date, required: true },
}, { versionKey: false });
backupClaimSchema.index({ generation: 1 });

/** Where the vault keeps sealed values, for `rotate-master-key`. */
export const vaultSealedFields = [{ collection: VAULT_COLLECTION, path: 'sealed' }];
