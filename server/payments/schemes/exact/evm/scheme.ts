import { getAddress, type Address } from 'viem';
import { type DecodedPaymentHeader, decodePaymentHeader, decodeExactPermit2PaymentHeader, isExactPermit2PaymentHeader, parsePrice } from 'agentgate-x402-wire';
import type { ChainService } from '../../../../chain/chain-service.js';
import { authorizationState } from '../../../../chain/usdc.js';
import { blockBefore, findSettlementTx } from '../../../../chain/authorization-events.js';
import { PayerReads } from '../../../../chain/payer-reads.js';
import { AppError } from '../../../../platform/errors.js';
import { newId } from '../../../../platform/ids.js';
import type { Config } from '../../../../platform/config.js';
import type { Logger } from '../../../../platform/logger.js';
import type { Metrics } from '../../../../platform/metrics.js';
import type { SendTools } from '../../../../settlement/work.js';
import type { SettleOutcome } from '../../../../settlement/settler.js';
import type { PaymentDoc, SellerAccountDoc } from '../../../models.js';
import type { Endpoints } from '../../../endpoints.js';
import { OPEN } from '../../../records.js';
import type { ClaimOutcome, PaymentSettlement, SettleTerms } from '../../../payment-settlement.js';
import type { SettlementResult } from '../../../settlement.js';
import { requireChain } from '../../../chain-required.js';
import type { FacilitatorAnswer, FacilitatorRequest } from '../../../facilitator-api.js';
import { RESEND_MARGIN_SECONDS, type HoldablePayment, type RedeemablePayment, type PaymentScheme, type ReconcileRound, type Reconciled, type SupportedKind } from '../../scheme.js';
import { verifyPayment } from './verify.js';
import { builderCodeSuffix, settlementBuilderCodes } from '../../../../chain/builder-code.js';
import { ExactFacilitator } from './facilitator.js';
import { ExactPermit2Payments, isPermit2Record } from './permit2.js';
import { authorizationOf, sendExactPermit2Settlement, sendExactTransfer } from './settle.js';

// The x402 `exact` scheme on EVM: the buyer signs an EIP-3009 transferWithAuthorization of USDC for the
// price; settlement sends it, batched with other payments into the next block's transaction (settler.ts).
// v1 and v2 payloads alike. The default scheme: a payment that names no other is read as this one. A v2
// payment through Permit2 (assetTransferMethod "permit2", with its gas sponsoring extensions) is the same
// scheme, verified, claimed, sent and reconciled by permit2.ts.

export class ExactScheme implements PaymentScheme {
  readonly name = 'exact';
  readonly pricedByUsage = false;
  readonly paidInV1 = true;
  /**
   * builder-code: the settlement carries the payment's ERC-8021 attribution (builder-code.ts). The gas
   * sponsoring extensions of Permit2 payments: a buyer without a Permit2 allowance sends its USDC permit,
   * or its signed approve transaction, with the payment.
   */
  readonly extensions = ['builder-code', 'eip2612GasSponsoring', 'erc20ApprovalGasSponsoring'];
  /** None beyond the token: its Permit2 path checks its own (EXACT_PERMIT2_CONTRACTS, permit2.ts). */
  readonly contracts = [];
  /** Payments through Permit2 (the x402ExactPermit2Proxy). */
  readonly permit2: ExactPermit2Payments;
  /** The chain reads of payments verified at the same time, in one Multicall3 call. */
  private readonly payerReads: PayerReads | undefined;
  private readonly facilitator: ExactFacilitator;
  /** ERC-6492: the factories a counterfactual wallet may be deployed from before it pays. */
  readonly allowedFactories: readonly string[];

  constructor(
    private readonly chain: ChainService | undefined,
    private readonly config: Config,
    private readonly path: PaymentSettlement,
    endpoints: Endpoints,
    log: Logger,
    metrics: Metrics,
  ) {
    this.payerReads = chain && new PayerReads(chain, config.MULTICALL3_ADDRESS as Address, {
      onCommand: (size) => metrics.payerReadBatchSize.observe(size),
      onFallback: (reason) => log.warn({ multicall: config.MULTICALL3_ADDRESS, reason }, 'verification reads fall back to two eth_calls per payment: Multicall3 did not answer at MULTICALL3_ADDRESS'),
    });
    this.permit2 = new ExactPermit2Payments(chain, config, path, (extensions) => this.dataSuffixOf(extensions, 2));
    this.facilitator = new ExactFacilitator(this, endpoints);
    this.allowedFactories = allowedFactories(config);
  }

  supportedKinds(chain: ChainService): SupportedKind[] {
    return [
      { x402Version: 1, scheme: 'exact', network: chain.network },
      { x402Version: 2, scheme: 'exact', network: chain.caip2 },
    ];
  }

  // --- verify, claim, settle -------------------------------------------------------------------

  /** Checks a payment against a seller's terms and the chain, moving nothing (the facilitator's /verify). */
  async verify(seller: SellerAccountDoc, decoded: DecodedPaymentHeader, terms: { amountAtomic: bigint; payTo?: string }) {
    return verifyPayment(decoded, { payTo: (terms.payTo ?? seller.payTo) as Address, amountAtomic: terms.amountAtomic }, requireChain(this.chain), {
      nowSeconds: Math.floor(Date.now() / 1000), marginSeconds: this.config.PAYMENT_VALIDITY_MARGIN_SECONDS, reads: this.payerReads,
      allowedFactories: this.allowedFactories,
    });
  }

  /**
   * Verifies a payment and claims its authorization: of any number of concurrent or replayed copies,
   * exactly one insert succeeds. `held` claims wait for the seller's capture or release (holds.ts);
   * `verified` ones are settled at once.
   */
  async claim(seller: SellerAccountDoc, decoded: DecodedPaymentHeader, terms: SettleTerms, how: { status: 'verified' } | { status: 'held'; until: Date }): Promise<ClaimOutcome> {
    const chain = requireChain(this.chain);
    const verified = await this.verify(seller, decoded, terms);
    if (!verified.ok) return this.path.refused(terms.door, verified);
    // A process that cannot send says so before claiming: nothing is recorded, the buyer may try again.
    await this.path.ensureCanSend(terms.door);

    const auth = verified.authorization;
    const payment: PaymentDoc = {
      _id: newId('pay'), orgId: seller._id, direction: 'in', endpointId: terms.endpoint?._id ?? null, network: chain.network, chainId: chain.chainId,
      asset: chain.usdc.address, payerAddress: verified.payer, recipientAddress: getAddress(auth.to), amountUsdcRaw: terms.amountAtomic.toString(),
      resourceUrl: terms.resource, x402Version: decoded.version,
      authorizationKey: `${chain.chainId}:${chain.usdc.address}:${verified.payer}:${auth.nonce}`.toLowerCase(),
      authorizationNonce: auth.nonce, authorization: { ...auth }, signature: verified.signature, status: how.status, createdAt: new Date(),
      ...this.dataSuffixOf(decoded.version === 2 ? decoded.payload.extensions : undefined, decoded.version),
      ...(how.status === 'held' ? { holdExpiresAt: how.until } : {}),
    };
    return this.path.insertClaim(payment, terms.door, 'this authorization was already presented');
  }

  /**
   * Verify, claim the authorization, settle on chain, record with a signed receipt: for both doors (our
   * middleware's redeem and the standard facilitator API). `endpoint` is null for a resource the seller
   * did not register (official SDK sellers): it is recorded by its URL.
   */
  async settle(seller: SellerAccountDoc, decoded: DecodedPaymentHeader, terms: SettleTerms): Promise<SettlementResult> {
    const chain = requireChain(this.chain);
    const { from, nonce } = decoded.payload.payload.authorization;
    const key = `${chain.chainId}:${chain.usdc.address}:${from}:${nonce}`.toLowerCase();
    return this.path.settleIdempotently(seller, decoded, key, async () => {
      const claimed = await this.claim(seller, decoded, terms, { status: 'verified' });
      if (!claimed.ok) return { answer: claimed.refused };
      return this.path.settleClaimed(claimed.payment, terms);
    });
  }

  /** The ERC-8021 attribution the settlement carries (builder-code.ts), if any. */
  private dataSuffixOf(extensions: Record<string, unknown> | null | undefined, version: 1 | 2): { dataSuffix?: string } {
    const suffix = builderCodeSuffix(settlementBuilderCodes(extensions ?? undefined, version, { walletCode: this.config.BUILDER_CODE, serviceCode: this.config.BUILDER_SERVICE_CODE }));
    return suffix ? { dataSuffix: suffix } : {};
  }

  // --- settlement work (on the process holding a lane) -----------------------------------------

  /** Any relayer may send a transfer with authorization. */
  laneOf(): undefined {
    return undefined;
  }

  /** A transfer with authorization, batched with the others of the next block; or the Permit2 proxy's settle (settle.ts). */
  send(payment: PaymentDoc, tools: SendTools): Promise<SettleOutcome> {
    const chain = requireChain(this.chain);
    return isPermit2Record(payment) ? sendExactPermit2Settlement(chain, payment, tools) : sendExactTransfer(chain, this.allowedFactories, payment, tools);
  }

  // --- the facilitator API ---------------------------------------------------------------------

  handlesRequest(request: FacilitatorRequest): boolean {
    return request.paymentRequirements.scheme === 'exact';
  }

  verifyRequest(request: FacilitatorRequest, seller: SellerAccountDoc): Promise<FacilitatorAnswer> {
    return this.facilitator.verify(request, seller, requireChain(this.chain));
  }

  settleRequest(request: FacilitatorRequest, seller: SellerAccountDoc, network: string): Promise<FacilitatorAnswer> {
    return this.facilitator.settle(request, seller, requireChain(this.chain), network);
  }

  // --- holds (settle after the handler) --------------------------------------------------------

  /** The default: a header no other scheme claims is read (or refused) as an exact payment. */
  handlesPayload(): boolean {
    return true;
  }

  redeemable(paymentHeader: string): RedeemablePayment {
    if (isExactPermit2PaymentHeader(paymentHeader)) {
      const permit2 = decodeExactPermit2PaymentHeader(paymentHeader);
      if (!permit2.ok) return permit2;
      return { ok: true, version: 2, settle: (seller, terms) => this.permit2.settle(seller, permit2.payload, terms) };
    }
    const decoded = decodePaymentHeader(paymentHeader);
    if (!decoded.ok) return decoded;
    return { ok: true, version: decoded.version, settle: (seller, terms) => this.settle(seller, decoded, terms) };
  }

  holdable(paymentHeader: string): HoldablePayment {
    if (isExactPermit2PaymentHeader(paymentHeader)) return this.permit2.holdable(paymentHeader);
    const decoded = decodePaymentHeader(paymentHeader);
    if (!decoded.ok) return decoded;
    return {
      ok: true, validBefore: Number(decoded.payload.payload.authorization.validBefore), instrument: 'authorization',
      claim: (seller, terms, until) => this.claim(seller, decoded, terms, { status: 'held', until }),
    };
  }

  /** An exact payment is captured for its price: an amount, if given, must be that price. */
  captureCharge(payment: PaymentDoc, amount: string | undefined): undefined {
    if (amount !== undefined && parsePriceOrUndefined(amount) !== BigInt(payment.amountUsdcRaw)) {
      throw new AppError(400, 'validation_error', 'body.amount: an exact payment is captured for its price; leave amount out');
    }
    return undefined;
  }

  ensureCanSettle(): Promise<void> {
    return this.path.ensureCanSend('redeem');
  }

  // --- reconciliation --------------------------------------------------------------------------

  /**
   * The token's own record of the authorization decides: used, the transaction that used it (its
   * AuthorizationUsed event) is recorded as the settlement; unused and expired, failed (nothing moved and
   * nothing can); unused and still valid, sent again through a lane of this deployment (the token lets it
   * move money once, whoever sends it), together with the round's other resends so they share transactions.
   */
  async reconcile(payment: PaymentDoc, round: ReconcileRound): Promise<Reconciled | { sending: Promise<Reconciled> }> {
    if (isPermit2Record(payment)) return this.permit2.reconcile(payment, round);
    const { chain } = round;
    const auth = authorizationOf(payment);
    const used = await authorizationState({ client: chain.publicClient, token: chain.usdc.address, authorizer: auth.from, nonce: auth.nonce });
    const expired = !used && auth.validBefore <= BigInt(Math.floor(Date.now() / 1000) + RESEND_MARGIN_SECONDS);
    // While no lane can send, it waits for the next round.
    if (!used && !expired && !(await round.canSettle())) return undefined;
    if (!(await round.claim(payment))) return undefined;
    const endpoint = await round.endpointOf(payment);
    if (used) {
      const txHash = await findSettlementTx(chain, auth.from, auth.nonce, await blockBefore(chain, payment.createdAt));
      if (!txHash) {
        await round.fail(payment, 'authorization_canceled', OPEN);
        return 'failed';
      }
      await round.markSettled(payment, txHash, endpoint);
      round.log?.info({ txHash }, 'reconciliation recorded a settlement found on chain');
      return 'settled';
    }
    if (expired) {
      await round.fail(payment, 'authorization_expired', OPEN);
      return 'failed';
    }
    round.log?.info('reconciliation sends an open payment again');
    return { sending: round.resend(payment) };
  }
}

function parsePriceOrUndefined(amount: string): bigint | undefined {
  try { return parsePrice(amount); } catch { return undefined; }
}

/** The ERC-6492 factories allowed: EIP6492_ALLOWED_FACTORIES, and in dev mode our own wallet factory too. */
export function allowedFactories(config: Config): string[] {
  const dev = config.mode === 'dev' && config.WALLET_FACTORY_ADDRESS ? [config.WALLET_FACTORY_ADDRESS] : [];
  return [...config.EIP6492_ALLOWED_FACTORIES, ...dev];
}
