import type { Transaction } from '@solana/kit';
import { EXACT_SVM_REASONS as R } from 'agentgate-x402-wire';
import type { SolanaChain } from '../../../../chain/solana/solana-chain.js';
import { newId } from '../../../../platform/ids.js';
import type { Logger } from '../../../../platform/logger.js';
import type { EndpointDoc, PaymentDoc, SellerAccountDoc } from '../../../models.js';
import type { PaymentRecords } from '../../../records.js';
import type { ClaimOutcome, PaymentSettlement, SchemeSettler, SettleTerms } from '../../../payment-settlement.js';
import type { IdentifiedPayment } from '../../../payment-identifier.js';
import type { SettlementResult } from '../../../settlement.js';
import type { SupportedKind } from '../../scheme.js';
import { transactionId, verifySvmPayment, type SvmRefused, type SvmTerms, type SvmVerified } from './verify.js';
import { outcomeOnChain } from './chain.js';
import { cosign, send, sendAndConfirm, wireBase64 } from './settle.js';

// The x402 `exact` scheme on Solana: the buyer signs a TransferChecked of USDC to the seller's token
// account, with our fee payer as the transaction's fee payer; settlement co-signs it and sends it. The
// fee payer's signature is deterministic (Ed25519), so the transaction's id is known before it is sent:
// it is the payment's claim (a unique insert), and a replayed transaction, in any process, is a duplicate
// before anything is sent. The chain itself processes one signature once.

export type SvmSettleTerms = SvmTerms & SettleTerms;

/**
 * What the shared settlement path asks of a scheme's payments: a Solana payment is sent by its scheme
 * (settle.ts), never handed to an EVM relayer lane, so its path has no engine and this settler sends nothing.
 */
export const SVM_EXACT_SETTLER: SchemeSettler = {
  name: 'exact',
  laneOf: () => undefined,
  send: () => Promise.reject(new Error('a Solana payment is sent by its scheme, not by a relayer lane')),
};

export class SvmExactScheme {
  /** `path`: this network's own settlement path (its claims, records and metrics labelled with this network). */
  constructor(
    readonly chain: SolanaChain,
    private readonly path: PaymentSettlement,
    private readonly log: Logger,
    private readonly options: { settlementTimeoutMs: number },
  ) {}

  /** What /supported offers: exact on this network, v2 and v1, with a fee payer of the pool. */
  supportedKinds(): SupportedKind[] {
    const extra = { feePayer: this.chain.pickFeePayer().address };
    return [
      { x402Version: 2, scheme: 'exact', network: this.chain.caip2, extra },
      { x402Version: 1, scheme: 'exact', network: this.chain.network, extra },
    ];
  }

  signers(): string[] {
    return this.chain.feePayers.map((signer) => signer.address);
  }

  verify(tx: Transaction, terms: SvmTerms): Promise<SvmVerified | SvmRefused> {
    return verifySvmPayment(tx, terms, this.chain, { simulate: true });
  }

  /**
   * Verify, co-sign, claim, send, confirm and record with a signed receipt: for both doors (our
   * middleware's redeem and the facilitator API). A retry carrying the same payment-identifier is
   * answered the first result.
   */
  async settle(seller: SellerAccountDoc, tx: Transaction, terms: SvmSettleTerms, identified: IdentifiedPayment, version: 1 | 2): Promise<SettlementResult> {
    // The checks that need no chain; the chain's simulation is the node's preflight of the send (one
    // round trip, not two), after the claim: a claim whose preflight fails is let go, nothing sent.
    const verified = await verifySvmPayment(tx, terms, this.chain, { simulate: false });
    if (!verified.ok) return this.refused(terms.door, verified);
    const signed = cosign(verified);
    const id = transactionId(signed);
    return this.path.settleIdempotently(seller, identified, this.claimKey(id), async () => {
      const payment = this.paymentOf(seller, verified, signed, id, terms, version);
      const claimed = await this.path.insertClaim(payment, terms.door, 'this transaction was already presented');
      if (!claimed.ok) return { answer: { ...claimed.refused, reason: claimed.refused.reason === 'nonce_already_used' ? R.duplicateSettlement : claimed.refused.reason } };
      const claimedAt = Date.now();
      const outcome = await sendAndConfirm(this.chain, signed, id, verified.blockhash, this.log, this.options.settlementTimeoutMs);
      if ('refused' in outcome) {
        await this.path.release(payment);
        return { answer: this.refused(terms.door, outcome.refused) };
      }
      const answer = await this.path.recordOutcome(payment, outcome, terms.endpoint);
      this.path.countOutcome(answer, terms.door, claimedAt);
      // Still open (reconciliation finishes it): the spec's name for a settlement not confirmed yet.
      return { answer: !answer.ok && answer.reason === 'settle_unconfirmed' ? { ...answer, reason: R.settlementPending } : answer };
    });
  }

  private refused(door: SvmSettleTerms['door'], refusal: SvmRefused): Extract<SettlementResult, { ok: false }> {
    return (this.path.refused(door, refusal) as Extract<ClaimOutcome, { ok: false }>).refused;
  }

  private claimKey(id: string): string {
    return `svm:${this.chain.caip2}:${id}`;
  }

  private paymentOf(seller: SellerAccountDoc, verified: SvmVerified, signed: Transaction, id: string, terms: SvmSettleTerms, version: 1 | 2): PaymentDoc {
    const now = new Date();
    return {
      _id: newId('pay'), orgId: seller._id, direction: 'in', endpointId: terms.endpoint?._id ?? null, network: this.chain.network,
      // chainId 0: no EVM chain's reconciliation reads it (reconcile() below finishes it).
      chainId: 0, asset: terms.mint, payerAddress: verified.payer, recipientAddress: terms.payTo, amountUsdcRaw: terms.amountAtomic.toString(),
      resourceUrl: terms.resource, x402Version: version, scheme: 'exact', authorizationKey: this.claimKey(id), authorizationNonce: id,
      // The transfer as an authorization reads (who, to whom, how much); its validity is the blockhash's, about 90 s.
      authorization: { from: verified.payer, to: terms.payTo, value: terms.amountAtomic.toString(), validAfter: '0', validBefore: String(Math.floor(now.getTime() / 1000) + 90), nonce: id },
      signature: id, status: 'verified', createdAt: now,
      svm: { transaction: wireBase64(signed), blockhash: verified.blockhash, feePayer: verified.feePayer.address },
    };
  }

  /**
   * Finishes this network's open payments from the chain (a process that died between sending and
   * recording, an answer that timed out): settled or failed as the chain says, or sent again while its
   * blockhash lives (the chain processes a signature once, so sending again never pays twice). Any number
   * of processes may run it: each record is written once (markSettled's unique insert).
   */
  async reconcile(records: PaymentRecords, endpointOf: (payment: PaymentDoc) => Promise<EndpointDoc | null>, olderThanMs: number): Promise<number> {
    const open = await records.payments.find({ network: this.chain.network, chainId: 0, status: 'verified', createdAt: { $lt: new Date(Date.now() - olderThanMs) } }).sort({ createdAt: 1 }).limit(100).lean();
    for (const payment of open) {
      const svm = payment.svm;
      if (!svm) continue;
      let outcome = await outcomeOnChain(this.chain, payment.authorizationNonce, svm.blockhash).catch(() => undefined);
      if (!outcome) {
        await send(this.chain, svm.transaction, this.log, payment.authorizationNonce);
        outcome = await outcomeOnChain(this.chain, payment.authorizationNonce, svm.blockhash).catch(() => undefined);
      }
      if (outcome) await this.path.recordOutcome(payment, outcome, await endpointOf(payment));
    }
    return open.length;
  }
}
