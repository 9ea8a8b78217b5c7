import { Schema, type Connection, type Model } from 'mongoose';
import { getAddress, keccak256, toHex, type Address, type Hex } from 'viem';
import { formatUsdc } from 'agentgate-x402-wire';
import type { ChainService } from '../../../../chain/chain-service.js';
import { authorizationState, type Authorization } from '../../../../chain/usdc.js';
import { blockBefore, findSettlementTx } from '../../../../chain/authorization-events.js';
import { AppError, isDuplicateKey } from '../../../../platform/errors.js';
import type { ActivityLog } from '../../../../platform/activity-log.js';
import type { Logger } from '../../../../platform/logger.js';
import { retryWhileDatabaseAway } from '../../../../platform/database-outage.js';
import type { SendTools, SettlementWork, WorkOutcome } from '../../../../settlement/work.js';
import type { WalletDoc } from '../../../../wallet/wallet-model.js';
import type { PaymentDoc, SignedReceipt } from '../../../models.js';
import type { PaymentRecords } from '../../../records.js';
import type { Endpoints } from '../../../endpoints.js';
import type { PaymentSettlement } from '../../../payment-settlement.js';
import { signRefundReceipt, type ReceiptSigner } from '../../../receipts.js';
import { RESEND_MARGIN_SECONDS } from '../../scheme.js';
import { startRounds } from '../../../../platform/rounds.js';
import type { DeliveryQueue } from '../../../../webhooks/webhook-service.js';
import { RefundWebhookOutbox, type RefundWebhookState } from '../../../refund-webhooks.js';

/**
 * Refunds of `exact` payments (no escrow): possible where the payment's payTo is the smart-account wallet
 * of an identity of the seller's own org. The wallet signs an EIP-3009 transfer of USDC back to the payer
 * (its owner key, checked by the account's ERC-1271, as payments_pay signs), and the transfer is sent
 * through the settlement engine like a payment's settlement. It is spending of that wallet: the owning
 * identity's mandate reserves it before anything is signed, and keeps it once it moved.
 *
 * As escrow refunds (schemes/auth-capture/evm/operations.ts): refunds of one payment are numbered
 * (`<payment>:refund:<n>`), the next number claimed by a unique insert only once the one before it is
 * final, so their sum never passes what was paid; an Idempotency-Key finds the refund it first made. The
 * authorization's nonce is derived from the refund's id, so the token moves a refund at most once
 * whoever sends it, and the chain says whether it moved: a run after a crash between sending and
 * recording asks the token first (the sweep does this for refunds left pending), as exact payments'
 * reconciliation does. Its outcome is decided once (a unique insert), which alone commits or releases the
 * mandate's reservation.
 */

/** What this needs of an identity's wallet (server/wallet/wallet-service.ts). */
export interface RefundWallets {
  /** The org's wallet at `address` on this chain, if it is one. */
  ofOrg(orgId: string, address: Address): Promise<WalletDoc | null>;
  balance(address: Address): Promise<bigint>;
  ensureDeployed(wallet: WalletDoc): Promise<void>;
  signTransfer(wallet: WalletDoc, authorization: Authorization): Promise<Hex>;
}

/** A mandate reservation (server/buyer/mandate-service.ts). */
export interface RefundReservation { reservationId: string; mandateId: string; day: string; amount: number }

/** What this needs of the wallet owner's mandates (server/buyer/mandate-service.ts). */
export interface RefundMandates {
  /** `url` null: a payment to no host. */
  reserve(owner: { orgId: string; identityId: string }, url: null, amount: bigint): Promise<{ ok: true; reservation: RefundReservation } | { ok: false; code: string; message: string }>;
  commit(reservation: RefundReservation): Promise<unknown>;
  release(reservation: RefundReservation): Promise<void>;
}

export interface ExactRefundDoc {
  _id: string;
  paymentId: string;
  orgId: string;
  seq: number;
  amountRaw: string;
  reason: string;
  idempotencyKey?: string;
  /** The wallet paying it back and the identity that owns it (whose mandate counts it). */
  wallet: { address: string; identityId: string };
  reservation: RefundReservation;
  authorization: { from: string; to: string; value: string; validAfter: string; validBefore: string; nonce: string };
  signature: string;
  status: 'pending' | 'done' | 'failed';
  txHash?: string;
  failureReason?: string;
  receipt?: SignedReceipt;
  /** payment.refunded outbox entry (refund-webhooks.ts hands it to the webhook engine). */
  webhook?: RefundWebhookState;
  createdAt: Date;
  doneAt?: Date;
}

const refundSchema = new Schema<ExactRefundDoc>({
  _id: String,
  paymentId: { type: String, required: true },
  orgId: { type: String, required: true },
  seq: { type: Number, required: true },
  amountRaw: { type: String, required: true },
  reason: { type: String, required: true },
  idempotencyKey: String,
  wallet: { type: Schema.Types.Mixed, required: true },
  reservation: { type: Schema.Types.Mixed, required: true },
  authorization: { type: Schema.Types.Mixed, required: true },
  signature: { type: String, required: true },
  status: { type: String, required: true },
  txHash: String,
  failureReason: String,
  receipt: Schema.Types.Mixed,
  webhook: Schema.Types.Mixed,
  createdAt: { type: Date, required: true },
  doneAt: Date,
}, { versionKey: false, minimize: false });
refundSchema.index({ paymentId: 1 });
refundSchema.index({ status: 1, createdAt: 1 });

/** The one outcome of a refund (`_id`: the refund's): its insert is what commits or releases the mandate. */
interface RefundOutcomeDoc { _id: string; status: 'done' | 'failed'; txHash?: string; failureReason?: string; at: Date }
const outcomeSchema = new Schema<RefundOutcomeDoc>({ _id: String, status: { type: String, required: true }, txHash: String, failureReason: String, at: { type: Date, required: true } }, { versionKey: false });

export const EXACT_REFUND_WORK_KIND = 'exact.refund';

export type ExactRefundOutcome = { ok: true; refund: ExactRefundDoc } | { ok: false; reason: string; message: string; refund?: ExactRefundDoc; pending?: true };

/** How long a refund's authorization stays valid: the sweep may send it again until then. */
const VALIDITY_SECONDS = 3600;
/** How long a pending refund is left to its sender before the sweep gives it to a lane again. */
const STALE_MS = 20_000;

/** The refund's EIP-3009 nonce: fixed by its id, so the token says whether this refund moved. */
export const refundNonce = (refundId: string): Hex => keccak256(toHex(`agentgate:exact-refund:${refundId}`));

const authorizationOf = (a: ExactRefundDoc['authorization']): Authorization => ({
  from: getAddress(a.from), to: getAddress(a.to), value: BigInt(a.value), validAfter: BigInt(a.validAfter), validBefore: BigInt(a.validBefore), nonce: a.nonce as Hex,
});

export class ExactRefunds {
  readonly refunds: Model<ExactRefundDoc>;
  /** payment.refunded: each recorded refund's event, handed to the webhook engine (refund-webhooks.ts). */
  readonly webhooks: RefundWebhookOutbox<ExactRefundDoc>;
  private readonly outcomes: Model<RefundOutcomeDoc>;

  constructor(
    conn: Connection,
    private readonly chain: () => ChainService,
    private readonly path: PaymentSettlement,
    private readonly records: PaymentRecords,
    private readonly endpoints: Endpoints,
    /** Where its payment.refunded and payment.voided events go (refund-webhooks.ts). */
    deliveries: DeliveryQueue,
    private readonly wallets: RefundWallets,
    private readonly mandates: RefundMandates,
    private readonly signer: () => ReceiptSigner,
    private readonly logs: ActivityLog,
    private readonly log: Logger,
  ) {
    this.refunds = conn.models.ExactRefund ?? conn.model<ExactRefundDoc>('ExactRefund', refundSchema, 'exact_refunds');
    this.outcomes = conn.models.ExactRefundOutcome ?? conn.model<RefundOutcomeDoc>('ExactRefundOutcome', outcomeSchema, 'exact_refund_outcomes');
    this.webhooks = new RefundWebhookOutbox({ records: this.refunds, payments: records, deliveries, log, eventOf: () => 'payment.refunded' });
  }

  /** The org's wallet the payment was paid to, or a refusal saying why there is none to refund from. */
  async walletOf(payment: PaymentDoc): Promise<WalletDoc> {
    const wallet = await this.wallets.ofOrg(payment.orgId, getAddress(payment.recipientAddress));
    // The wallet refunds in the chain's USDC, the asset it was paid in (a payment in another asset is not its to refund).
    const sameAsset = payment.asset.toLowerCase() === this.chain().usdc.address.toLowerCase();
    if (!wallet || wallet.chainId !== payment.chainId || !sameAsset) {
      throw new AppError(409, 'refund_not_possible', `payment ${payment._id} was settled with the exact scheme straight to ${payment.recipientAddress}, which is not an agentgate wallet of this org: agentgate cannot pay from it. Refund the buyer (${payment.payerAddress}) from that address yourself, or take payments to an identity's wallet (GET /v0/wallet) or on auth-capture (refundable) routes`);
    }
    return wallet;
  }

  /**
   * A refund of `amount` (atomic; default: what is left) of an exact payment paid to one of the org's
   * wallets. Refused before anything is decided when the amount is too much, the wallet cannot pay it,
   * or its owner's mandate does not allow it; with `idempotencyKey`, a repeat answers the first refund.
   */
  async refund(payment: PaymentDoc, amount: bigint | undefined, reason: string, idempotencyKey?: string): Promise<ExactRefundOutcome> {
    const wallet = await this.walletOf(payment);
    for (let attempt = 0; attempt < 50; attempt++) {
      const refunds = await this.list(payment._id);
      const repeat = idempotencyKey ? refunds.find((r) => r.idempotencyKey === idempotencyKey) : undefined;
      if (repeat) {
        if (amount !== undefined && BigInt(repeat.amountRaw) !== amount) {
          throw new AppError(409, 'idempotency_key_reused', `Idempotency-Key ${idempotencyKey} was used for a refund of ${formatUsdc(BigInt(repeat.amountRaw))} USDC; this asks ${formatUsdc(amount)}`);
        }
        return this.answerOf(repeat);
      }
      const last = refunds[refunds.length - 1];
      if (last && last.status === 'pending') throw new AppError(409, 'refund_in_progress', `refund ${last._id} of this payment is still being sent; ask again once it is done`, undefined, { 'Retry-After': '2' });
      const paid = BigInt(payment.amountUsdcRaw);
      const refunded = refunds.filter((r) => r.status === 'done').reduce((sum, r) => sum + BigInt(r.amountRaw), 0n);
      const left = paid - refunded;
      const asked = amount ?? left;
      if (asked <= 0n || asked > left) {
        throw new AppError(409, 'refund_exceeds_captured', `${formatUsdc(asked)} USDC is more than can be refunded: ${formatUsdc(paid)} paid, ${formatUsdc(refunded)} refunded already; nothing was refunded`);
      }
      const balance = await this.wallets.balance(getAddress(wallet.address));
      if (balance < asked) throw new AppError(409, 'refund_funding_unavailable', `the wallet ${wallet.address} this payment was paid to holds ${formatUsdc(balance)} USDC; the refund needs ${formatUsdc(asked)}. Nothing was refunded`);
      await this.path.ensureCanSend('redeem');
      // ERC-1271 needs the account's code: a wallet that only ever received is deployed first (idempotent).
      await this.wallets.ensureDeployed(wallet);

      const owner = { orgId: wallet.orgId, identityId: wallet.identityId };
      const reserved = await this.mandates.reserve(owner, null, asked);
      if (!reserved.ok) {
        // A concurrent refund of this payment may be what took the cap: then that refund is the answer.
        if ((await this.list(payment._id)).length !== refunds.length) continue;
        throw new AppError(409, reserved.code, `a refund from the wallet ${wallet.address} is spending of identity ${wallet.identityId}, under its mandate: ${reserved.message}. Nothing was refunded`);
      }
      const seq = refunds.length;
      const id = `${payment._id}:refund:${seq}`;
      let doc: ExactRefundDoc;
      try {
        const now = Math.floor(Date.now() / 1000);
        const authorization: Authorization = {
          from: getAddress(wallet.address), to: getAddress(payment.payerAddress), value: asked,
          validAfter: BigInt(now - 600), validBefore: BigInt(now + VALIDITY_SECONDS), nonce: refundNonce(id),
        };
        const signature = await this.wallets.signTransfer(wallet, authorization);
        doc = {
          _id: id, paymentId: payment._id, orgId: payment.orgId, seq, amountRaw: asked.toString(), reason,
          wallet: { address: wallet.address, identityId: wallet.identityId }, reservation: reserved.reservation,
          authorization: { from: authorization.from, to: authorization.to, value: asked.toString(), validAfter: authorization.validAfter.toString(), validBefore: authorization.validBefore.toString(), nonce: authorization.nonce },
          signature, status: 'pending', createdAt: new Date(), ...(idempotencyKey ? { idempotencyKey } : {}),
        };
        await this.refunds.create(doc);
      } catch (err) {
        // Not decided (this number went to another refund, or signing failed): the reservation goes back.
        await this.mandates.release(reserved.reservation);
        if (isDuplicateKey(err)) continue;
        throw err;
      }
      return this.run(doc);
    }
    throw new AppError(503, 'refund_contended', 'too many concurrent refunds of this payment; ask again');
  }

  /** The payment's refunds, oldest first. */
  list(paymentId: string): Promise<ExactRefundDoc[]> {
    return this.refunds.find({ paymentId }).sort({ seq: 1 }).lean();
  }

  private async answerOf(refund: ExactRefundDoc): Promise<ExactRefundOutcome> {
    if (refund.status === 'done') return { ok: true, refund };
    if (refund.status === 'failed') return { ok: false, reason: refund.failureReason ?? 'refund_failed', message: `the refund failed: ${refund.failureReason}`, refund };
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      const now = await this.refunds.findById(refund._id).lean();
      if (now && now.status !== 'pending') return this.answerOf(now);
    }
    return { ok: false, reason: 'refund_pending', message: 'the refund is still being sent; it goes on', refund, pending: true };
  }

  // --- sending (through the settlement engine, as a payment's settlement) ------------------------

  /** Gives a decided refund to a lane and waits for its outcome (recorded by the sender). */
  async run(refund: ExactRefundDoc): Promise<ExactRefundOutcome> {
    if (refund.status !== 'pending') return this.answerOf(refund);
    const outcome = await this.path.submit({ id: refund._id, kind: EXACT_REFUND_WORK_KIND, data: refund } satisfies SettlementWork<ExactRefundDoc>);
    if ('unavailable' in outcome) return { ok: false, reason: 'relayer_unavailable', message: `${outcome.unavailable}; the refund is decided and will be sent when a relayer is back`, refund, pending: true };
    return outcome.done as ExactRefundOutcome;
  }

  /**
   * The executor (registered on the engine under EXACT_REFUND_WORK_KIND): asks the token whether the
   * refund's nonce was used (an earlier run moved it), else sends the transfer, batched like payments. Safe
   * to run twice: the token moves one authorization once, and the settler names the first transaction.
   */
  readonly execute = async (work: SettlementWork, tools: SendTools): Promise<WorkOutcome> => {
    const refund = await this.refunds.findById((work.data as ExactRefundDoc)._id).lean();
    if (!refund) return { done: { ok: false, reason: 'refund_unknown', message: `no refund ${(work.data as ExactRefundDoc)._id}` } satisfies ExactRefundOutcome };
    if (refund.status !== 'pending') return { done: await this.answerOf(refund) };
    const chain = this.chain();
    const authorization = authorizationOf(refund.authorization);
    const used = await authorizationState({ client: chain.publicClient, token: chain.usdc.address, authorizer: authorization.from, nonce: authorization.nonce });
    if (used) {
      const txHash = refund.txHash ?? await findSettlementTx(chain, authorization.from, authorization.nonce, await blockBefore(chain, refund.createdAt));
      return { done: await this.finish(refund, { ok: true, txHash: txHash ?? '' }) };
    }
    if (authorization.validBefore <= BigInt(Math.floor(Date.now() / 1000) + RESEND_MARGIN_SECONDS)) {
      return { done: await this.finish(refund, { ok: false, reason: 'authorization_expired', message: 'the refund\'s authorization expired unused: nothing moved' }) };
    }
    const sent = await tools.transfer({ authorization, signature: refund.signature as Hex, paymentId: refund._id });
    if (sent.ok) return { done: await this.finish(refund, { ok: true, txHash: sent.txHash }) };
    if (sent.unavailable) return { unavailable: sent.message };
    if (sent.unconfirmed) {
      // It may still be mined: left pending, the sweep asks the token and finishes it.
      if (sent.txHash) await this.refunds.updateOne({ _id: refund._id, status: 'pending' }, { $set: { txHash: sent.txHash } });
      return { done: { ok: false, reason: 'refund_pending', message: `the refund transaction is not confirmed yet; it goes on`, refund, pending: true } satisfies ExactRefundOutcome };
    }
    // The token refused it, but it may have been used by an earlier run meanwhile: the chain decides.
    if (await authorizationState({ client: chain.publicClient, token: chain.usdc.address, authorizer: authorization.from, nonce: authorization.nonce })) {
      return { done: await this.finish(refund, { ok: true, txHash: sent.txHash ?? await findSettlementTx(chain, authorization.from, authorization.nonce, await blockBefore(chain, refund.createdAt)) ?? '' }) };
    }
    return { done: await this.finish(refund, { ok: false, reason: sent.reason, message: sent.message, ...(sent.txHash ? { txHash: sent.txHash } : {}) }) };
  };

  /**
   * Records what the chain did with a refund, once: the outcome's unique insert decides, and only its
   * winner commits or releases the mandate's reservation. Writing the refund's own record is idempotent.
   */
  private async finish(refund: ExactRefundDoc, result: { ok: true; txHash: string } | { ok: false; reason: string; message: string; txHash?: string }): Promise<ExactRefundOutcome> {
    const at = new Date();
    let first = true;
    try {
      await retryWhileDatabaseAway(() => this.outcomes.create({ _id: refund._id, status: result.ok ? 'done' : 'failed', ...(result.txHash ? { txHash: result.txHash } : {}), ...(result.ok ? {} : { failureReason: result.reason }), at }), this.log, 'recording a refund\'s outcome');
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      first = false;
    }
    const decided = first ? { status: result.ok ? 'done' as const : 'failed' as const, txHash: result.txHash, failureReason: result.ok ? undefined : result.reason, at } : (await this.outcomes.findById(refund._id).lean())!;
    const payment = await this.records.record(refund.paymentId);
    if (decided.status === 'failed') {
      if (first) {
        await this.mandates.release(refund.reservation);
        this.log.warn({ paymentId: refund.paymentId, refundId: refund._id, reason: decided.failureReason }, result.ok ? 'refund failed' : result.message);
      }
      await retryWhileDatabaseAway(() => this.refunds.updateOne({ _id: refund._id }, { $set: { status: 'failed', failureReason: decided.failureReason, doneAt: decided.at, ...(decided.txHash ? { txHash: decided.txHash } : {}) } }), this.log, 'recording a failed refund');
      const failed = (await this.refunds.findById(refund._id).lean())!;
      return { ok: false, reason: failed.failureReason ?? 'refund_failed', message: result.ok ? `the refund failed: ${failed.failureReason}` : result.message, refund: failed };
    }
    if (first) await this.mandates.commit(refund.reservation);
    const endpoint = payment?.endpointId ? await this.endpoints.byId(payment.orgId, payment.endpointId) : null;
    const webhook = endpoint?.webhookUrl ? { status: 'pending' as const, eventId: `evt_${refund._id.replace(/:/g, '_')}` } : undefined;
    const receipt = payment ? await signRefundReceipt(this.signer(), payment, refund, decided.txHash ?? '', decided.at) : undefined;
    // The receipt and webhook are set once (a later finisher finds them and leaves them).
    await retryWhileDatabaseAway(() => this.refunds.updateOne({ _id: refund._id, status: 'pending' }, { $set: { status: 'done', txHash: decided.txHash ?? '', doneAt: decided.at, ...(receipt ? { receipt } : {}), ...(webhook ? { webhook } : {}) } }), this.log, 'recording a refund');
    const stored = (await this.refunds.findById(refund._id).lean())!;
    if (!payment) return { ok: true, refund: stored };
    const refunded = (await this.refunds.find({ paymentId: payment._id, status: 'done' }).lean()).reduce((sum, r) => sum + BigInt(r.amountRaw), 0n);
    await this.records.payments.updateOne({ _id: payment._id }, { $set: { refundedUsdcRaw: refunded.toString() } });
    if (first) {
      this.logs.recordSoon({ orgId: payment.orgId, action: 'payments.refunded', category: 'payments', description: `Refunded ${formatUsdc(BigInt(refund.amountRaw))} USDC to ${payment.payerAddress} from the wallet ${refund.wallet.address}${refund.reason ? `: ${refund.reason}` : ''}`, targetType: 'payment', targetId: payment._id, metadata: { txHash: decided.txHash ?? null, refundId: refund._id, mandateId: refund.reservation.mandateId } });
      await this.webhooks.notify(stored, payment);
    }
    return { ok: true, refund: stored };
  }

  // --- the sweep: refunds whose sender stopped (a crash between sending and recording); the webhook engine sweeps their events

  /** Gives pending refunds older than STALE_MS to a lane again: the executor asks the token first, so nothing moves twice. */
  async sweep(): Promise<number> {
    const stale = await this.refunds.find({ status: 'pending', createdAt: { $lt: new Date(Date.now() - STALE_MS) } }).sort({ createdAt: 1 }).limit(50).lean();
    let n = 0;
    if (stale.length && await this.path.canSettle()) {
      for (const refund of stale) {
        await this.run(refund).catch((err) => this.log.warn({ refundId: refund._id, err: (err as Error).message }, 'refund not finished this round'));
        n++;
      }
    }
    return n;
  }

  startSweep(everyMs: number): () => Promise<void> {
    return startRounds({ everyMs, round: () => this.sweep(), onError: (err) => this.log.error({ err: err.message }, 'exact refund sweep failed') });
  }
}
