import { getAddress, isAddressEqual, type Address, type Hex } from 'viem';
import { AUTH_CAPTURE, type AuthCapturePaymentPayload, authCaptureReason, type AuthCaptureRequirements, collectTerms, decodeAuthCapturePaymentHeader, formatUsdc, isAuthCapturePayload, parseCharge } from 'agentgate-x402-wire';
import { AUTH_CAPTURE_CONTRACTS, AUTH_CAPTURE_ESCROW_ADDRESS, escrowState, storedPaymentInfo } from './chain.js';
import type { ChainService } from '../../../../chain/chain-service.js';
import { AppError } from '../../../../platform/errors.js';
import { newId } from '../../../../platform/ids.js';
import type { Config } from '../../../../platform/config.js';
import type { SendTools } from '../../../../settlement/work.js';
import type { SettleOutcome } from '../../../../settlement/settler.js';
import type { PaymentDoc, SellerAccountDoc } from '../../../models.js';
import type { Endpoints } from '../../../endpoints.js';
import type { ClaimOutcome, PaymentSettlement, SettleTerms } from '../../../payment-settlement.js';
import type { SettlementResult } from '../../../settlement.js';
import { requireChain } from '../../../chain-required.js';
import type { FacilitatorAnswer, FacilitatorRequest } from '../../../facilitator-api.js';
import { RESEND_MARGIN_SECONDS, type HoldablePayment, type PaymentScheme, type ReconcileRound, type Reconciled, type SupportedKind } from '../../scheme.js';
import { verifyAuthCapture, type AuthCaptureRefused, type AuthCaptureVerified } from './verify.js';
import { OP_WORK_KIND, type AuthCaptureOperations } from './operations.js';
import { AuthCaptureFacilitator } from './facilitator.js';
import { findAuthorizeTx, sendAuthorize } from './settle.js';

// The x402 `auth-capture` scheme on EVM (v2): the buyer authorizes a payment into Base's Commerce
// Payments escrow (AuthCaptureEscrow); we are its operator (the `captureAuthorizer`, one of our relayers),
// so the payment's settlement is the escrow's `authorize`, sent from that relayer's lane: the buyer's money
// is then held in escrow. What follows is decided by the seller through our API (out of band, as the spec
// puts a delegated operator without a receiver authorizer): capture after the handler succeeded, void
// after it failed or when the hold expires, refunds of what was captured (operations.ts).

const R = authCaptureReason;

export class AuthCaptureScheme implements PaymentScheme {
  readonly name = AUTH_CAPTURE;
  readonly pricedByUsage = false;
  readonly paidInV1 = false;
  readonly extensions = [];
  readonly contracts = AUTH_CAPTURE_CONTRACTS;
  readonly otherWork;
  /** The facilitator API's /verify and /settle of this scheme (facilitator.ts). */
  private readonly facilitator = new AuthCaptureFacilitator(this);

  constructor(
    private readonly chain: ChainService | undefined,
    readonly config: Config,
    private readonly path: PaymentSettlement,
    readonly endpoints: Endpoints,
    readonly operations: AuthCaptureOperations,
  ) {
    this.otherWork = { [OP_WORK_KIND]: operations.execute };
  }

  /** The accounts we submit from: any of them can be a payment's operator. */
  operators(): Promise<Address[]> {
    requireChain(this.chain);
    return this.path.signers();
  }

  /** The operator /supported and the seller settings offer: the pool's first relayer, while a process with keys runs. */
  supportedKinds(chain: ChainService, signers: readonly Address[]): SupportedKind[] {
    return signers[0] ? [{ x402Version: 2, scheme: AUTH_CAPTURE, network: chain.caip2, extra: { captureAuthorizer: signers[0], authCaptureEscrow: AUTH_CAPTURE_ESCROW_ADDRESS, minFeeBps: 0, maxFeeBps: 0, operators: [] } }] : [];
  }

  async sellerSettings(): Promise<Record<string, unknown>> {
    const [operator] = await this.operators();
    return operator ? { authCaptureOperator: operator, authCaptureEscrow: AUTH_CAPTURE_ESCROW_ADDRESS } : {};
  }

  // --- verify, claim, authorize ----------------------------------------------------------------

  async verify(payload: AuthCapturePaymentPayload, requirements: AuthCaptureRequirements): Promise<AuthCaptureVerified | AuthCaptureRefused> {
    return verifyAuthCapture(payload, requirements, requireChain(this.chain), await this.operators(), {
      nowSeconds: Math.floor(Date.now() / 1000), marginSeconds: this.config.PAYMENT_VALIDITY_MARGIN_SECONDS,
    });
  }

  /**
   * Verifies and claims the payment (a unique insert of the escrow's payment hash: of replayed or
   * concurrent copies one gets through), then authorizes it on chain; the answer is the authorization's.
   * `until`: when a hold nobody decides is voided.
   */
  async authorize(seller: SellerAccountDoc, payload: AuthCapturePaymentPayload, requirements: AuthCaptureRequirements, terms: SettleTerms, until: Date): Promise<{ claimed: ClaimOutcome; answer?: SettlementResult }> {
    const chain = requireChain(this.chain);
    const verified = await this.verify(payload, requirements);
    if (!verified.ok) return { claimed: this.path.refused(terms.door, verified) };
    await this.path.ensureCanSendFrom(verified.paymentInfo.operator, terms.door);
    const wire = payload.payload;
    const t = collectTerms(wire);
    const payment: PaymentDoc = {
      _id: newId('pay'), orgId: seller._id, direction: 'in', endpointId: terms.endpoint?._id ?? null, network: chain.network, chainId: chain.chainId,
      asset: chain.usdc.address, payerAddress: verified.payer, recipientAddress: verified.paymentInfo.receiver, amountUsdcRaw: t.amount.toString(),
      maxAmountUsdcRaw: t.amount.toString(), scheme: AUTH_CAPTURE, resourceUrl: terms.resource, x402Version: 2,
      authorizationKey: `${chain.chainId}:auth-capture:${verified.hash}`.toLowerCase(),
      authorizationNonce: t.nonce.toString(),
      authorization: { from: verified.payer, to: verified.collector, value: t.amount.toString(), validAfter: '0', validBefore: t.expiry.toString(), nonce: t.nonce.toString() },
      signature: wire.signature, status: 'verified', createdAt: new Date(), holdExpiresAt: until,
      escrow: { hash: verified.hash, paymentInfo: storedPaymentInfo(verified.paymentInfo), method: verified.method, collector: verified.collector },
    };
    const claimed = await this.path.insertClaim(payment, terms.door, 'this authorization was already presented');
    if (!claimed.ok) return { claimed };
    const { answer } = await this.path.settleClaimed(payment, terms);
    if (!answer.ok) return { claimed: { ok: false, refused: answer }, answer };
    return { claimed: { ok: true, payment: { ...payment, status: 'held', txHash: answer.txHash } }, answer };
  }

  // --- settlement work: the authorize, from the operator's lane ---------------------------------

  laneOf(payment: PaymentDoc): string {
    return payment.escrow!.paymentInfo.operator.toLowerCase();
  }

  /** The escrow's authorize, from the operator's lane (settle.ts). */
  send(payment: PaymentDoc, tools: SendTools): Promise<SettleOutcome> {
    return sendAuthorize(requireChain(this.chain), payment, tools);
  }

  /**
   * An authorized payment is held, not settled: the record keeps its authorize transaction and waits for
   * the seller's capture (its settlement, with the receipts and payment.received) or void.
   */
  async recordSent(payment: PaymentDoc, txHash: string): Promise<SettlementResult> {
    await this.path.records.payments.updateOne({ _id: payment._id, status: 'verified' }, { $set: { status: 'held', 'escrow.authorizeTx': txHash } });
    return { ok: true, paymentId: payment._id, txHash, payer: payment.payerAddress, amount: payment.amountUsdcRaw };
  }

  // --- the facilitator API ---------------------------------------------------------------------

  handlesRequest(request: FacilitatorRequest): boolean {
    return request.paymentRequirements.scheme === AUTH_CAPTURE || isAuthCapturePayload(request.paymentPayload);
  }

  verifyRequest(request: FacilitatorRequest, seller: SellerAccountDoc): Promise<FacilitatorAnswer> {
    return this.facilitator.verifyRequest(request, seller);
  }

  settleRequest(request: FacilitatorRequest, seller: SellerAccountDoc, network: string): Promise<FacilitatorAnswer> {
    return this.facilitator.settleRequest(request, seller, network);
  }

  // --- holds: authorize before the handler, capture after a success, void after a failure -------

  handlesPayload(payload: unknown): boolean {
    return isAuthCapturePayload(payload);
  }

  /**
   * Our middleware's hold: the payload checked against the seller's own terms (its payee, price, the
   * operator we offered), then authorized into escrow before the handler runs. The capture deadline is
   * what bounds the hold.
   */
  holdable(paymentHeader: string): HoldablePayment {
    const decoded = decodeAuthCapturePaymentHeader(paymentHeader);
    if (!decoded.ok) return { ok: false, reason: decoded.reason === 'invalid_payload_format' ? R('payload_format') : 'invalid_payload', message: decoded.message };
    const payload = decoded.payload;
    return {
      ok: true, validBefore: payload.accepted.extra.captureDeadline, instrument: 'capture deadline',
      claim: async (seller, terms, until) => {
        const accepted = payload.accepted;
        if (BigInt(accepted.amount) !== terms.amountAtomic) return this.path.refused(terms.door, { reason: R('amount_mismatch'), message: `the payment is for ${accepted.amount}; this route costs ${terms.amountAtomic}` });
        if (!isAddressEqual(accepted.payTo as Address, (terms.payTo ?? seller.payTo) as Address)) return this.path.refused(terms.door, { reason: 'recipient_mismatch', message: `the payment pays ${accepted.payTo}, not ${terms.payTo ?? seller.payTo}` });
        const { claimed } = await this.authorize(seller, payload, accepted, terms, until);
        return claimed;
      },
    };
  }

  /** Up to what was authorized (USDC, "0.0123"); absent: all of it. */
  captureCharge(payment: PaymentDoc, amount: string | undefined): bigint | undefined {
    if (amount === undefined) return undefined;
    let charge: bigint;
    try { charge = parseCharge(amount); } catch (err) { throw new AppError(400, 'validation_error', `body.amount: ${(err as Error).message}`); }
    const max = BigInt(payment.maxAmountUsdcRaw!);
    if (charge <= 0n || charge > max) throw new AppError(400, 'settlement_exceeds_amount', `a capture is more than 0 and at most the ${formatUsdc(max)} USDC authorized`);
    return charge;
  }

  /**
   * Before holds.ts decides the capture: an operator that can send, and the parties screened again (they may
   * have been listed since the authorization was held). A refusal leaves the hold as it was, for the seller
   * to release: screened after the decision, a listed party's capture was refused with the hold decided
   * "capture" all the same, which no release could undo (409).
   */
  async ensureCanSettle(payment: PaymentDoc): Promise<void> {
    await this.path.ensureCanSendFrom(getAddress(payment.escrow!.paymentInfo.operator), 'redeem');
    const screened = await this.path.screen(payment, 'redeem');
    if (screened) throw new AppError(402, screened.refused.reason, `${screened.refused.message}; the hold stays, for the seller to release`);
  }

  /** The capture (holds.ts decided it, after ensureCanSettle): the escrow's capture, recorded as the payment's settlement. */
  async captureHold(payment: PaymentDoc, charge: bigint | undefined): Promise<SettlementResult> {
    const amount = charge ?? BigInt(payment.maxAmountUsdcRaw ?? payment.amountUsdcRaw);
    // What is captured is on the record before anything is sent (reconciliation captures what it says).
    if (amount.toString() !== payment.amountUsdcRaw) await this.path.records.payments.updateOne({ _id: payment._id, status: 'held' }, { $set: { amountUsdcRaw: amount.toString() } });
    const outcome = await this.operations.capture({ ...payment, amountUsdcRaw: amount.toString() }, amount);
    if (!outcome.ok) {
      if (outcome.pending) return { ok: false, reason: 'settle_unconfirmed', message: outcome.message, payer: payment.payerAddress };
      return { ok: false, reason: outcome.reason, message: outcome.message, payer: payment.payerAddress };
    }
    const record = await this.path.records.record(payment._id);
    return { ok: true, paymentId: payment._id, txHash: outcome.op.txHash ?? '', payer: payment.payerAddress, amount: outcome.op.amountRaw, ...(record?.offerReceipt ? { offerReceipt: record.offerReceipt } : {}) };
  }

  /** A release (the handler failed, or the hold expired): the authorization is voided, the buyer made whole. */
  async releaseHold(payment: PaymentDoc): Promise<void> {
    const outcome = await this.operations.void(payment);
    if (!outcome.ok && !outcome.pending && outcome.reason !== 'nothing_to_void' && outcome.reason !== 'reclaimed_by_payer') throw new AppError(502, outcome.reason, outcome.message);
  }

  // --- reconciliation --------------------------------------------------------------------------

  /**
   * `verified`: the authorize was sent and not recorded. Collected: the payment is held (and, its buyer
   * not served, voided by the expiry sweep). Not collected: sent again while the signature is valid,
   * else failed. `held` with a capture decision: the capture is run (again): its unique operation and
   * the escrow state check keep it to one.
   */
  async reconcile(payment: PaymentDoc, round: ReconcileRound): Promise<Reconciled> {
    const escrow = payment.escrow!;
    if (payment.status === 'held') {
      if (!(await round.canSettle(escrow.paymentInfo.operator))) return undefined;
      if (!(await round.claim(payment))) return undefined;
      const outcome = await this.operations.capture(payment, BigInt(payment.amountUsdcRaw));
      return outcome.ok ? 'settled' : outcome.pending ? 'resent' : 'failed';
    }
    const state = await escrowState(round.chain.publicClient, escrow.hash as Hex);
    if (state.hasCollectedPayment) {
      if (!(await round.claim(payment))) return undefined;
      const txHash = await findAuthorizeTx(round.chain, payment);
      await this.path.records.payments.updateOne({ _id: payment._id, status: 'verified' }, { $set: { status: 'held', holdExpiresAt: new Date(), ...(txHash ? { 'escrow.authorizeTx': txHash } : {}) } });
      round.log?.info({ txHash }, 'reconciliation found an auth-capture payment authorized on chain: held, to be voided');
      return 'settled';
    }
    const expiry = Number(payment.authorization.validBefore);
    if (expiry <= Math.floor(Date.now() / 1000) + RESEND_MARGIN_SECONDS) {
      if (!(await round.claim(payment))) return undefined;
      await round.fail(payment, R('authorization_expired'), ['verified']);
      return 'failed';
    }
    if (!(await round.canSettle(escrow.paymentInfo.operator))) return undefined;
    if (!(await round.claim(payment))) return undefined;
    return round.resend(payment);
  }
}
