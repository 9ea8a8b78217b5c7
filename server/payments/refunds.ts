import { formatUsdc, parseCharge } from 'agentgate-x402-wire';
import type { Screening } from '../screening/index.js';
import { screenedNetwork } from '../screening/sources.js';
import { AppError } from '../platform/errors.js';
import type { PaymentDoc } from './models.js';
import type { PaymentRecords } from './records.js';
import type { AuthCaptureScheme } from './schemes/auth-capture/evm/scheme.js';
import type { AuthCaptureOperationDoc } from './schemes/auth-capture/evm/operations.js';
import type { ExactRefunds } from './schemes/exact/evm/refunds.js';

// Refunds a seller gives (POST /v0/payments/{id}/refund, the console's Refund button, `agentgate
// payments refund`, the payments_refund MCP tool), each one decided once:
// - of an auth-capture payment, from the escrow, at most what was captured (schemes/auth-capture/evm/operations.ts);
// - of an exact payment whose payTo is an agentgate wallet of the org, from that wallet under its owner's
//   mandate, at most what was paid (schemes/exact/refunds.ts).
// Any other payment (an exact one to an address agentgate holds no key of, an upto one) went straight to
// the seller, with nothing agentgate could refund from: refused, saying so.

export interface RefundRequest { amount?: string; reason: string; idempotencyKey?: string }

/** What a refund answer shows of a refund, whichever kind recorded it. */
export type RefundView = Pick<AuthCaptureOperationDoc, '_id' | 'paymentId' | 'amountRaw' | 'reason' | 'status' | 'txHash' | 'failureReason' | 'receipt' | 'createdAt' | 'doneAt'>;

export class PaymentRefunds {
  constructor(
    private readonly records: PaymentRecords,
    /** The auth-capture scheme of a payment's network (its escrow, its operator's lane). */
    private readonly authCaptureOf: (payment: PaymentDoc) => AuthCaptureScheme,
    /** Refunds of exact payments from the org's wallets; undefined where wallets are not configured. */
    readonly exact: ExactRefunds | undefined,
    /** Sanctions screening: no refund goes to, nor comes from, a listed address. */
    private readonly screening: Screening,
  ) {}

  /** The org's payment refunded (in part or in full); another org's payment is a 404. */
  async refund(orgId: string, paymentId: string, request: RefundRequest) {
    const payment = await this.records.get(orgId, paymentId);
    let amount: bigint | undefined;
    if (request.amount !== undefined) {
      try { amount = parseCharge(request.amount); } catch (err) { throw new AppError(400, 'validation_error', `body.amount: ${(err as Error).message}`); }
      if (amount <= 0n) throw new AppError(400, 'validation_error', 'body.amount: a refund is more than 0');
    }
    const screened = await this.screening.screen(
      [{ role: 'payer', address: payment.payerAddress }, { role: 'payTo', address: payment.recipientAddress }],
      { orgId, network: screenedNetwork(payment.network), scheme: payment.scheme ?? 'exact', door: 'refund' },
    );
    if (screened) throw new AppError(403, screened.reason, `${screened.message}; nothing was refunded`);
    if (payment.svm) {
      throw new AppError(409, 'refund_not_possible', `payment ${payment._id} was paid on ${payment.network}: the USDC went straight to ${payment.recipientAddress}, and agentgate refunds only from the org's EVM wallets and the auth-capture escrow. Refund the buyer (${payment.payerAddress}) from that address yourself`);
    }
    if ((payment.scheme ?? 'exact') === 'exact' && this.exact) {
      if (payment.status !== 'settled') throw new AppError(409, 'refund_not_possible', `payment ${payment._id} is ${payment.status}: only a settled payment can be refunded`);
      const outcome = await this.exact.refund(payment, amount, request.reason, request.idempotencyKey);
      if (!outcome.ok) {
        if (outcome.refund && outcome.pending) return presentRefund(outcome.refund, await this.records.get(orgId, paymentId));
        throw new AppError(outcome.reason === 'relayer_unavailable' ? 503 : 502, outcome.reason, outcome.message);
      }
      return presentRefund(outcome.refund, await this.records.get(orgId, paymentId));
    }
    if (payment.scheme !== 'auth-capture') {
      throw new AppError(409, 'refund_not_possible', `payment ${payment._id} was settled with the ${payment.scheme ?? 'exact'} scheme: the money went straight to ${payment.recipientAddress}, with no escrow agentgate could refund from. Refund the buyer (${payment.payerAddress}) from that address yourself, or sell with auth-capture (refundable) routes`);
    }
    if (payment.status !== 'settled') throw new AppError(409, 'refund_not_possible', `payment ${payment._id} is ${payment.status}: only a captured payment can be refunded${payment.status === 'held' ? ' (a held authorization is voided instead)' : ''}`);
    const outcome = await this.authCaptureOf(payment).operations.refund(payment, amount, request.reason, request.idempotencyKey);
    if (!outcome.ok) {
      if (outcome.op && outcome.pending) return presentRefund(outcome.op, await this.records.get(orgId, paymentId));
      throw new AppError(outcome.reason === 'relayer_unavailable' ? 503 : 502, outcome.reason, outcome.message);
    }
    return presentRefund(outcome.op, await this.records.get(orgId, paymentId));
  }

  /** Whether agentgate can refund this payment at all (auth-capture; exact paid to an agentgate wallet of the org). */
  async refundable(payment: PaymentDoc): Promise<boolean> {
    if (payment.scheme === 'auth-capture') return true;
    if ((payment.scheme ?? 'exact') !== 'exact' || !this.exact || payment.svm) return false;
    return this.exact.walletOf(payment).then(() => true, (err) => {
      if (err instanceof AppError) return false;
      throw err;
    });
  }

  /** The payment's refunds, oldest first. */
  async list(orgId: string, paymentId: string) {
    const payment = await this.records.get(orgId, paymentId);
    if ((payment.scheme ?? 'exact') === 'exact') return this.exact ? (await this.exact.list(payment._id)).map((refund) => presentRefund(refund, payment)) : [];
    if (payment.scheme !== 'auth-capture') return [];
    return (await this.authCaptureOf(payment).operations.list(payment._id)).filter((op) => op.kind === 'refund').map((op) => presentRefund(op, payment));
  }
}

export function presentRefund(op: RefundView, payment: PaymentDoc) {
  return {
    id: op._id,
    paymentId: op.paymentId,
    amountUsdcRaw: op.amountRaw,
    amountUsdc: formatUsdc(BigInt(op.amountRaw)),
    reason: op.reason ?? '',
    status: op.status === 'done' ? 'refunded' : op.status,
    txHash: op.txHash ?? null,
    failureReason: op.failureReason ?? null,
    receipt: op.receipt ?? null,
    createdAt: op.createdAt.toISOString(),
    refundedAt: op.doneAt?.toISOString() ?? null,
    payment: { capturedUsdcRaw: payment.amountUsdcRaw, refundedUsdcRaw: payment.refundedUsdcRaw ?? '0' },
  };
}
