import { Schema } from 'mongoose';
import type { SealedSecret } from '../platform/secret-box.js';

/** One Ed25519 key pair per identity; `_id` is the identityId, so there can never be two. */
export interface IdentityKeyDoc {
  _id: string;
  orgId: string;
  publicKey: string; // base64
  sealedSeed: SealedSecret;
  createdAt: Date;
}

export const identityKeySchema = new Schema<IdentityKeyDoc>({
  _id: String,
  orgId: { type: String, required: true },
  publicKey: { type: String, required: true },
  sealedSeed: { type: Schema.Types.Mixed, required: true },
  createdAt: { type: Date, required: true },
}, { versionKey: false });

export const IDENTITY_KEYS_COLLECTION = 'identity_did_keys';

export const identityKeySealedFields = [{ collection: IDENTITY_KEYS_COLLECTION, path: 'sealedSeed' }];
