import { Schema, type Connection, type Model } from 'mongoose';
import type { Collection } from 'mongodb';
import { GroupedInserts } from '../platform/group-commit.js';
import { findByIds } from '../platform/find-by-ids.js';
import type { JwsReceipt } from 'agentgate-x402-wire';
import type { PaymentDoc, SignedReceipt } from './models.js';

/**
 * A settlement as its buyer was told it: the transaction, the time and the signed receipts, written by a
 * unique insert keyed by the payment id before the buyer's answer goes out.
 *
 * Why not only the payment record: the record is an update, and on the embedded engine (FerretDB 1.24)
 * an update costs about five times an insert (a transaction of its own per statement, whatever the
 * command carries), so the records of a busy second waited ~30 ms for their turn; inserts of a whole
 * settlement batch go in one command. The record is then brought up to date from this entry in the
 * background (records.ts), and reads of a record still open show it settled meanwhile.
 *
 * It also makes "recorded once" a unique insert: of the settler and reconciliation racing for one
 * payment, the first entry stands, and both write the record from it, so the receipt on the record is
 * always the one the buyer got. A process that dies between the entry and the record leaves the record
 * open with an entry: reconciliation (reconcile.ts) writes the record from it, without going to the chain.
 */
export interface SettledPaymentDoc {
  _id: string; // the payment id
  orgId: string;
  /** The payment's scheme and network (v1 name): what usage counts settlements by (server/usage). Absent on entries written before. */
  scheme?: string;
  network?: string;
  txHash: string;
  settledAt: Date;
  signedReceipt: SignedReceipt;
  offerReceipt?: JwsReceipt;
  /** The payment.received outbox entry the record gets (the endpoint had a webhook when it settled). */
  webhook?: NonNullable<PaymentDoc['webhook']>;
}

const settledPaymentSchema = new Schema<SettledPaymentDoc>({
  _id: String,
  orgId: { type: String, required: true },
  scheme: String,
  network: String,
  txHash: { type: String, default: '' }, // an upto zero charge has no transaction
  settledAt: { type: Date, required: true },
  signedReceipt: { type: Schema.Types.Mixed, required: true },
  offerReceipt: Schema.Types.Mixed,
  webhook: Schema.Types.Mixed,
}, { versionKey: false });
// An org's settlements in a month (usage: server/usage/settlement-counts.ts).
settledPaymentSchema.index({ orgId: 1, settledAt: 1 });

export const settledPaymentModel = (conn: Connection): Model<SettledPaymentDoc> =>
  (conn.models.SettledPayment as Model<SettledPaymentDoc>) ?? conn.model<SettledPaymentDoc>('SettledPayment', settledPaymentSchema, 'payment_settlements');

export class SettledPayments {
  private readonly model: Model<SettledPaymentDoc>;
  private readonly inserts: GroupedInserts<SettledPaymentDoc>;

  constructor(conn: Connection, onCommand?: (size: number) => void) {
    this.model = settledPaymentModel(conn);
    this.inserts = new GroupedInserts(() => this.model.collection as unknown as Collection<SettledPaymentDoc>, { onCommand });
  }

  /** Records a settlement; the entry that stands for the payment is returned: this one, or the one recorded first. */
  async record(entry: SettledPaymentDoc): Promise<SettledPaymentDoc> {
    if ((await this.inserts.insert(entry)) === 'inserted') return entry;
    const first = await this.model.findById(entry._id).lean();
    if (!first) throw new Error(`settlement of ${entry._id} refused as a duplicate, and not found`);
    return first;
  }

  /** The entries of these payments, by payment id (those that have one). */
  async of(paymentIds: string[]): Promise<Map<string, SettledPaymentDoc>> {
    const found = await findByIds(paymentIds, (id) => this.model.findById(id).lean());
    return new Map(found.map((d) => [d._id, d]));
  }
}

/** The payment record as its settlement makes it. */
export function settledRecord(payment: PaymentDoc, entry: SettledPaymentDoc): PaymentDoc {
  const { failureReason: _failure, holdExpiresAt: _expiry, ...rest } = payment;
  return { ...rest, ...settlementFields(entry) };
}

/** What a settlement sets on the payment record. */
export function settlementFields(entry: SettledPaymentDoc): Pick<PaymentDoc, 'status' | 'txHash' | 'settledAt' | 'signedReceipt' | 'offerReceipt' | 'webhook' | 'webhookUndispatched'> {
  return {
    status: 'settled', txHash: entry.txHash, settledAt: entry.settledAt, signedReceipt: entry.signedReceipt,
    ...(entry.offerReceipt ? { offerReceipt: entry.offerReceipt } : {}),
    ...(entry.webhook ? { webhook: entry.webhook } : {}),
    ...(entry.webhook?.status === 'pending' ? { webhookUndispatched: true as const } : {}),
  };
}
