import { Schema } from 'mongoose';

/**
 * A spend policy of one identity. Amounts are Numbers of atomic USDC units (see amounts.ts for why that
 * is exact); `spentToday` belongs to the UTC day in `day` and includes payments still in flight.
 */
export interface MandateDoc {
  _id: string;
  orgId: string;
  identityId: string;
  maxPerCallAtomic: number;
  dailyCapAtomic: number;
  validUntil: Date;
  /** Host names (or `*.suffix`) the mandate pays; null pays any host. */
  allowedHosts: string[] | null;
  day: string;
  spentToday: number;
  totalSpent: number;
  callCount: number;
  createdAt: Date;
  lastUsedAt?: Date;
  revokedAt?: Date;
}

export const mandateSchema = new Schema<MandateDoc>({
  _id: String,
  orgId: { type: String, required: true },
  identityId: { type: String, required: true },
  maxPerCallAtomic: { type: Number, required: true },
  dailyCapAtomic: { type: Number, required: true },
  validUntil: { type: Date, required: true },
  allowedHosts: { type: [String], default: null },
  day: { type: String, required: true },
  spentToday: { type: Number, required: true },
  totalSpent: { type: Number, required: true },
  callCount: { type: Number, required: true },
  createdAt: { type: Date, required: true },
  lastUsedAt: Date,
  revokedAt: Date,
}, { versionKey: false, minimize: false });
mandateSchema.index({ identityId: 1, createdAt: -1 });
