import { randomBytes } from 'node:crypto';
import {
  address, appendTransactionMessageInstructions, createNoopSigner, createTransactionMessage, getBase64EncodedWireTransaction,
  partiallySignTransactionMessageWithSigners, pipe, setTransactionMessageFeePayerSigner, setTransactionMessageLifetimeUsingBlockhash, type Address,
} from '@solana/kit';
import { getSetComputeUnitLimitInstruction, getSetComputeUnitPriceInstruction } from '@solana-program/compute-budget';
import { findAssociatedTokenPda, getTransferCheckedInstruction, TOKEN_PROGRAM_ADDRESS } from '@solana-program/token';
import { encodeBase64Json, formatUsdc, MEMO_PROGRAM_ADDRESS } from 'agentgate-x402-wire';
import type { SolanaChain } from '../../../../chain/solana/solana-chain.js';
import { newId } from '../../../../platform/ids.js';
import type { SolanaWalletDoc, SolanaWallets } from '../../../../wallet/solana-wallets.js';
import { readSettlement, type SolanaOffer } from '../../../challenge.js';
import type { MandateOwner, Reservation } from '../../../mandate-service.js';
import type { MandateDoc } from '../../../mandate-model.js';
import type { OutgoingPaymentDoc } from '../../../outgoing-payment-model.js';
import type { PayRefusal } from '../../../pay-result.js';
import { refuse, settlementFailure, type OutgoingRequest } from '../../../seller-answer.js';
import { contentOrNone, type HoldState, type Paid, type PayerDeps } from '../../payer.js';

export interface SolanaPayCall {
  owner: MandateOwner;
  url: string;
  request: OutgoingRequest;
  method: string;
  chain: SolanaChain;
  wallet: SolanaWalletDoc;
  offer: SolanaOffer;
  amount: bigint;
  reservation: Reservation;
  mandate: MandateDoc;
  cost: Record<string, unknown>;
  state: HoldState;
}

/** The compute budget a TransferChecked with a memo needs, and the lowest price: what the official client sets. */
const COMPUTE_UNITS = 20_000;
const MICRO_LAMPORTS = 1n;

/**
 * Pays an x402 `exact` offer on Solana from the identity's Solana wallet: a TransferChecked of USDC to the
 * seller's token account, with the facilitator the 402 names as fee payer, signed by the wallet and left
 * for the facilitator to co-sign (scheme_exact_svm.md). The wallet holds no SOL: the fee payer pays the fee.
 *
 * A transaction cannot be cancelled: one the seller did not settle can still land until its blockhash
 * expires (60-90 s), so its amount stays reserved under the mandate, as an EVM authorization that could
 * not be cancelled does.
 */
export class ExactSvmPayer {
  constructor(private readonly deps: PayerDeps, private readonly solana: SolanaWallets) {}

  async pay(call: SolanaPayCall): Promise<Paid | PayRefusal> {
    const { owner, wallet, chain, offer, amount, reservation, state } = call;
    const { mandates, logs, outgoing } = this.deps;
    const requirement = offer.requirement;
    const nonce = randomBytes(16).toString('hex');
    const record: OutgoingPaymentDoc = {
      _id: newId('pay'), orgId: owner.orgId, identityId: owner.identityId, direction: 'out', mandateId: reservation.mandateId,
      network: chain.network, payerAddress: wallet.address, recipientAddress: requirement.payTo, amountUsdcRaw: amount.toString(),
      resourceUrl: offer.resource.url, requestUrl: call.url, method: call.method, x402Version: 2, authorizationNonce: nonce,
      status: 'pending', createdAt: new Date(),
    };
    await outgoing.create(record);
    const transaction = await this.transfer(call, nonce);
    state.hold = 'in_flight';
    const header = encodeBase64Json({ x402Version: 2, resource: offer.resource, accepted: offer.raw, payload: { transaction } });

    const paid = await this.deps.fetch(call.url, { ...call.request, headers: { ...call.request.headers, 'PAYMENT-SIGNATURE': header } });
    const settlement = paid.ok ? readSettlement(paid.response) : undefined;
    if (settlement?.success !== true) {
      const reason = !paid.ok ? paid.message : settlementFailure(paid.response, settlement);
      await outgoing.updateOne({ _id: record._id }, { $set: { status: 'failed', failureReason: reason, ...(paid.ok ? { responseStatus: paid.response.status } : {}) } });
      // Not released: the transaction may still land while its blockhash lives.
      state.hold = 'done';
      await logs.record({ ...owner, action: 'payments.pay_failed', category: 'payments', severity: 'warning', status: 'failure', description: `Payment of ${formatUsdc(amount)} USDC on ${chain.network} to ${offer.resource.url} was not settled: ${reason}`.slice(0, 500), targetType: 'payment', targetId: record._id });
      return refuse('settle_failed', reason);
    }

    const txHash = typeof settlement.transaction === 'string' ? settlement.transaction : undefined;
    state.hold = 'done';
    const mandate = await mandates.commit(reservation);
    await outgoing.updateOne({ _id: record._id }, {
      $set: { status: 'settled', settledAt: new Date(), ...(txHash ? { txHash } : {}), ...(paid.ok ? { responseStatus: paid.response.status } : {}), paymentResponse: settlement },
    });
    await logs.record({ ...owner, action: 'payments.paid', category: 'payments', description: `Paid ${formatUsdc(amount)} USDC on ${chain.network} to ${requirement.payTo} for ${offer.resource.url}`, targetType: 'payment', targetId: record._id, metadata: { txHash: txHash ?? null, mandateId: reservation.mandateId } });
    return {
      ok: true as const, paid: true as const, paymentId: record._id, ...contentOrNone(paid),
      cost: call.cost, txHash: txHash ?? null, payer: wallet.address as never, recipient: requirement.payTo as never, resource: offer.resource.url,
      mandate: mandate ? await mandates.present(mandate) : null, paymentResponse: settlement,
    };
  }

  /** The buyer's transfer, partially signed (the fee payer signs at settlement), base64. */
  private async transfer(call: SolanaPayCall, nonce: string): Promise<string> {
    const { chain, offer, amount } = call;
    const signer = await this.solana.signer(call.wallet);
    const mint = chain.usdcMint;
    const [source] = await findAssociatedTokenPda({ mint, owner: signer.address, tokenProgram: TOKEN_PROGRAM_ADDRESS });
    const [destination] = await findAssociatedTokenPda({ mint, owner: address(offer.requirement.payTo), tokenProgram: TOKEN_PROGRAM_ADDRESS });
    const { value: lifetime } = await chain.rpc.getLatestBlockhash({ commitment: 'confirmed' }).send();
    const memo = offer.requirement.extra.memo ?? nonce;
    const message = pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayerSigner(createNoopSigner(offer.requirement.extra.feePayer as Address), m),
      (m) => setTransactionMessageLifetimeUsingBlockhash(lifetime, m),
      (m) => appendTransactionMessageInstructions([
        getSetComputeUnitLimitInstruction({ units: COMPUTE_UNITS }),
        getSetComputeUnitPriceInstruction({ microLamports: MICRO_LAMPORTS }),
        getTransferCheckedInstruction({ source, mint, destination, authority: signer, amount, decimals: 6 }),
        { programAddress: MEMO_PROGRAM_ADDRESS as Address, accounts: [], data: new TextEncoder().encode(memo) },
      ], m),
    );
    return getBase64EncodedWireTransaction(await partiallySignTransactionMessageWithSigners(message));
  }
}
