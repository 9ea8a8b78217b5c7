import { getAddress } from 'viem';
import { decodeExactPermit2PaymentHeader, type ExactPermit2PaymentPayloadV2 } from 'agentgate-x402-wire';
import type { ChainService } from '../../../../chain/chain-service.js';
import { permit2NonceUsed } from '../../../../chain/permit2.js';
import { EXACT_PERMIT2_CONTRACTS, exactPermitOf, type ExactPermit } from './chain.js';
import { describeContracts } from '../../../../chain/contract-code.js';
import { blockBefore } from '../../../../chain/authorization-events.js';
import { newId } from '../../../../platform/ids.js';
import type { Config } from '../../../../platform/config.js';
import type { PaymentDoc, SellerAccountDoc } from '../../../models.js';
import { OPEN } from '../../../records.js';
import type { ClaimOutcome, PaymentSettlement, SettleTerms } from '../../../payment-settlement.js';
import type { SettlementResult } from '../../../settlement.js';
import type { IdentifiedPayment } from '../../../payment-identifier.js';
import { requireChain } from '../../../chain-required.js';
import { RESEND_MARGIN_SECONDS, type HoldablePayment, type ReconcileRound, type Reconciled } from '../../scheme.js';
import { eip2612PermitRecord, findProxySettlementTx } from '../../permit2-proxy.js';
import { verifyExactPermit2Payment, type ExactPermit2Refused, type ExactPermit2Verified } from './permit2-verify.js';

// The x402 `exact` scheme through Permit2 (requirements with `extra.assetTransferMethod: "permit2"`): the
// buyer signs a Permit2 witness transfer of the price to the x402ExactPermit2Proxy; any relayer sends the
// proxy's settle, once per payment (the claim is the Permit2 nonce, a unique insert, as EIP-3009 exact
// claims its authorization). A buyer without a Permit2 allowance may bring its USDC permit
// (eip2612GasSponsoring: settleWithPermit) or its signed approve transaction (erc20ApprovalGasSponsoring:
// its gas funded if need be, broadcast, then settle). Records are the exact scheme's, marked
// `assetTransferMethod: "permit2"`; ExactScheme hands them here.


/** The unique claim of a Permit2 payment: one per Permit2 nonce of the payer (shared with upto: the nonce moves money once, whichever proxy spends it). */
export const permit2ClaimKey = (chainId: number, from: string, nonce: bigint | string) => `${chainId}:permit2:${from}:${BigInt(nonce)}`.toLowerCase();

export class ExactPermit2Payments {
  constructor(
    private readonly chain: ChainService | undefined,
    private readonly config: Config,
    private readonly path: PaymentSettlement,
    /** The ERC-8021 attribution a payment's settlement carries (builder-code.ts), from its extensions. */
    private readonly dataSuffixOf: (extensions: Record<string, unknown> | null | undefined) => { dataSuffix?: string },
  ) {}

  /** Checks a Permit2 exact payment against a seller's terms and the chain, moving nothing (the facilitator's /verify). */
  async verify(seller: SellerAccountDoc, payload: ExactPermit2PaymentPayloadV2, terms: { amountAtomic: bigint; payTo?: string }): Promise<ExactPermit2Verified | ExactPermit2Refused> {
    const chain = requireChain(this.chain);
    // Without them a settlement would "succeed" moving nothing (a call to an address without code does).
    const missing = chain.code.missing(EXACT_PERMIT2_CONTRACTS);
    if (missing.length) return { ok: false, reason: 'unsupported_scheme', message: `exact payments through Permit2 are not offered on ${chain.caip2}: ${describeContracts(missing)} ${missing.length === 1 ? 'has' : 'have'} no code there; pay with an EIP-3009 authorization` };
    return verifyExactPermit2Payment(payload, { payTo: getAddress(terms.payTo ?? seller.payTo), amountAtomic: terms.amountAtomic }, chain, {
      nowSeconds: Math.floor(Date.now() / 1000), marginSeconds: this.config.PAYMENT_VALIDITY_MARGIN_SECONDS,
    });
  }

  /** Verifies and claims the Permit2 nonce: of concurrent or replayed copies, exactly one insert succeeds. */
  async claim(seller: SellerAccountDoc, payload: ExactPermit2PaymentPayloadV2, terms: SettleTerms, how: { status: 'verified' } | { status: 'held'; until: Date }): Promise<ClaimOutcome> {
    const chain = requireChain(this.chain);
    const verified = await this.verify(seller, payload, terms);
    if (!verified.ok) return this.path.refused(terms.door, verified);
    await this.path.ensureCanSend(terms.door);
    const { permit } = verified;
    const payment: PaymentDoc = {
      _id: newId('pay'), orgId: seller._id, direction: 'in', endpointId: terms.endpoint?._id ?? null, network: chain.network, chainId: chain.chainId,
      asset: chain.usdc.address, payerAddress: permit.from, recipientAddress: permit.to, amountUsdcRaw: permit.amount.toString(),
      resourceUrl: terms.resource, x402Version: 2, assetTransferMethod: 'permit2',
      authorizationKey: permit2ClaimKey(chain.chainId, permit.from, permit.nonce),
      authorizationNonce: permit.nonce.toString(),
      authorization: { from: permit.from, to: permit.to, value: permit.amount.toString(), validAfter: permit.validAfter.toString(), validBefore: permit.deadline.toString(), nonce: permit.nonce.toString() },
      permit2Authorization: { ...payload.payload.permit2Authorization, nonce: permit.nonce.toString() },
      ...(verified.permit2612 ? { eip2612Permit: eip2612PermitRecord(verified.permit2612) } : {}),
      ...(verified.erc20Approval ? { erc20Approval: verified.erc20Approval } : {}),
      signature: verified.signature, status: how.status, createdAt: new Date(),
      ...this.dataSuffixOf(payload.extensions),
      ...(how.status === 'held' ? { holdExpiresAt: how.until } : {}),
    };
    return this.path.insertClaim(payment, terms.door, 'this permit was already presented');
  }

  /** Verify, claim the Permit2 nonce, settle on chain, record: for both doors, as EIP-3009 exact does. */
  async settle(seller: SellerAccountDoc, payload: ExactPermit2PaymentPayloadV2, terms: SettleTerms): Promise<SettlementResult> {
    const identified: IdentifiedPayment = { version: 2, payload };
    const { from, nonce } = payload.payload.permit2Authorization;
    return this.path.settleIdempotently(seller, identified, permit2ClaimKey(requireChain(this.chain).chainId, from, nonce), async () => {
      const claimed = await this.claim(seller, payload, terms, { status: 'verified' });
      if (!claimed.ok) return { answer: claimed.refused };
      return this.path.settleClaimed(claimed.payment, terms);
    });
  }

  holdable(paymentHeader: string): HoldablePayment {
    const decoded = decodeExactPermit2PaymentHeader(paymentHeader);
    if (!decoded.ok) return decoded;
    return {
      ok: true, validBefore: Number(decoded.payload.payload.permit2Authorization.deadline), instrument: 'permit',
      claim: (seller, terms, until) => this.claim(seller, decoded.payload, terms, { status: 'held', until }),
    };
  }

  // --- reconciliation --------------------------------------------------------------------------

  /**
   * Permit2's nonce bitmap decides. Used: the transaction that paid this record is recorded (none found:
   * the buyer cancelled the nonce). Unused and past its deadline: failed. Unused and valid: sent again by
   * any relayer of the deployment.
   */
  async reconcile(payment: PaymentDoc, round: ReconcileRound): Promise<Reconciled | { sending: Promise<Reconciled> }> {
    const { chain } = round;
    const permit = permitOfRecord(payment);
    const used = await permit2NonceUsed(chain.publicClient, permit.from, permit.nonce);
    const expired = !used && permit.deadline <= BigInt(Math.floor(Date.now() / 1000) + RESEND_MARGIN_SECONDS);
    if (!used && !expired && !(await round.canSettle())) return undefined;
    if (!(await round.claim(payment))) return undefined;
    const endpoint = await round.endpointOf(payment);
    if (used) {
      const txHash = await findProxySettlementTx(chain, 'exact', payment, await blockBefore(chain, payment.createdAt));
      if (!txHash) {
        await round.fail(payment, 'authorization_canceled', OPEN);
        return 'failed';
      }
      await round.markSettled(payment, txHash, endpoint);
      round.log?.info({ txHash }, 'reconciliation recorded a Permit2 exact settlement found on chain');
      return 'settled';
    }
    if (expired) {
      await round.fail(payment, 'authorization_expired', OPEN);
      return 'failed';
    }
    round.log?.info('reconciliation sends an open Permit2 exact payment again');
    return { sending: round.resend(payment) };
  }
}

/** The permit of a Permit2 exact record. */
export const permitOfRecord = (payment: Pick<PaymentDoc, 'permit2Authorization'>): ExactPermit => exactPermitOf(payment.permit2Authorization!);

/** Whether a record is a Permit2 exact one. */
export const isPermit2Record = (payment: Pick<PaymentDoc, 'assetTransferMethod'>) => payment.assetTransferMethod === 'permit2';
