import { Schema, type Connection, type Model } from 'mongoose';
import { encodeFunctionData, maxUint256, type Address, type Hex } from 'viem';
import { formatUsdc } from 'agentgate-x402-wire';
import {
  AUTH_CAPTURE_ESCROW_ADDRESS,
  OPERATOR_REFUND_COLLECTOR_ADDRESS,
  authCaptureEscrowAbi,
  escrowCalldata,
  escrowState,
  paymentInfoOfStored,
  type EscrowState,
  type StoredPaymentInfo,
} from './chain.js';
import type { ChainService } from '../../../../chain/chain-service.js';
import { erc20AllowanceAbi } from '../../../../chain/permit2.js';
import { balanceOf } from '../../../../chain/usdc.js';
import { blockBefore } from '../../../../chain/authorization-events.js';
import { AppError, isDuplicateKey } from '../../../../platform/errors.js';
import type { ActivityLog } from '../../../../platform/activity-log.js';
import type { Logger } from '../../../../platform/logger.js';
import { retryWhileDatabaseAway } from '../../../../platform/database-outage.js';
import { RelayerUnavailableError, shortReason } from '../../../../settlement/relayer-lane.js';
import type { SendTools, SettlementWork, WorkOutcome } from '../../../../settlement/work.js';
import type { PaymentDoc, SignedReceipt } from '../../../models.js';
import type { PaymentRecords } from '../../../records.js';
import type { Endpoints } from '../../../endpoints.js';
import type { PaymentSettlement } from '../../../payment-settlement.js';
import type { ReceiptSigner } from '../../../receipts.js';
import { signRefundReceipt } from '../../../receipts.js';
import { startRounds } from '../../../../platform/rounds.js';
import type { DeliveryQueue } from '../../../../webhooks/webhook-service.js';
import { RefundWebhookOutbox, type RefundWebhookState } from '../../../refund-webhooks.js';

/**
 * What happens to an auth-capture payment after its authorization: the operator's capture, void and
 * refunds (AuthCaptureEscrow), each an operation decided once by a unique insert and sent through the
 * shared settlement engine from the operator's own relayer lane (the escrow accepts no other sender).
 *
 * The escrow does not refuse a repeated capture or refund, so no operation is sent blind: each carries
 * the escrow balances it expects to find (`before`, read when it was decided; the spec's single-use
 * check) and its executor reads them first. As expected: sent. Already moved as the operation would
 * move them: done (a run after a crash between send and record, or a lane taken over), its transaction
 * looked up in the escrow's events. Anything else: failed, nothing sent.
 *
 * Refunds of one payment are numbered (`<payment>:refund:<n>`): the next number is claimed by a unique
 * insert only once the one before it is final, so two refunds are never in flight for one payment, each
 * one's `before` is exact, and their sum can never pass what was captured. An Idempotency-Key finds the
 * refund it first made.
 */

export type AuthCaptureOperationKind = 'capture' | 'void' | 'refund';

export interface AuthCaptureOperationDoc {
  _id: string;
  paymentId: string;
  orgId: string;
  kind: AuthCaptureOperationKind;
  /** refunds: 0, 1, ... */
  seq?: number;
  amountRaw: string;
  /** The escrow balances the operation expects to find (atomic units as strings). */
  before: { capturable: string; refundable: string };
  status: 'pending' | 'done' | 'failed';
  txHash?: string;
  failureReason?: string;
  idempotencyKey?: string;
  /** refunds: why, as the seller said it. */
  reason?: string;
  receipt?: SignedReceipt;
  /** payment.refunded / payment.voided outbox entry (refund-webhooks.ts hands it to the webhook engine). */
  webhook?: RefundWebhookState;
  createdAt: Date;
  doneAt?: Date;
}

const opSchema = new Schema<AuthCaptureOperationDoc>({
  _id: String,
  paymentId: { type: String, required: true },
  orgId: { type: String, required: true },
  kind: { type: String, required: true },
  seq: Number,
  amountRaw: { type: String, required: true },
  before: { type: Schema.Types.Mixed, required: true },
  status: { type: String, required: true },
  txHash: String,
  failureReason: String,
  idempotencyKey: String,
  reason: String,
  receipt: Schema.Types.Mixed,
  webhook: Schema.Types.Mixed,
  createdAt: { type: Date, required: true },
  doneAt: Date,
}, { versionKey: false, minimize: false });
opSchema.index({ paymentId: 1 });
opSchema.index({ status: 1, createdAt: 1 });

export const OP_WORK_KIND = 'auth-capture.operation';

/** What the executor needs, as plain data (it may run in another process). */
interface OpWork { op: AuthCaptureOperationDoc; info: StoredPaymentInfo; hash: Hex }

export type OpOutcome = { ok: true; op: AuthCaptureOperationDoc } | { ok: false; reason: string; message: string; op?: AuthCaptureOperationDoc; pending?: true };

/** Gas for one escrow call (the token store's first use deploys a clone). */
const ESCROW_GAS = 400_000n;
/** How long a pending operation is left to its sender before the sweep gives it to a lane again. */
const STALE_MS = 20_000;
/** A transaction the node no longer knows this long after its operation was decided was dropped. */
const DROPPED_AFTER_MS = 10 * 60_000;

const amountAfter = (kind: AuthCaptureOperationKind, before: EscrowState, amount: bigint): { capturable: bigint; refundable: bigint } => {
  if (kind === 'capture') return { capturable: before.capturable - amount, refundable: before.refundable + amount };
  if (kind === 'void') return { capturable: 0n, refundable: before.refundable };
  return { capturable: before.capturable, refundable: before.refundable - amount };
};
const same = (a: { capturable: bigint; refundable: bigint }, b: { capturable: bigint; refundable: bigint }) => a.capturable === b.capturable && a.refundable === b.refundable;
const stateOf = (doc: AuthCaptureOperationDoc['before']) => ({ capturable: BigInt(doc.capturable), refundable: BigInt(doc.refundable), hasCollectedPayment: true });

export class AuthCaptureOperations {
  readonly ops: Model<AuthCaptureOperationDoc>;
  /** payment.refunded and payment.voided: each recorded refund's or void's event (refund-webhooks.ts). */
  readonly webhooks: RefundWebhookOutbox<AuthCaptureOperationDoc>;
  /** Operations this process is sending now (it holds their lane). */
  private readonly inFlight = new Set<string>();
  /**
   * The operations of a payment's network: one sweep (the default network's) finishes every network's
   * stale operations, each through its own network's chain and lanes. Set by the payment service.
   */
  ownerOf: (payment: PaymentDoc) => AuthCaptureOperations = () => this;

  constructor(
    conn: Connection,
    private readonly chain: () => ChainService,
    private readonly path: PaymentSettlement,
    private readonly records: PaymentRecords,
    private readonly endpoints: Endpoints,
    /** Where its payment.refunded and payment.voided events go (refund-webhooks.ts). */
    deliveries: DeliveryQueue,
    private readonly signer: () => ReceiptSigner,
    private readonly logs: ActivityLog,
    private readonly log: Logger,
  ) {
    this.ops = conn.models.AuthCaptureOperation ?? conn.model<AuthCaptureOperationDoc>('AuthCaptureOperation', opSchema, 'escrow_operations');
    this.webhooks = new RefundWebhookOutbox({ records: this.ops, payments: records, deliveries, log, eventOf: (op) => (op.kind === 'void' ? 'payment.voided' : 'payment.refunded') });
  }

  // --- deciding an operation (once) -----------------------------------------------------------

  /** The payment's capture for `amount`, decided once; run again, it finds the first one. */
  capture(payment: PaymentDoc, amount: bigint): Promise<OpOutcome> {
    return this.decideAndRun(payment, 'capture', amount, `${payment._id}:capture`);
  }

  /** The payment's void (what is still held goes back to the payer), decided once. */
  void(payment: PaymentDoc): Promise<OpOutcome> {
    return this.decideAndRun(payment, 'void', 0n, `${payment._id}:void`);
  }

  private async decideAndRun(payment: PaymentDoc, kind: 'capture' | 'void', amount: bigint, id: string): Promise<OpOutcome> {
    let op: AuthCaptureOperationDoc | null = await this.ops.findById(id).lean();
    if (!op) {
      const state = await escrowState(this.chain().publicClient, payment.escrow!.hash as Hex);
      if (kind === 'void' && state.capturable === 0n) {
        // Nothing held and nothing captured: the payer reclaimed it (after the capture deadline).
        if (state.refundable === 0n) await this.records.payments.updateOne({ _id: payment._id, status: 'held' }, { $set: { status: 'voided', failureReason: 'reclaimed_by_payer' }, $unset: { holdExpiresAt: 1 } });
        return { ok: false, reason: 'nothing_to_void', message: 'nothing of this payment is held in escrow any more' };
      }
      const doc: AuthCaptureOperationDoc = {
        _id: id, paymentId: payment._id, orgId: payment.orgId, kind, amountRaw: (kind === 'void' ? state.capturable : amount).toString(),
        before: { capturable: state.capturable.toString(), refundable: state.refundable.toString() }, status: 'pending', createdAt: new Date(),
      };
      try {
        await this.ops.create(doc);
        op = doc;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        op = await this.ops.findById(id).lean();
      }
    }
    return this.run(payment, op!);
  }

  /**
   * A refund of `amount` (atomic) of a captured payment, at most what was captured and not yet refunded.
   * Refused before anything is decided when the payment cannot be refunded, the amount is too much, or
   * the operator cannot fund it now; with `idempotencyKey`, a repeat answers the first refund (409 if it
   * asks another amount).
   */
  async refund(payment: PaymentDoc, amount: bigint | undefined, reason: string, idempotencyKey?: string): Promise<OpOutcome> {
    const chain = this.chain();
    for (let attempt = 0; attempt < 50; attempt++) {
      const refunds: AuthCaptureOperationDoc[] = await this.ops.find({ paymentId: payment._id, kind: 'refund' }).sort({ seq: 1 }).lean();
      const repeat = idempotencyKey ? refunds.find((r) => r.idempotencyKey === idempotencyKey) : undefined;
      if (repeat) {
        if (amount !== undefined && BigInt(repeat.amountRaw) !== amount) {
          throw new AppError(409, 'idempotency_key_reused', `Idempotency-Key ${idempotencyKey} was used for a refund of ${formatUsdc(BigInt(repeat.amountRaw))} USDC; this asks ${formatUsdc(amount)}`);
        }
        return this.answerOf(repeat, payment);
      }
      const last = refunds[refunds.length - 1];
      if (last && last.status === 'pending') throw new AppError(409, 'refund_in_progress', `refund ${last._id} of this payment is still being sent; ask again once it is done`, undefined, { 'Retry-After': '2' });
      const captured = BigInt(payment.amountUsdcRaw);
      const refunded = refunds.filter((r) => r.status === 'done').reduce((sum, r) => sum + BigInt(r.amountRaw), 0n);
      const left = captured - refunded;
      const asked = amount ?? left;
      if (asked <= 0n || asked > left) {
        throw new AppError(409, 'refund_exceeds_captured', `${formatUsdc(asked)} USDC is more than can be refunded: ${formatUsdc(captured)} captured, ${formatUsdc(refunded)} refunded already; nothing was refunded`);
      }
      const info = paymentInfoOfStored(payment.escrow!.paymentInfo);
      if (Math.floor(Date.now() / 1000) >= info.refundExpiry) throw new AppError(409, 'refund_deadline_expired', `the payment's refund deadline ${new Date(info.refundExpiry * 1000).toISOString()} has passed: the escrow refuses refunds`);
      const state = await escrowState(chain.publicClient, payment.escrow!.hash as Hex);
      if (state.refundable < asked) throw new AppError(409, 'refund_exceeds_captured', `the escrow can refund ${formatUsdc(state.refundable)} USDC of this payment; nothing was refunded`);
      // Refunds are funded by the operator (OperatorRefundCollector pulls from it): refused clearly when it cannot.
      const funds = await balanceOf({ client: chain.publicClient, token: chain.usdc.address, account: info.operator });
      if (funds < asked) throw new AppError(503, 'refund_funding_unavailable', `the operator account ${info.operator} that funds this payment's refunds holds ${formatUsdc(funds)} USDC; ${formatUsdc(asked)} are needed. Nothing was refunded`);
      await this.path.ensureCanSendFrom(info.operator, 'redeem');
      const seq = refunds.length;
      const doc: AuthCaptureOperationDoc = {
        _id: `${payment._id}:refund:${seq}`, paymentId: payment._id, orgId: payment.orgId, kind: 'refund', seq, amountRaw: asked.toString(),
        before: { capturable: state.capturable.toString(), refundable: state.refundable.toString() }, status: 'pending', reason, createdAt: new Date(),
        ...(idempotencyKey ? { idempotencyKey } : {}),
      };
      try {
        await this.ops.create(doc);
      } catch (err) {
        if (isDuplicateKey(err)) continue; // another refund took this number: read again
        throw err;
      }
      return this.run(payment, doc);
    }
    throw new AppError(503, 'refund_contended', 'too many concurrent refunds of this payment; ask again');
  }

  /** The operations of a payment, oldest first (the payment's refunds and what became of its hold). */
  list(paymentId: string): Promise<AuthCaptureOperationDoc[]> {
    return this.ops.find({ paymentId }).sort({ createdAt: 1 }).lean();
  }

  private async answerOf(op: AuthCaptureOperationDoc, payment: PaymentDoc): Promise<OpOutcome> {
    if (op.status === 'done') return { ok: true, op };
    if (op.status === 'failed') return { ok: false, reason: op.failureReason ?? 'operation_failed', message: `the ${op.kind} failed: ${op.failureReason}`, op };
    return this.waitFor(op, payment);
  }

  private async waitFor(op: AuthCaptureOperationDoc, _payment: PaymentDoc): Promise<OpOutcome> {
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      const now = await this.ops.findById(op._id).lean();
      if (now && now.status !== 'pending') return now.status === 'done' ? { ok: true, op: now } : { ok: false, reason: now.failureReason ?? 'operation_failed', message: `the ${op.kind} failed: ${now.failureReason}`, op: now };
    }
    return { ok: false, reason: 'operation_pending', message: `the ${op.kind} is still being sent; it goes on`, op, pending: true };
  }

  // --- sending (through the settlement engine, on the operator's lane) -------------------------

  /** Gives a decided operation to the operator's lane and waits for its outcome (recorded by the sender). */
  async run(payment: PaymentDoc, op: AuthCaptureOperationDoc): Promise<OpOutcome> {
    if (op.status !== 'pending') return this.answerOf(op, payment);
    const escrow = payment.escrow!;
    const work: SettlementWork<OpWork> = { id: op._id, kind: OP_WORK_KIND, lane: escrow.paymentInfo.operator.toLowerCase(), data: { op, info: escrow.paymentInfo, hash: escrow.hash as Hex } };
    const outcome = await this.path.submit(work);
    if ('unavailable' in outcome) return { ok: false, reason: 'relayer_unavailable', message: `${outcome.unavailable}; the ${op.kind} is decided and will be sent when the operator's relayer is back`, op, pending: true };
    return outcome.done as OpOutcome;
  }

  /** The executor (registered on the engine under OP_WORK_KIND): runs on the process holding the operator's lane. */
  readonly execute = async (work: SettlementWork, tools: SendTools): Promise<WorkOutcome> => {
    const { op } = work.data as OpWork;
    // One run of an operation at a time in this process (the lane's holder): a resend meanwhile waits.
    if (this.inFlight.has(op._id)) return { done: { ok: false, reason: 'operation_pending', message: `the ${op.kind} is being sent`, op, pending: true } satisfies OpOutcome };
    this.inFlight.add(op._id);
    try {
      return await this.executeOnce(work, tools);
    } finally {
      this.inFlight.delete(op._id);
    }
  };

  private async executeOnce(work: SettlementWork, tools: SendTools): Promise<WorkOutcome> {
    const { op, info: stored, hash } = work.data as OpWork;
    const current = await this.ops.findById(op._id).lean();
    if (!current) return { done: { ok: false, reason: 'operation_unknown', message: `no operation ${op._id}` } satisfies OpOutcome };
    if (current.status !== 'pending') return { done: current.status === 'done' ? { ok: true, op: current } : { ok: false, reason: current.failureReason ?? 'operation_failed', message: `the ${current.kind} failed`, op: current } };
    const chain = this.chain();
    const info = paymentInfoOfStored(stored);
    const amount = BigInt(op.amountRaw);
    const before = stateOf(op.before);
    const after = amountAfter(op.kind, before, amount);
    const state = await escrowState(chain.publicClient, hash);
    if (same(state, after)) {
      // Moved already: by an earlier run of this operation (its record lost), or, for a void, by the payer's reclaim.
      const txHash = (current.txHash as Hex | undefined) ?? await this.findTx(hash, op);
      if (!txHash && op.kind === 'void') return { done: await this.finish(current, { ok: false, reason: 'reclaimed_by_payer', message: 'the payer reclaimed the authorization after its capture deadline' }) };
      return { done: await this.finish(current, { ok: true, txHash: txHash ?? '' }) };
    }
    if (!same(state, before)) {
      return { done: await this.finish(current, { ok: false, reason: 'unexpected_payment_state', message: `the escrow holds capturable ${state.capturable} / refundable ${state.refundable}; the ${op.kind} expected ${before.capturable} / ${before.refundable}: nothing was sent` }) };
    }
    if (current.txHash) {
      // Sent by an earlier run whose outcome was not recorded, and not mined yet: that transaction is
      // followed, never sent again while the node still knows it (the escrow would accept both).
      const hash = current.txHash as Hex;
      const receipt = await chain.publicClient.getTransactionReceipt({ hash }).catch(() => undefined);
      if (receipt?.status === 'reverted') return { done: await this.finish(current, { ok: false, reason: 'transaction_reverted', message: `the ${op.kind} transaction ${hash} reverted`, txHash: hash }) };
      const known = receipt ?? await chain.publicClient.getTransaction({ hash }).catch(() => undefined);
      if (known || Date.now() - new Date(current.createdAt).getTime() < DROPPED_AFTER_MS) {
        return { done: { ok: false, reason: 'operation_pending', message: `the ${op.kind} transaction ${hash} is not confirmed yet; it goes on`, op: current, pending: true } satisfies OpOutcome };
      }
      // Unknown to the node long after it was sent: it was dropped, and the escrow shows nothing moved.
    }
    // A previous holder of the operator's relayer may have sent this very call and died before recording
    // it: its transaction would still be waiting for a block, and the escrow would take a second one as
    // well. Nothing is sent until whatever that holder left is mined (then the state check above decides)
    // or gone.
    let settled;
    try {
      settled = await tools.previousHolderSettled(info.operator);
    } catch (err) {
      return { unavailable: err instanceof RelayerUnavailableError ? err.message : `the ${op.kind} could not be sent: ${shortReason(err)}` };
    }
    if (!settled) {
      return { done: { ok: false, reason: 'operation_pending', message: `the operator's relayer has a transaction of its previous holder waiting for a block; the ${op.kind} is sent once it is mined or gone`, op: current, pending: true } satisfies OpOutcome };
    }
    if (op.kind === 'refund') {
      const funded = await this.ensureRefundFunding(chain, tools, info.operator, amount);
      if (funded) return { done: await this.finish(current, funded) };
    }
    const data = op.kind === 'capture' ? escrowCalldata.capture(info, amount) : op.kind === 'void' ? escrowCalldata.void(info) : escrowCalldata.refund(info, amount);
    let sent;
    try {
      sent = await tools.submitFrom(info.operator, { to: AUTH_CAPTURE_ESCROW_ADDRESS, data, gas: ESCROW_GAS }, { scheme: 'auth-capture', operation: op.kind, paymentIds: [op.paymentId] });
    } catch (err) {
      const message = err instanceof RelayerUnavailableError ? err.message : `the ${op.kind} could not be sent: ${shortReason(err)}`;
      return { unavailable: message };
    }
    // The hash is kept at once: a later run looks for this transaction before anything else.
    await retryWhileDatabaseAway(() => this.ops.updateOne({ _id: op._id, status: 'pending' }, { $set: { txHash: sent.hash } }), this.log, 'recording an escrow operation\'s transaction');
    const fate = await sent.fate;
    if (fate.kind === 'mined' && fate.receipt.status === 'success') return { done: await this.finish({ ...current, txHash: sent.hash }, { ok: true, txHash: fate.receipt.transactionHash }) };
    if (fate.kind === 'mined') return { done: await this.finish(current, { ok: false, reason: 'transaction_reverted', message: `the ${op.kind} transaction ${fate.receipt.transactionHash} reverted`, txHash: fate.receipt.transactionHash }) };
    // Replaced or not confirmed: left pending; the sweep asks the chain (the state check) and finishes it.
    return { done: { ok: false, reason: 'operation_pending', message: `the ${op.kind} transaction ${sent.hash} is not confirmed yet; it goes on`, op: current, pending: true } satisfies OpOutcome };
  }

  /** Refunds are pulled from the operator by OperatorRefundCollector: its balance and its approval. */
  private async ensureRefundFunding(chain: ChainService, tools: SendTools, operator: Address, amount: bigint): Promise<{ ok: false; reason: string; message: string } | undefined> {
    const [funds, allowance] = await Promise.all([
      balanceOf({ client: chain.publicClient, token: chain.usdc.address, account: operator }),
      chain.publicClient.readContract({ address: chain.usdc.address, abi: erc20AllowanceAbi, functionName: 'allowance', args: [operator, OPERATOR_REFUND_COLLECTOR_ADDRESS] }),
    ]);
    if (funds < amount) return { ok: false, reason: 'refund_funding_unavailable', message: `the operator ${operator} holds ${funds}; the refund needs ${amount}` };
    if (allowance >= amount) return undefined;
    // approve(OperatorRefundCollector, max): once per operator account.
    const data = encodeFunctionData({ abi: erc20AllowanceAbi, functionName: 'approve', args: [OPERATOR_REFUND_COLLECTOR_ADDRESS, maxUint256] });
    const approve = await tools.submitFrom(operator, { to: chain.usdc.address, data, gas: 80_000n }, { scheme: 'auth-capture', operation: 'approve-refund-collector' });
    const fate = await approve.fate;
    if (fate.kind !== 'mined' || fate.receipt.status !== 'success') return { ok: false, reason: 'refund_funding_unavailable', message: `the operator's approval of the refund collector (${approve.hash}) did not go through` };
    return undefined;
  }

  /** The escrow event of this operation (by the payment's hash, the operation's kind and amount), searched from its decision on. */
  private async findTx(hash: Hex, op: AuthCaptureOperationDoc): Promise<Hex | undefined> {
    const chain = this.chain();
    const eventName = op.kind === 'capture' ? 'PaymentCaptured' : op.kind === 'void' ? 'PaymentVoided' : 'PaymentRefunded';
    const logs = await chain.publicClient.getContractEvents({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, eventName, args: { paymentInfoHash: hash }, fromBlock: await blockBefore(chain, op.createdAt), toBlock: 'latest' });
    const match = logs.find((l) => op.kind === 'void' || (l.args as { amount?: bigint }).amount === BigInt(op.amountRaw));
    return match?.transactionHash;
  }

  /** Records what the chain did with an operation, and what it means for its payment. Idempotent. */
  private async finish(op: AuthCaptureOperationDoc, result: { ok: true; txHash: string } | { ok: false; reason: string; message: string; txHash?: string }): Promise<OpOutcome> {
    const payment = await this.records.record(op.paymentId);
    if (!result.ok) {
      const failed = { ...op, status: 'failed' as const, failureReason: result.reason, ...(result.txHash ? { txHash: result.txHash } : {}), doneAt: new Date() };
      await retryWhileDatabaseAway(() => this.ops.updateOne({ _id: op._id, status: 'pending' }, { $set: { status: 'failed', failureReason: result.reason, doneAt: failed.doneAt, ...(result.txHash ? { txHash: result.txHash } : {}) } }), this.log, 'recording a failed escrow operation');
      this.log.warn({ paymentId: op.paymentId, operation: op.kind, reason: result.reason }, result.message);
      if (op.kind === 'capture' && payment) await this.records.payments.updateOne({ _id: payment._id, status: 'held' }, { $set: { status: 'failed', failureReason: result.reason } });
      // The payer took it back itself (reclaim, after the capture deadline): nothing is held, as after a void.
      if (op.kind === 'void' && result.reason === 'reclaimed_by_payer' && payment) await this.records.payments.updateOne({ _id: payment._id, status: 'held' }, { $set: { status: 'voided', failureReason: result.reason }, $unset: { holdExpiresAt: 1 } });
      return { ok: false, reason: result.reason, message: result.message, op: failed };
    }
    const doneAt = new Date();
    const endpoint = payment?.endpointId ? await this.endpoints.byId(payment.orgId, payment.endpointId) : null;
    const webhook = endpoint?.webhookUrl && op.kind !== 'capture' ? { status: 'pending' as const, eventId: `evt_${op._id.replace(/:/g, '_')}` } : undefined;
    const receipt = op.kind === 'refund' && payment ? await signRefundReceipt(this.signer(), payment, op, result.txHash, doneAt) : undefined;
    const done: AuthCaptureOperationDoc = { ...op, status: 'done', txHash: result.txHash, doneAt, ...(receipt ? { receipt } : {}), ...(webhook ? { webhook } : {}) };
    await retryWhileDatabaseAway(() => this.ops.updateOne({ _id: op._id, status: 'pending' }, { $set: { status: 'done', txHash: result.txHash, doneAt, ...(receipt ? { receipt } : {}), ...(webhook ? { webhook } : {}) } }), this.log, 'recording an escrow operation');
    const stored = (await this.ops.findById(op._id).lean()) ?? done;
    if (!payment) return { ok: true, op: stored };
    if (op.kind === 'capture') {
      // The capture is the payment's settlement: its record, signed receipts and payment.received.
      await retryWhileDatabaseAway(() => this.records.markSettled({ ...payment, amountUsdcRaw: op.amountRaw }, result.txHash, endpoint), this.log, 'recording a capture');
      await this.records.recordsWritten();
    } else if (op.kind === 'void') {
      await this.records.payments.updateOne({ _id: payment._id, status: { $in: ['held', 'verified'] } }, { $set: { status: 'voided', 'escrow.voidTx': result.txHash }, $unset: { holdExpiresAt: 1 } });
      this.logs.recordSoon({ orgId: payment.orgId, action: 'payments.voided', category: 'payments', description: `Authorization of ${payment.payerAddress} voided: ${formatUsdc(BigInt(op.amountRaw))} USDC back to the payer`, targetType: 'payment', targetId: payment._id, metadata: { txHash: result.txHash } });
    } else {
      const refunded = (await this.ops.find({ paymentId: payment._id, kind: 'refund', status: 'done' }).lean()).reduce((sum, r) => sum + BigInt(r.amountRaw), 0n);
      await this.records.payments.updateOne({ _id: payment._id }, { $set: { refundedUsdcRaw: refunded.toString() } });
      this.logs.recordSoon({ orgId: payment.orgId, action: 'payments.refunded', category: 'payments', description: `Refunded ${formatUsdc(BigInt(op.amountRaw))} USDC to ${payment.payerAddress}${op.reason ? `: ${op.reason}` : ''}`, targetType: 'payment', targetId: payment._id, metadata: { txHash: result.txHash, refundId: op._id } });
    }
    await this.webhooks.notify(stored, payment);
    return { ok: true, op: stored };
  }

  // --- the sweep: operations whose sender stopped (the webhook engine sweeps their events) ----

  /** Gives pending operations older than STALE_MS to their lane again (the state check keeps a resend from moving money twice). */
  async sweep(): Promise<number> {
    const stale = await this.ops.find({ status: 'pending', createdAt: { $lt: new Date(Date.now() - STALE_MS) } }).sort({ createdAt: 1 }).limit(50).lean();
    let n = 0;
    for (const op of stale) {
      const payment = await this.records.record(op.paymentId);
      if (!payment?.escrow) continue;
      const owner = this.ownerOf(payment);
      if (!(await owner.path.canSettle(payment.escrow.paymentInfo.operator))) continue;
      await owner.run(payment, op).catch((err) => this.log.warn({ operation: op._id, err: (err as Error).message }, 'escrow operation not finished this round'));
      n++;
    }
    return n;
  }

  startSweep(everyMs: number): () => Promise<void> {
    return startRounds({ everyMs, round: () => this.sweep(), onError: (err) => this.log.error({ err: err.message }, 'escrow operation sweep failed') });
  }
}

