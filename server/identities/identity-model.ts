import { Schema } from 'mongoose';

export interface IdentityDoc {
  _id: string; // identityId
  orgId: string;
  userId: string;
  name: string;
  displayName: string;
  emailAddress: string;
  scopes: string[];
  keyId: string;
  apiKeyPrefix: string;
  createdAt: Date;
  revokedAt?: Date;
}

export const identitySchema = new Schema<IdentityDoc>({
  _id: String,
  orgId: { type: String, required: true },
  userId: { type: String, required: true },
  name: { type: String, required: true },
  displayName: { type: String, required: true },
  emailAddress: { type: String, required: true, unique: true },
  scopes: { type: [String], required: true },
  keyId: { type: String, required: true },
  apiKeyPrefix: { type: String, required: true },
  createdAt: { type: Date, required: true },
  revokedAt: Date,
}, { versionKey: false });
identitySchema.index({ orgId: 1, createdAt: -1, _id: -1 });
