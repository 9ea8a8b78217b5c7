import { createHash } from 'node:crypto';
import { Schema, type Connection, type Model } from 'mongoose';
import type { DecodedPaymentHeader } from 'agentgate-x402-wire';
import { isDuplicateKey } from '../platform/errors.js';
import type { SettlementResult } from './settlement.js';

/**
 * The x402 `payment-identifier` extension: a client-chosen id (16-128 of [A-Za-z0-9_-]) in
 * `paymentPayload.extensions["payment-identifier"].info.id` makes a retried payment idempotent. The same
 * id with the same signed payment answers the first result without moving money again; the same id with
 * another payment is refused. The first request claims the id with a unique insert (so concurrent copies
 * wait for it rather than race), and records its result when it has one.
 */
export const PAYMENT_IDENTIFIER = 'payment-identifier';
const ID_PATTERN = /^[A-Za-z0-9_-]{16,128}$/;
/** How often a repeat waiting for its first request reads the id's result, and looks at the payment's own record. */
const REPEAT_POLL_MS = 250;
const RECORD_LOOK_MS = 1_000;

interface IdentifierDoc {
  _id: string; // `${orgId}:${id}`
  payloadHash: string;
  result?: SettlementResult;
  createdAt: Date;
}

const schema = new Schema<IdentifierDoc>({
  _id: String,
  payloadHash: { type: String, required: true },
  result: Schema.Types.Mixed,
  createdAt: { type: Date, required: true },
}, { versionKey: false });

export type IdentifierOutcome =
  | { kind: 'none' }
  | { kind: 'invalid'; message: string }
  | { kind: 'conflict'; message: string }
  | { kind: 'first'; record(result: SettlementResult): Promise<void>; release(): Promise<void> }
  | { kind: 'repeat'; result: SettlementResult };

/** What the extension reads of a payment: an exact payload (DecodedPaymentHeader) or an upto one alike. */
export type IdentifiedPayment = DecodedPaymentHeader | { version: 2; payload: { payload: unknown; accepted: unknown; extensions?: Record<string, unknown> | null } };

/** The id a payload carries, if any; undefined when the extension is absent. */
export function paymentIdentifierOf(decoded: IdentifiedPayment): string | undefined | { invalid: string } {
  if (decoded.version !== 2) return undefined;
  const extension = decoded.payload.extensions?.[PAYMENT_IDENTIFIER] as { info?: { id?: unknown } } | undefined;
  const id = extension?.info?.id;
  if (id === undefined) return undefined;
  return typeof id === 'string' && ID_PATTERN.test(id) ? id : { invalid: 'the payment-identifier id must be 16-128 characters of A-Z, a-z, 0-9, - and _' };
}

export class PaymentIdentifiers {
  private readonly ids: Model<IdentifierDoc>;

  /** `waitForFirstMs`: how long a repeat waits for the first request's result before answering pending. */
  constructor(conn: Connection, private readonly waitForFirstMs = 60_000) {
    this.ids = conn.models.PaymentIdentifier ?? conn.model<IdentifierDoc>('PaymentIdentifier', schema, 'payment_identifiers');
  }

  /**
   * Claims the payload's id for this org, or finds the first request's result. `recordOf` reads what
   * became of the payment itself (its record, by its authorization): a repeat whose first request died
   * before writing its result (its process was killed, the database went away) answers from the record
   * once it is closed, and takes the id over when the first request never claimed the payment at all.
   */
  async claim(orgId: string, decoded: IdentifiedPayment, recordOf?: () => Promise<SettlementResult | 'open' | 'absent'>): Promise<IdentifierOutcome> {
    const id = paymentIdentifierOf(decoded);
    if (id === undefined) return { kind: 'none' };
    if (typeof id !== 'string') return { kind: 'invalid', message: id.invalid };
    const key = `${orgId}:${id}`;
    // What was signed (authorization and signature) and what it was accepted for: "the same payload".
    const payloadHash = createHash('sha256').update(JSON.stringify([decoded.payload.payload, decoded.version === 2 ? decoded.payload.accepted : null])).digest('hex');
    const first = await this.claimFirst(key, payloadHash);
    if (first) return first;
    const deadline = Date.now() + this.waitForFirstMs;
    let lastLook = Date.now();
    for (;;) {
      const found = await this.ids.findById(key).lean();
      if (!found) {
        // The first request gave up and let go of the id: this one runs the payment now.
        const again = await this.claimFirst(key, payloadHash);
        if (again) return again;
        continue;
      }
      if (found.payloadHash !== payloadHash) return { kind: 'conflict', message: `payment-identifier ${id} was already used for another payment` };
      if (found.result) return { kind: 'repeat', result: found.result };
      if (recordOf && Date.now() - lastLook >= RECORD_LOOK_MS) {
        lastLook = Date.now();
        const record = await recordOf();
        if (record !== 'open' && record !== 'absent') {
          await this.ids.updateOne({ _id: key }, { $set: { result: record } }).catch(() => {});
          return { kind: 'repeat', result: record };
        }
        // No claim, long after the first request began: it ended without one (its process died before
        // claiming, or it was refused for a passing reason and could not let go). Take the id over.
        if (record === 'absent' && Date.now() - found.createdAt.getTime() > this.waitForFirstMs) {
          await this.ids.deleteOne({ _id: key, createdAt: found.createdAt });
          continue;
        }
      }
      if (Date.now() > deadline) return { kind: 'repeat', result: { ok: false, reason: 'settle_unconfirmed', message: `the first payment with payment-identifier ${id} has no result yet; retry later` } };
      await new Promise((resolve) => setTimeout(resolve, REPEAT_POLL_MS));
    }
  }

  /** The id for this request, if no request holds it. */
  private async claimFirst(key: string, payloadHash: string): Promise<IdentifierOutcome | undefined> {
    try {
      await this.ids.create({ _id: key, payloadHash, createdAt: new Date() });
      return {
        kind: 'first',
        record: async (result) => { await this.ids.updateOne({ _id: key }, { $set: { result } }); },
        // The request failed before it had a result: a retry may run it again (the nonce claim still
        // guarantees that money moves at most once).
        release: async () => { await this.ids.deleteOne({ _id: key }); },
      };
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      return undefined;
    }
  }
}
