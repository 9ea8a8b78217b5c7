import { randomBytes } from 'node:crypto';
import { getAddress, toHex, type Hex } from 'viem';
import { formatUsdc } from 'agentgate-x402-wire';
import { newId } from '../../platform/ids.js';
import { permit2NonceUsed } from '../../chain/permit2.js';
import { proxySettlementAmount } from '../../payments/schemes/permit2-proxy.js';
import { EXACT_PROXY_ADDRESS, type ExactPermit } from '../../payments/schemes/exact/evm/chain.js';
import { UPTO_PROXY_ADDRESS, type UptoPermit } from '../../payments/schemes/upto/evm/chain.js';
import { paymentHeaderFor, readSettlement, type Offer } from '../challenge.js';
import type { OutgoingPaymentDoc } from '../outgoing-payment-model.js';
import type { PayRefusal } from '../pay-result.js';
import { refuse, settlementFailure } from '../seller-answer.js';
import { contentOrNone, validitySeconds, type Paid, type PayCall, type PayerDeps } from './payer.js';

/** The offers paid by a Permit2 witness permit through an x402 proxy: `upto`, and `exact` asking for Permit2. */
export type Permit2Offer = Extract<Offer, { scheme: 'upto' } | { scheme: 'exact'; version: 2 }>;

/**
 * Pays through Permit2: x402 `upto`, or `exact` whose offer asks `assetTransferMethod: "permit2"`. The
 * wallet approves Permit2 once (relayer-paid through USDC's EIP-2612 permit, recorded), the owner key
 * signs a Permit2 witness permit for the amount (upto: the maximum, bound to the seller and to the
 * facilitator the offer names; exact: the price, bound to the seller) with that proxy as spender, and the
 * seller settles it (upto: for what the request used). The mandate reserved the amount; it keeps what the
 * chain says moved. A permit the seller did not take cannot be cancelled without the account sending a
 * transaction, so it is left to expire (at most 300 s) with its amount still reserved.
 */
export class Permit2Payer {
  constructor(private readonly deps: PayerDeps) {}

  async pay(call: Omit<PayCall, 'offer'> & { offer: Permit2Offer }): Promise<Paid | PayRefusal> {
    const { mandates, logs, outgoing } = this.deps;
    const { owner, wallet, wallets, offer, amount, reservation, state } = call;
    const kind = offer.scheme;
    const chain = wallets.requireChain();
    await wallets.ensurePermit2Allowance(wallet, amount);
    const now = Math.floor(Date.now() / 1000);
    const signed = { from: getAddress(wallet.address), token: chain.usdc.address, nonce: BigInt(toHex(randomBytes(32))), deadline: BigInt(now + validitySeconds(call.maxTimeoutSeconds)), to: getAddress(call.payTo), validAfter: 0n };
    const upto: UptoPermit | undefined = offer.scheme === 'upto'
      ? { ...signed, maxAmount: amount, spender: UPTO_PROXY_ADDRESS, facilitator: getAddress(offer.requirement.extra.facilitatorAddress!) }
      : undefined;
    const exact: ExactPermit = { ...signed, amount, spender: EXACT_PROXY_ADDRESS };
    const record: OutgoingPaymentDoc = {
      _id: newId('pay'), orgId: owner.orgId, identityId: owner.identityId, direction: 'out', mandateId: reservation.mandateId,
      network: chain.network, payerAddress: signed.from, recipientAddress: signed.to, amountUsdcRaw: amount.toString(),
      ...(upto ? { scheme: 'upto' as const, maxAmountUsdcRaw: amount.toString() } : {}),
      resourceUrl: call.resourceUrl, requestUrl: call.url, method: call.method, x402Version: 2, authorizationNonce: signed.nonce.toString(),
      status: 'pending', createdAt: new Date(),
    };
    await outgoing.create(record);
    const signature = upto ? await wallets.signUptoPermit(wallet, upto) : await wallets.signExactPermit(wallet, exact);
    state.hold = 'in_flight';
    const permitted = { from: signed.from, permitted: { token: signed.token, amount: amount.toString() }, nonce: signed.nonce.toString(), deadline: signed.deadline.toString() };
    const payment = paymentHeaderFor(offer, {
      signature,
      permit2Authorization: upto
        ? { ...permitted, spender: upto.spender, witness: { to: signed.to, facilitator: upto.facilitator, validAfter: '0' } }
        : { ...permitted, spender: exact.spender, witness: { to: signed.to, validAfter: '0' } },
    });
    const paid = await this.deps.fetch(call.url, { ...call.request, headers: { ...call.request.headers, [payment.name]: payment.value } });
    const settlement = paid.ok ? readSettlement(paid.response) : undefined;
    const used = settlement?.success === true || await permit2NonceUsed(chain.publicClient, signed.from, signed.nonce).catch(() => false);
    const upTo = upto ? 'up to ' : '';
    if (!used) {
      const reason = !paid.ok ? paid.message : settlementFailure(paid.response, settlement);
      await outgoing.updateOne({ _id: record._id }, { $set: { status: 'failed', failureReason: reason, ...(paid.ok ? { responseStatus: paid.response.status } : {}) } });
      state.hold = 'done'; // the amount stays reserved: the unused permit may still settle until its deadline
      await logs.record({ ...owner, action: 'payments.pay_failed', category: 'payments', severity: 'warning', status: 'failure', description: `Payment of ${upTo}${formatUsdc(amount)} USDC to ${call.resourceUrl} was not settled: ${reason}`.slice(0, 500), targetType: 'payment', targetId: record._id });
      return refuse('settle_failed', `${reason}; the permit expires at ${new Date(Number(signed.deadline) * 1000).toISOString()} and its ${upto ? 'maximum' : 'amount'} stays reserved until then`);
    }
    // The mandate protects the buyer from sellers, so what it counts is read from the chain, never taken
    // from the seller's word: the USDC the named transaction moved settling this very permit. A transaction
    // that is no such settlement counts the whole amount. No transaction (an upto seller charging nothing)
    // leaves the permit unused but valid until its deadline, so the amount stays counted too.
    const txHash = settlement?.transaction ? settlement.transaction as Hex : undefined;
    const moved = txHash ? await proxySettlementAmount(chain.publicClient, kind, chain.usdc.address, txHash, { owner: signed.from, to: signed.to, nonce: signed.nonce }).catch(() => undefined) : undefined;
    const charged = moved !== undefined && moved <= amount ? moved : txHash ? amount : 0n;
    state.hold = 'done';
    const mandate = await mandates.commit(reservation, moved !== undefined && moved <= amount ? moved : amount);
    await outgoing.updateOne({ _id: record._id }, {
      $set: { status: 'settled', settledAt: new Date(), amountUsdcRaw: charged.toString(), ...(txHash ? { txHash } : {}), ...(paid.ok ? { responseStatus: paid.response.status } : {}), ...(settlement ? { paymentResponse: settlement } : {}) },
    });
    const description = upto ? `Paid ${formatUsdc(charged)} USDC (of up to ${formatUsdc(amount)}) to ${signed.to} for ${call.resourceUrl}` : `Paid ${formatUsdc(charged)} USDC through Permit2 to ${signed.to} for ${call.resourceUrl}`;
    await logs.record({ ...owner, action: 'payments.paid', category: 'payments', description, targetType: 'payment', targetId: record._id, metadata: { txHash: txHash ?? null, mandateId: reservation.mandateId, scheme: kind, ...(upto ? {} : { assetTransferMethod: 'permit2' }) } });
    return {
      ok: true as const, paid: true as const, paymentId: record._id, ...contentOrNone(paid),
      cost: { ...call.cost, amountUsdc: formatUsdc(charged), amountUsdcRaw: charged.toString() },
      txHash: txHash ?? null, payer: signed.from, recipient: signed.to, resource: call.resourceUrl,
      mandate: mandate ? await mandates.present(mandate) : null, paymentResponse: settlement ?? null,
    };
  }
}
