import { getAddress } from 'viem';
import { buildRequirementV1, offerReceiptExtension, parsePrice } from 'agentgate-x402-wire';
import type { ChainService } from '../chain/chain-service.js';
import type { SellerAccountDoc } from './models.js';
import { acceptsPayee, offerSettings, type SellerAcceptance } from './acceptance.js';
import type { Endpoints } from './endpoints.js';
import type { SettleTerms } from './payment-settlement.js';
import type { SettlementResult } from './settlement.js';
import { normalizeResource } from './resource-url.js';
import { requireChain } from './chain-required.js';
import type { PaymentScheme, PaymentSchemes } from './schemes/scheme.js';
import type { UsageMeter } from '../usage/index.js';

// Our seller middleware's door (POST /v0/payments/redeem, and holds.ts): the seller-side checks a paid
// request must pass before any scheme verifies it (the seller accepts payments, the resource is one of
// its registered endpoints, the amount is its price, the payee is its own), and the answer in the
// settlement header's form. The official SDKs' sellers come through the facilitator API instead.

export type RedeemOutcome =
  | { ok: true; paymentId: string; paymentResponse: { success: true; transaction: string; network: string; payer: string; amount?: string; extensions?: Record<string, unknown>; /** batch-settlement: the call's charge and the channel after it. */ extra?: Record<string, unknown> } }
  | { ok: false; error: string; message: string; requirement?: unknown };

export type RedeemRefusal = Extract<RedeemOutcome, { ok: false }>;

/** Our middleware's redeem (and hold) call: the buyer's header, the resource and the price it answered for. */
export interface RedeemInput { paymentHeader: string; resource: string; amount: string; payTo?: string }

/** A request that passed the seller-side checks: the seller, the terms its payment must meet, and how to refuse it. */
export interface PreparedTerms {
  seller: SellerAccountDoc;
  terms: SettleTerms;
  refuse: (error: string, message: string) => RedeemRefusal;
}

/** What the seller-side checks ask of the payment's scheme. */
export type SellerSideRules = Pick<PaymentScheme, 'pricedByUsage' | 'paidInV1'>;

export class Redemption {
  constructor(
    private readonly chain: ChainService | undefined,
    private readonly acceptance: SellerAcceptance,
    private readonly endpoints: Endpoints,
    private readonly schemes: PaymentSchemes,
    /** The seller's plan quota of settlements: over it, a payment is refused before anything is claimed. */
    private readonly meter: Pick<UsageMeter, 'refusal'>,
  ) {}

  /** The default network's door hands a header of another network to that network's (PaymentService.forHeader). */
  elsewhere: ((paymentHeader: string) => Redemption) | undefined;

  /** A header of a Solana network goes to that network's exact (PaymentService wires it); undefined: not a Solana payment. */
  solana: ((orgId: string, input: RedeemInput) => Promise<RedeemOutcome> | undefined) | undefined;

  /**
   * Settles a payment before the handler. The header's scheme is picked as a hold picks it
   * (schemes.forHeader); only a scheme that settles before the handler (exact) can be redeemed, the
   * others are held (holds.ts) and captured after.
   */
  async redeem(orgId: string, input: RedeemInput): Promise<RedeemOutcome> {
    const onSolana = this.solana?.(orgId, input);
    if (onSolana) return onSolana;
    const door = this.elsewhere?.(input.paymentHeader);
    if (door && door !== this) return door.redeem(orgId, input);
    const scheme = this.schemes.forHeader(input.paymentHeader);
    const refused = this.schemes.refusal(scheme);
    if (refused) return { ok: false, error: 'unsupported_scheme', message: refused };
    if (!scheme.redeemable) {
      return { ok: false, error: 'unsupported_scheme', message: `a ${scheme.name} payment is settled after the handler: hold it (POST /v0/payments/holds) and capture it, as the seller middleware does` };
    }
    const prepared = await this.prepareTerms(orgId, input, scheme);
    if ('refused' in prepared) return prepared.refused;
    const { seller, terms, refuse } = prepared;
    const payment = scheme.redeemable(input.paymentHeader);
    if (!payment.ok) return refuse(payment.reason, payment.message);
    const outcome = await payment.settle(seller, terms);
    return outcome.ok ? this.redeemed(outcome, payment.version) : refuse(outcome.reason, outcome.message);
  }

  /** The answer of a settled redeem, in the settlement header's form for the payload's version. */
  redeemed(outcome: Extract<SettlementResult, { ok: true }>, version: 1 | 2): Extract<RedeemOutcome, { ok: true }> {
    const chain = requireChain(this.chain);
    return {
      ok: true,
      paymentId: outcome.paymentId,
      paymentResponse: {
        success: true, transaction: outcome.txHash, network: version === 1 ? chain.network : chain.caip2, payer: outcome.payer,
        ...(outcome.amount !== undefined ? { amount: outcome.amount } : {}),
        ...(outcome.offerReceipt ? { extensions: offerReceiptExtension(outcome.offerReceipt) } : {}),
      },
    };
  }

  /**
   * The seller-side checks of a redeem or hold, for any scheme: the accepting seller, the registered
   * endpoint, the amount against its price (a maximum charged by usage against a usage-priced endpoint's
   * cap), the payee. The buyer's header is decoded by the caller, for its scheme.
   */
  async prepareTerms(orgId: string, input: RedeemInput, scheme: SellerSideRules): Promise<PreparedTerms | { refused: RedeemRefusal }> {
    const chain = requireChain(this.chain);
    const seller = await this.acceptance.accepting(orgId);
    if (!seller) return { refused: { ok: false, error: 'payments_not_enabled', message: 'Payment acceptance is not turned on for this org' } };
    const quota = await this.meter.refusal(orgId, 'settlements');
    if (quota) return { refused: { ok: false, error: 'quota_exceeded', message: quota.message } };
    const resource = normalizeResource(input.resource);
    const endpoint = await this.endpoints.forResource(orgId, resource);
    if (!endpoint) return { refused: { ok: false, error: 'resource_not_registered', message: `${resource} is not a registered endpoint of this seller` } };
    // The buyer's spelling of the resource: in dev it may be another loopback alias of endpoint.url. A
    // refusal names the v1 requirement to pay again, for a scheme v1 clients can pay.
    const requirement = scheme.paidInV1 ? buildRequirementV1(offerSettings(chain, seller), { amountAtomic: BigInt(endpoint.priceAtomic), resource, description: endpoint.description }) : undefined;
    const refuse = (error: string, message: string): RedeemRefusal => ({ ok: false, error, message, ...(requirement ? { requirement } : {}) });

    let amount: bigint;
    try { amount = parsePrice(input.amount); } catch { return { refused: refuse('amount_mismatch', `amount ${input.amount} is not a USDC amount`) }; }
    if (scheme.pricedByUsage && endpoint.pricing !== 'dynamic') {
      return { refused: refuse('amount_mismatch', `an upto route needs an endpoint priced by usage: register it with maxPriceUsdc (it has a fixed price of ${endpoint.priceUsdc})`) };
    }
    // A dynamic price (or a usage maximum) is whatever the seller's middleware asked, up to the registered cap.
    if (endpoint.pricing === 'dynamic') {
      if (amount <= 0n || amount > BigInt(endpoint.priceAtomic)) return { refused: refuse('amount_mismatch', `amount ${input.amount} is not within this endpoint's dynamic price (more than 0, at most ${endpoint.priceUsdc})`) };
    } else if (amount !== BigInt(endpoint.priceAtomic)) {
      return { refused: refuse('amount_mismatch', `amount ${input.amount} does not equal the registered price ${endpoint.priceUsdc}`) };
    }
    const payTo = getAddress(input.payTo ?? seller.payTo);
    if (!acceptsPayee(seller, payTo)) return { refused: refuse('recipient_not_allowed', `${payTo} is not this seller's payTo or one of its payees (PUT /v0/payments/acceptance)`) };
    return { seller, refuse, terms: { resource, amountAtomic: amount, payTo, endpoint, door: 'redeem' } };
  }
}
