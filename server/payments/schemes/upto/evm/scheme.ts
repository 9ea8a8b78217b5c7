import type { Address, Hex } from 'viem';
import { decodeUptoPaymentHeader, formatUsdc, isUptoPayload, parseCharge, type UptoPaymentPayloadV2 } from 'agentgate-x402-wire';
import type { ChainService } from '../../../../chain/chain-service.js';
import { permit2NonceUsed } from '../../../../chain/permit2.js';
import { blockBefore } from '../../../../chain/authorization-events.js';
import { AppError } from '../../../../platform/errors.js';
import { newId } from '../../../../platform/ids.js';
import type { Config } from '../../../../platform/config.js';
import type { SendTools } from '../../../../settlement/work.js';
import type { SettleOutcome } from '../../../../settlement/settler.js';
import type { PaymentDoc, SellerAccountDoc } from '../../../models.js';
import type { Endpoints } from '../../../endpoints.js';
import type { ClaimOutcome, PaymentSettlement } from '../../../payment-settlement.js';
import type { SettlementResult } from '../../../settlement.js';
import type { IdentifiedPayment } from '../../../payment-identifier.js';
import { requireChain } from '../../../chain-required.js';
import type { FacilitatorAnswer, FacilitatorRequest } from '../../../facilitator-api.js';
import { RESEND_MARGIN_SECONDS, type HoldablePayment, type PaymentScheme, type ReconcileRound, type Reconciled, type SupportedKind } from '../../scheme.js';
import { verifyUptoPayment } from './verify.js';
import { sendUptoSettlement, uptoPermitOfRecord } from './settle.js';
import { eip2612PermitOfRecord, eip2612PermitRecord, findProxySettlementTx } from '../../permit2-proxy.js';
import { UptoFacilitator, type UptoSettleTerms } from './facilitator.js';
import { UPTO_CONTRACTS } from './chain.js';

// The x402 `upto` scheme on EVM (v2): the buyer signs a Permit2 witness transfer for at most a maximum,
// naming the facilitator account that may settle it; the seller names the charge after the handler, and
// that account sends the x402 upto proxy's settle for it (never batched: the proxy accepts no other sender).

export type { UptoSettleTerms } from './facilitator.js';

export class UptoScheme implements PaymentScheme {
  readonly name = 'upto';
  readonly pricedByUsage = true;
  readonly paidInV1 = false;
  /** A buyer without a Permit2 allowance may send its USDC permit with the payment. */
  readonly extensions = ['eip2612GasSponsoring'];
  readonly contracts = UPTO_CONTRACTS;
  private readonly facilitator: UptoFacilitator;

  constructor(
    private readonly chain: ChainService | undefined,
    private readonly config: Config,
    private readonly path: PaymentSettlement,
    endpoints: Endpoints,
  ) {
    this.facilitator = new UptoFacilitator(this, endpoints);
  }

  /**
   * The accounts that settle `upto` payments: the relayer pool, one of which a buyer names in its permit
   * (read from the registry in a process given no keys; empty while no process with keys runs).
   */
  async facilitators(): Promise<Address[]> {
    requireChain(this.chain);
    return this.path.signers();
  }

  /** The facilitator address /supported offers to `upto` sellers (the pool's first relayer), if known. */
  async facilitatorAddress(): Promise<Address | undefined> {
    return (await this.facilitators())[0];
  }

  /** The buyer binds the facilitator that may settle into its permit: offered only while some process with keys runs. */
  supportedKinds(chain: ChainService, signers: readonly Address[]): SupportedKind[] {
    return signers[0] ? [{ x402Version: 2, scheme: 'upto', network: chain.caip2, extra: { facilitatorAddress: signers[0] } }] : [];
  }

  async sellerSettings(): Promise<Record<string, unknown>> {
    return { uptoFacilitator: await this.facilitatorAddress() };
  }

  // --- verify, claim, settle -------------------------------------------------------------------

  /** Checks an upto payment against a seller's terms and the chain, moving nothing (the facilitator's /verify). */
  async verify(seller: SellerAccountDoc, payload: UptoPaymentPayloadV2, terms: { maxAmount: bigint; payTo?: string }) {
    return verifyUptoPayment(payload, { payTo: (terms.payTo ?? seller.payTo) as Address, maxAmount: terms.maxAmount }, requireChain(this.chain), await this.facilitators(), {
      nowSeconds: Math.floor(Date.now() / 1000), marginSeconds: this.config.PAYMENT_VALIDITY_MARGIN_SECONDS,
    });
  }

  /**
   * Verifies an upto payment and claims its Permit2 nonce (a unique insert: of concurrent or replayed
   * copies exactly one gets through). The record's amount is the charge when known (settled at once),
   * else the maximum until the hold is captured.
   */
  async claim(seller: SellerAccountDoc, payload: UptoPaymentPayloadV2, terms: UptoSettleTerms, how: { status: 'verified'; charge: bigint } | { status: 'held'; until: Date }): Promise<ClaimOutcome> {
    const chain = requireChain(this.chain);
    const verified = await this.verify(seller, payload, terms);
    if (!verified.ok) return this.path.refused(terms.door, verified);
    const { permit } = verified;
    if (how.status === 'verified' && how.charge > permit.maxAmount) {
      return this.path.refused(terms.door, { reason: 'settlement_exceeds_amount', message: `the charge ${how.charge} is above the permit's maximum ${permit.maxAmount}`, payer: permit.from });
    }
    // Only the facilitator the buyer named can send the settlement: this process must hold that relayer.
    const charge = how.status === 'verified' ? how.charge : permit.maxAmount;
    if (charge > 0n || how.status === 'held') await this.path.ensureCanSendFrom(permit.facilitator, terms.door);
    const wire = payload.payload.permit2Authorization;
    const payment: PaymentDoc = {
      _id: newId('pay'), orgId: seller._id, direction: 'in', endpointId: terms.endpoint?._id ?? null, network: chain.network, chainId: chain.chainId,
      asset: chain.usdc.address, payerAddress: permit.from, recipientAddress: permit.to, amountUsdcRaw: charge.toString(),
      maxAmountUsdcRaw: permit.maxAmount.toString(), scheme: 'upto', resourceUrl: terms.resource, x402Version: 2,
      authorizationKey: `${chain.chainId}:permit2:${permit.from}:${permit.nonce}`.toLowerCase(),
      authorizationNonce: permit.nonce.toString(),
      authorization: { from: permit.from, to: permit.to, value: permit.maxAmount.toString(), validAfter: permit.validAfter.toString(), validBefore: permit.deadline.toString(), nonce: permit.nonce.toString() },
      permit2Authorization: { ...wire, nonce: permit.nonce.toString() },
      ...(verified.permit2612 ? { eip2612Permit: eip2612PermitRecord(verified.permit2612) } : {}),
      signature: verified.signature, status: how.status, createdAt: new Date(),
      ...(how.status === 'held' ? { holdExpiresAt: how.until } : {}),
    };
    return this.path.insertClaim(payment, terms.door, 'this permit was already presented');
  }

  /**
   * The facilitator API's settle: verify against the maximum, claim the Permit2 nonce, and charge
   * `charge` (at most the permit's maximum; zero moves nothing and sends no transaction, but the claim
   * stays: the permit is used up, as the scheme says).
   */
  async settle(seller: SellerAccountDoc, payload: UptoPaymentPayloadV2, terms: UptoSettleTerms & { charge: bigint }): Promise<SettlementResult> {
    const identified: IdentifiedPayment = { version: 2, payload };
    const { from, nonce } = payload.payload.permit2Authorization;
    const key = `${requireChain(this.chain).chainId}:permit2:${from}:${nonce}`.toLowerCase();
    return this.path.settleIdempotently(seller, identified, key, async () => {
      const claimed = await this.claim(seller, payload, terms, { status: 'verified', charge: terms.charge });
      if (!claimed.ok) return { answer: claimed.refused };
      return this.path.settleClaimed(claimed.payment, terms);
    });
  }

  // --- settlement work (on the process holding the lane the permit names) ----------------------

  /** Only the facilitator account the permit names can send its settlement. */
  laneOf(payment: PaymentDoc): string {
    return uptoPermitOfRecord(payment).facilitator.toLowerCase();
  }

  /** A zero charge moves nothing: no transaction (the permit expires unused), and the claim keeps it used here. */
  movesNothing(payment: PaymentDoc): boolean {
    return BigInt(payment.amountUsdcRaw) === 0n;
  }

  send(payment: PaymentDoc, tools: SendTools): Promise<SettleOutcome> {
    return sendUptoSettlement(requireChain(this.chain), tools, {
      permit: uptoPermitOfRecord(payment), signature: payment.signature as Hex, amount: BigInt(payment.amountUsdcRaw), paymentId: payment._id,
      permit2612: eip2612PermitOfRecord(payment), payment,
    });
  }

  // --- the facilitator API ---------------------------------------------------------------------

  handlesRequest(request: FacilitatorRequest): boolean {
    return request.paymentRequirements.scheme === 'upto' || isUptoPayload(request.paymentPayload);
  }

  verifyRequest(request: FacilitatorRequest, seller: SellerAccountDoc): Promise<FacilitatorAnswer> {
    return this.facilitator.verify(request, seller, requireChain(this.chain));
  }

  settleRequest(request: FacilitatorRequest, seller: SellerAccountDoc, network: string): Promise<FacilitatorAnswer> {
    return this.facilitator.settle(request, seller, requireChain(this.chain), network);
  }

  // --- holds: the registered endpoint sells by usage, and the charge is named at capture -------

  handlesPayload(payload: unknown): boolean {
    return isUptoPayload(payload);
  }

  /** Held for the maximum the middleware asked, which the permit must allow exactly. */
  holdable(paymentHeader: string): HoldablePayment {
    const decoded = decodeUptoPaymentHeader(paymentHeader);
    if (!decoded.ok) return decoded;
    return {
      ok: true, validBefore: Number(decoded.payload.payload.permit2Authorization.deadline), instrument: 'permit',
      claim: (seller, terms, until) => this.claim(seller, decoded.payload, { ...terms, maxAmount: terms.amountAtomic }, { status: 'held', until }),
    };
  }

  /** What the request used (USDC, "0.0123"): at most the permit's maximum, absent or "0" for nothing. */
  captureCharge(payment: PaymentDoc, amount: string | undefined): bigint {
    let charge: bigint;
    try { charge = amount === undefined ? 0n : parseCharge(amount); } catch (err) { throw new AppError(400, 'validation_error', `body.amount: ${(err as Error).message}`); }
    const max = BigInt(payment.maxAmountUsdcRaw!);
    if (charge > max) throw new AppError(400, 'settlement_exceeds_amount', `the charge ${formatUsdc(charge)} USDC is above the ${formatUsdc(max)} USDC the buyer allowed; nothing was charged`);
    return charge;
  }

  /** Only the account the permit names can send; a zero charge sends nothing. */
  async ensureCanSettle(payment: PaymentDoc, charge: bigint | undefined): Promise<void> {
    if ((charge ?? 0n) > 0n) await this.path.ensureCanSendFrom(uptoPermitOfRecord(payment).facilitator, 'redeem');
  }

  // --- reconciliation --------------------------------------------------------------------------

  /**
   * Permit2's nonce bitmap says whether the permit was used. Used: the transaction that paid this record's
   * charge is recorded (none found: the buyer cancelled the nonce). Unused and past its deadline: failed.
   * Unused and valid: sent again, by the process holding the facilitator account the permit names (only
   * it can). A zero charge sends nothing: it is recorded settled as it stands. A captured hold whose
   * process died before it wrote the charge (holds.ts writes it before sending anything) sent nothing,
   * and what the seller named is unknown, so nothing is charged.
   */
  async reconcile(payment: PaymentDoc, round: ReconcileRound): Promise<Reconciled> {
    if (payment.status === 'held') {
      if (!(await round.claim(payment))) return undefined;
      await round.fail(payment, 'capture_interrupted', ['held'], 'reconciliation closed an upto capture whose charge was never recorded: nothing was charged');
      return 'failed';
    }
    const { chain } = round;
    const permit = uptoPermitOfRecord(payment);
    const charge = BigInt(payment.amountUsdcRaw);
    const used = charge > 0n && await permit2NonceUsed(chain.publicClient, permit.from, permit.nonce);
    const expired = charge > 0n && !used && permit.deadline <= BigInt(Math.floor(Date.now() / 1000) + RESEND_MARGIN_SECONDS);
    if (charge > 0n && !used && !expired && !(await round.canSettle(permit.facilitator))) return undefined;
    if (!(await round.claim(payment))) return undefined;
    const endpoint = await round.endpointOf(payment);
    if (charge === 0n) {
      await round.markSettled(payment, '', endpoint);
      return 'settled';
    }
    if (used) {
      const txHash = await findProxySettlementTx(chain, 'upto', payment, await blockBefore(chain, payment.createdAt));
      if (!txHash) {
        await round.fail(payment, 'authorization_canceled', ['verified']);
        return 'failed';
      }
      await round.markSettled(payment, txHash, endpoint);
      round.log?.info({ txHash }, 'reconciliation recorded an upto settlement found on chain');
      return 'settled';
    }
    if (expired) {
      await round.fail(payment, 'authorization_expired', ['verified']);
      return 'failed';
    }
    const result = await round.resubmit(payment);
    if (!result || (!result.ok && result.reason === 'settle_unconfirmed')) return 'resent';
    return result.ok ? 'settled' : 'failed';
  }
}
