import { Schema } from 'mongoose';

/** A spend policy of one identity. Caps are Numbers of atomic USDC units (see amounts.ts for why that is exact). */
export interface MandateDoc {
  _id: string;
  orgId: string;
  identityId: string;
  maxPerCallAtomic: number;
  dailyCapAtomic: number;
  validUntil: Date;
  /** Host names (or `*.suffix`) the mandate pays; null pays any host. */
  allowedHosts: string[] | null;
  createdAt: Date;
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
  createdAt: { type: Date, required: true },
  revokedAt: Date,
}, { versionKey: false, minimize: false });
mandateSchema.index({ identityId: 1, createdAt: -1 });

/**
 * One step of a mandate's spend for one UTC day: a reservation (+amount) or a release (-amount). The
 * `_id` is `<mandateId>:<day>:<seq>`, so the unique `_id` index lets exactly one writer append step
 * `seq`; `spentAfter` is computed from step `seq - 1`, which makes the chain a serial history of the day
 * even when writers race. (FerretDB 1.x does not make a conditional `$inc` atomic; unique inserts are.)
 */
export interface MandateLedgerDoc {
  _id: string;
  mandateId: string;
  day: string;
  seq: number;
  delta: number;
  spentAfter: number;
  reservationId: string;
  createdAt: Date;
}

export const mandateLedgerSchema = new Schema<MandateLedgerDoc>({
  _id: String,
  mandateId: { type: String, required: true },
  day: { type: String, required: true },
  seq: { type: Number, required: true },
  delta: { type: Number, required: true },
  spentAfter: { type: Number, required: true },
  reservationId: { type: String, required: true },
  createdAt: { type: Date, required: true },
}, { versionKey: false });
mandateLedgerSchema.index({ mandateId: 1, day: 1, seq: -1 });

/** A reservation that became a payment; `_id` is the reservation id, so committing twice counts once. */
export interface MandateSpendDoc {
  _id: string;
  mandateId: string;
  amount: number;
  createdAt: Date;
}

export const mandateSpendSchema = new Schema<MandateSpendDoc>({
  _id: String,
  mandateId: { type: String, required: true },
  amount: { type: Number, required: true },
  createdAt: { type: Date, required: true },
}, { versionKey: false });
mandateSpendSchema.index({ mandateId: 1 });
