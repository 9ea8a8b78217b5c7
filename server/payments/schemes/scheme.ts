import type { Address } from 'viem';
import { decodeBase64Json } from 'agentgate-x402-wire';
import type { ChainService } from '../../chain/chain-service.js';
import { describeContracts, type RequiredContract } from '../../chain/contract-code.js';
import type { Metrics } from '../../platform/metrics.js';
import type { Logger } from '../../platform/logger.js';
import type { EndpointDoc, PaymentDoc, SellerAccountDoc } from '../models.js';
import type { ClaimOutcome, PaymentSettlement, SchemeSettler, SettleTerms } from '../payment-settlement.js';
import type { SettlementResult } from '../settlement.js';
import type { FacilitatorAnswer, FacilitatorRequest } from '../facilitator-api.js';

// What a payment scheme is to the rest of the payments area, and the registry that finds a request's
// scheme. A scheme (schemes/<scheme>/evm/) verifies its own payload kind, claims and settles over the shared
// settlement path (payment-settlement.ts), sends its settlement work, answers the facilitator API for its
// kind, says what /supported offers of it, and finishes its payments left open (reconcile.ts). Adding a
// scheme is writing such a module and registering it (payment-service.ts).

/** One entry of the facilitator's `/supported` kinds. */
export interface SupportedKind { x402Version: 1 | 2; scheme: string; network: string; extra?: Record<string, unknown> }

/** A buyer's payment header read for a hold: how long it stays valid, and its claim as a held payment. */
export type HoldablePayment =
  | { ok: false; reason: string; message: string }
  | {
    ok: true;
    /** Unix seconds: settlement must still be possible when the handler is done. */
    validBefore: number;
    /** What expires ("authorization", "permit"), for the refusal when too little time is left. */
    instrument: string;
    /** Verifies and claims it, held until `until`. */
    claim(seller: SellerAccountDoc, terms: SettleTerms, until: Date): Promise<ClaimOutcome>;
  };

/** A buyer's payment header read for a redeem (settled before the handler), or why it cannot be. */
export type RedeemablePayment =
  | { ok: false; reason: string; message: string }
  | {
    ok: true;
    /** The x402 version of the payload: the settlement header answers in its form. */
    version: 1 | 2;
    /** Verifies, claims and settles it for the seller's terms. */
    settle(seller: SellerAccountDoc, terms: SettleTerms): Promise<SettlementResult>;
  };

/** What reconciliation did with an open payment; undefined: nothing this round (another process, or later). */
export type Reconciled = 'settled' | 'failed' | 'resent' | undefined;

/** Seconds of validity a payment needs left to be worth sending again. */
export const RESEND_MARGIN_SECONDS = 6;

/** What one reconciliation round (reconcile.ts) offers a scheme finishing one of its open payments. */
export interface ReconcileRound {
  readonly chain: ChainService;
  readonly log: Logger | undefined;
  /** Takes the payment for this round (one process acts on it); false: another process has it. */
  claim(payment: PaymentDoc): Promise<boolean>;
  /** Whether some lane of the deployment can send now (`lane`: that relayer). */
  canSettle(lane?: string): Promise<boolean>;
  endpointOf(payment: PaymentDoc): Promise<EndpointDoc | null>;
  markSettled(payment: PaymentDoc, txHash: string, endpoint: EndpointDoc | null): Promise<void>;
  /** Closes the payment as failed if its status is still one of `from`. */
  fail(payment: PaymentDoc, reason: string, from: PaymentDoc['status'][], message?: string): Promise<void>;
  /** Gives it to a lane again; undefined if nothing was sent. */
  resubmit(payment: PaymentDoc): Promise<SettlementResult | undefined>;
  /** The same, its outcome logged and counted as reconciliation's. */
  resend(payment: PaymentDoc): Promise<Reconciled>;
}

export interface PaymentScheme extends SchemeSettler {
  /** Whether its charge is named after the handler (upto): only an endpoint priced by usage (maxPriceUsdc) may take it. */
  readonly pricedByUsage: boolean;
  /** Whether x402 v1 clients can pay it (a refusal of our middleware's door then names the v1 requirement). */
  readonly paidInV1: boolean;
  /** The facilitator extensions this scheme brings (beyond the facilitator's own). */
  readonly extensions: readonly string[];
  /** The contracts it cannot work without: where one has no code, the scheme is refused on this chain (PaymentSchemes.checkContracts). */
  readonly contracts: readonly RequiredContract[];
  /** The `/supported` kinds this scheme offers on this chain with this pool of relayers (`signers`). */
  supportedKinds(chain: ChainService, signers: readonly Address[]): SupportedKind[];
  /** Resolves once what the scheme offers in /supported is loaded (a key kept in the database). */
  ready?(): Promise<void>;
  /** What the scheme adds to the settings a seller's middleware caches (GET /v0/payments/settings). */
  sellerSettings?(): Promise<Record<string, unknown>>;

  /** Whether a facilitator API request (its requirements or payload) is of this scheme. */
  handlesRequest(request: FacilitatorRequest): boolean;
  /** The facilitator's /verify of a request of this scheme, for the seller whose key called. `network`: the request's, as answers name it. */
  verifyRequest(request: FacilitatorRequest, seller: SellerAccountDoc, network: string): Promise<FacilitatorAnswer>;
  /** The facilitator's /settle of a request of this scheme. */
  settleRequest(request: FacilitatorRequest, seller: SellerAccountDoc, network: string): Promise<FacilitatorAnswer>;

  /** Whether our middleware's payment header (redeem or hold), decoded once by PaymentSchemes.forHeader, is of this scheme. */
  handlesPayload(payload: unknown): boolean;
  /**
   * The header read for a redeem (settle before the handler), or why it cannot be. A scheme without it
   * (upto, auth-capture: the charge or the capture comes after the handler) is only ever held.
   */
  redeemable?(paymentHeader: string): RedeemablePayment;
  /** The header read for a hold (settle after the handler), or why it cannot be held. */
  holdable(paymentHeader: string): HoldablePayment;
  /**
   * The charge a capture settles: undefined when it is the price claimed (nothing to write); else the
   * amount the seller names now, which the capture writes before anything is sent. Throws a 400 for a
   * charge the payment does not allow.
   */
  captureCharge(payment: PaymentDoc, amount: string | undefined): bigint | undefined;
  /** 503 when no process of the deployment can send this payment's settlement now (nothing is decided). */
  ensureCanSettle(payment: PaymentDoc, charge: bigint | undefined): Promise<void>;
  /**
   * A scheme whose hold already moved money (auth-capture: authorized into escrow) settles a captured
   * hold its own way (the escrow's capture) instead of through the settlement path...
   */
  captureHold?(payment: PaymentDoc, charge: bigint | undefined): Promise<SettlementResult>;
  /** ...and gives a released or expired one back (the escrow's void) instead of deleting the claim. */
  releaseHold?(payment: PaymentDoc, why: 'released' | 'expired'): Promise<void>;

  /**
   * Finishes one open payment of this scheme from the chain's own record (reconcile.ts), or sends it
   * again; a send that may share a transaction with others comes back as `sending`.
   */
  reconcile(payment: PaymentDoc, round: ReconcileRound): Promise<Reconciled | { sending: Promise<Reconciled> }>;
}

/**
 * The schemes this facilitator offers, in registration order (the order /supported lists them). The
 * first one is the default: a request or header that no other scheme claims is read as it (and refused
 * in its terms when it is not one).
 */
export class PaymentSchemes {
  private readonly schemes: PaymentScheme[] = [];
  /** Schemes refused on this chain, and why (their contracts have no code there). */
  private readonly refused = new Map<string, string>();

  constructor(private readonly path: PaymentSettlement) {}

  /** Offers a scheme: its settlement work runs on the shared path from now on. */
  register(scheme: PaymentScheme): void {
    this.schemes.push(scheme);
    this.path.register(scheme);
  }

  all(): readonly PaymentScheme[] {
    return this.schemes;
  }

  private pick(claims: (scheme: PaymentScheme) => boolean): PaymentScheme {
    const [fallback, ...others] = this.schemes;
    return others.find(claims) ?? fallback!;
  }

  forRequest(request: FacilitatorRequest): PaymentScheme {
    return this.pick((scheme) => scheme.handlesRequest(request));
  }

  /** The header's scheme: decoded once here, each scheme judging the JSON (a header that is not JSON is the default's to refuse). */
  forHeader(paymentHeader: string): PaymentScheme {
    const decoded = decodeBase64Json(paymentHeader);
    const payload = decoded.ok ? decoded.value : undefined;
    return this.pick((scheme) => scheme.handlesPayload(payload));
  }

  /** The scheme of a payment record (absent on a record: the default, exact). */
  of(payment: PaymentDoc): PaymentScheme {
    return (payment.scheme && this.schemes.find((scheme) => scheme.name === payment.scheme)) || this.schemes[0]!;
  }

  supportedKinds(chain: ChainService, signers: readonly Address[]): SupportedKind[] {
    return this.schemes.filter((scheme) => !this.refused.has(scheme.name)).flatMap((scheme) => scheme.supportedKinds(chain, signers));
  }

  /**
   * Asks the chain, once at start-up, whether each scheme's contracts have code, and refuses on this
   * chain the schemes whose contracts are missing: /supported leaves them out, and a payment of theirs is
   * answered `unsupported_scheme`, naming what is missing. Said once in the log, and in
   * `agentgate_scheme_available{network,scheme}`.
   */
  async checkContracts(chain: ChainService, observe: { log: Logger; metrics: Metrics }): Promise<void> {
    const unknown = await chain.code.check(this.schemes.flatMap((scheme) => scheme.contracts));
    if (unknown.length) observe.log.warn({ network: chain.caip2, contracts: describeContracts(unknown) }, 'could not ask the chain whether these contracts exist; their schemes stay offered');
    for (const scheme of this.schemes) {
      const missing = chain.code.missing(scheme.contracts);
      if (missing.length) {
        this.refused.set(scheme.name, `${scheme.name} is not offered on ${chain.caip2}: ${describeContracts(missing)} ${missing.length === 1 ? 'has' : 'have'} no code there`);
        observe.log.error({ network: chain.caip2, scheme: scheme.name, missing: missing.map((c) => c.address) }, `scheme refused on this network: ${describeContracts(missing)} ${missing.length === 1 ? 'has' : 'have'} no code`);
      }
      observe.metrics.schemeAvailable.set({ network: chain.caip2, scheme: scheme.name }, missing.length ? 0 : 1);
    }
  }

  /** Why this scheme (or the scheme of this name) is refused on this chain; undefined: it is offered. */
  refusal(scheme: PaymentScheme | string): string | undefined {
    return this.refused.get(typeof scheme === 'string' ? scheme : scheme.name);
  }

  /** Once every scheme's /supported entry is loaded. */
  async ready(): Promise<void> {
    await Promise.all(this.schemes.map((scheme) => scheme.ready?.()));
  }

  extensions(): string[] {
    return this.schemes.flatMap((scheme) => scheme.extensions);
  }

  async sellerSettings(): Promise<Record<string, unknown>> {
    const parts = await Promise.all(this.schemes.map((scheme) => scheme.sellerSettings?.() ?? {}));
    return Object.assign({}, ...parts);
  }
}
