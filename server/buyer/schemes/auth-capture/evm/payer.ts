import { randomBytes } from 'node:crypto';
import { getAddress, toHex, type Hex } from 'viem';
import { formatUsdc } from 'agentgate-x402-wire';
import { newId } from '../../../../platform/ids.js';
import type { Authorization } from '../../../../chain/usdc.js';
import { EIP3009_TOKEN_COLLECTOR_ADDRESS, escrowOf, escrowState, payerAgnosticNonce, paymentInfoHash, paymentInfoOf } from '../../../../payments/schemes/auth-capture/evm/chain.js';
import type { MandateOwner } from '../../../mandate-service.js';
import { paymentHeaderFor, readSettlement } from '../../../challenge.js';
import type { OutgoingPaymentDoc } from '../../../outgoing-payment-model.js';
import type { PayRefusal } from '../../../pay-result.js';
import { refuse, settlementFailure } from '../../../seller-answer.js';
import { contentOrNone, validitySeconds, type Paid, type PayCall, type PayerDeps, type SchemePayer } from '../../payer.js';

/**
 * Pays an x402 `auth-capture` offer: the wallet signs a USDC ReceiveWithAuthorization to the escrow's
 * ERC-3009 collector whose nonce commits to the whole escrow payment (operator, payee, deadlines, fees),
 * so the seller's operator can only authorize exactly that into escrow. The mandate counts what the
 * escrow may still pay out of it (held + captured - refunded), read from the chain after the answer and
 * again whenever activity is read (syncEscrow): a void or a refund gives the mandate back the difference.
 * Not collected: the signature is cancelled on chain and the reservation released.
 */
export class AuthCapturePayer implements SchemePayer<'auth-capture'> {
  constructor(private readonly deps: PayerDeps) {}

  async pay(call: PayCall<'auth-capture'>): Promise<Paid | PayRefusal> {
    const { mandates, logs, outgoing } = this.deps;
    const { owner, wallet, wallets, offer, amount, reservation, state } = call;
    const chain = wallets.requireChain();
    const requirement = offer.requirement;
    if (!escrowOf(requirement.extra.authCaptureEscrow)) return refuse('network_unsupported', `the offer names escrow ${requirement.extra.authCaptureEscrow}, not the Commerce Payments escrow this wallet pays into`);
    const now = Math.floor(Date.now() / 1000);
    const validBefore = Math.min(now + validitySeconds(requirement.maxTimeoutSeconds), requirement.extra.captureDeadline);
    const salt = toHex(randomBytes(32));
    const from = getAddress(wallet.address);
    const info = paymentInfoOf(requirement, { salt, authorization: { from, validBefore: String(validBefore) } });
    const nonce = payerAgnosticNonce(info, chain.chainId);
    const hash = paymentInfoHash(info, chain.chainId);
    const authorization: Authorization = { from, to: EIP3009_TOKEN_COLLECTOR_ADDRESS, value: amount, validAfter: 0n, validBefore: BigInt(validBefore), nonce };
    const record: OutgoingPaymentDoc = {
      _id: newId('pay'), orgId: owner.orgId, identityId: owner.identityId, direction: 'out', mandateId: reservation.mandateId,
      network: chain.network, payerAddress: from, recipientAddress: getAddress(call.payTo), amountUsdcRaw: amount.toString(), scheme: 'auth-capture', maxAmountUsdcRaw: amount.toString(),
      resourceUrl: call.resourceUrl, requestUrl: call.url, method: call.method, x402Version: 2, authorizationNonce: nonce,
      escrow: { hash, reservationId: reservation.reservationId, day: reservation.day, countedUsdcRaw: amount.toString(), state: 'authorized' },
      status: 'pending', createdAt: new Date(),
    };
    await outgoing.create(record);
    const signature = await wallets.signReceiveAuthorization(wallet, authorization);
    state.hold = 'in_flight';
    const payment = paymentHeaderFor(offer, {
      authorization: { from, to: authorization.to, value: amount.toString(), validAfter: '0', validBefore: String(validBefore), nonce }, signature, salt,
    });
    const paid = await this.deps.fetch(call.url, { ...call.request, headers: { ...call.request.headers, [payment.name]: payment.value } });
    const settlement = paid.ok ? readSettlement(paid.response) : undefined;
    const escrow = await escrowState(chain.publicClient, hash).catch(() => undefined);
    if (escrow && !escrow.hasCollectedPayment) {
      // Never collected: the signature is cancelled so it can never be, and the cap goes back.
      const cancelled = await wallets.cancelAuthorization(wallet, nonce);
      const reason = !paid.ok ? paid.message : settlementFailure(paid.response, settlement);
      await outgoing.updateOne({ _id: record._id }, { $set: { status: 'failed', failureReason: reason, ...(paid.ok ? { responseStatus: paid.response.status } : {}) } });
      state.hold = 'done';
      if (cancelled) await mandates.release(reservation);
      await logs.record({ ...owner, action: 'payments.pay_failed', category: 'payments', severity: 'warning', status: 'failure', description: `Payment of ${formatUsdc(amount)} USDC to ${call.resourceUrl} was not authorized: ${reason}`.slice(0, 500), targetType: 'payment', targetId: record._id });
      return refuse('settle_failed', reason);
    }
    // Collected (or the chain could not be read: then it counts in full until a later sync reads it).
    state.hold = 'done';
    const mandate = await mandates.commit(reservation);
    const txHash = typeof settlement?.transaction === 'string' && settlement.transaction ? settlement.transaction : undefined;
    await outgoing.updateOne({ _id: record._id }, {
      $set: { status: 'settled', settledAt: new Date(), ...(txHash ? { txHash } : {}), ...(paid.ok ? { responseStatus: paid.response.status } : {}), ...(settlement ? { paymentResponse: settlement } : {}) },
    });
    const synced = await this.syncEscrow((await outgoing.findById(record._id).lean())!);
    await logs.record({ ...owner, action: 'payments.paid', category: 'payments', description: `Authorized ${formatUsdc(amount)} USDC into escrow for ${call.resourceUrl} (${synced.escrow?.state})`, targetType: 'payment', targetId: record._id, metadata: { txHash: txHash ?? null, mandateId: reservation.mandateId, scheme: 'auth-capture' } });
    const counted = BigInt(synced.escrow!.countedUsdcRaw);
    return {
      ok: true as const, paid: true as const, paymentId: record._id, ...contentOrNone(paid),
      cost: { ...call.cost, scheme: 'auth-capture' as const, amountUsdc: formatUsdc(counted), amountUsdcRaw: counted.toString(), escrow: synced.escrow!.state },
      txHash: txHash ?? null, payer: from, recipient: getAddress(call.payTo), resource: call.resourceUrl,
      mandate: mandate ? await mandates.present(await mandates.get(owner, mandate._id)) : null, paymentResponse: settlement ?? null,
    };
  }

  /**
   * Reads an auth-capture payment's escrow state and gives the mandate back what can no longer leave the
   * wallet for it: a voided hold, a refund. What it counts is what is held plus what was captured and not
   * refunded. Each give-back is once per amount counted (mandates.giveBack's unique key).
   */
  async syncEscrow(record: OutgoingPaymentDoc): Promise<OutgoingPaymentDoc> {
    if (record.scheme !== 'auth-capture' || !record.escrow || record.status !== 'settled') return record;
    // The escrow of the payment's network (a network no longer configured: nothing to read).
    const wallets = this.deps.wallets.everywhere.find((w) => w.requireChain().network === record.network);
    if (!wallets) return record;
    const chain = wallets.requireChain();
    const state = await escrowState(chain.publicClient, record.escrow.hash as Hex).catch(() => undefined);
    if (!state?.hasCollectedPayment) return record;
    const counted = BigInt(record.escrow.countedUsdcRaw);
    const now = state.capturable + state.refundable;
    const wasCaptured = record.escrow.state === 'captured' || record.escrow.state === 'refunded';
    type EscrowState = NonNullable<OutgoingPaymentDoc['escrow']>['state'];
    const label: EscrowState = state.capturable > 0n ? 'authorized'
      : state.refundable > 0n ? (record.escrow.state === 'refunded' || (wasCaptured && state.refundable < counted) ? 'refunded' : 'captured')
        : wasCaptured ? 'refunded' : 'voided';
    if (now < counted) await this.deps.mandates.giveBack({ reservationId: record.escrow.reservationId, mandateId: record.mandateId, day: record.escrow.day }, counted - now, now.toString());
    const escrow = { ...record.escrow, countedUsdcRaw: (now < counted ? now : counted).toString(), state: label };
    await this.deps.outgoing.updateOne({ _id: record._id }, { $set: { escrow } });
    return { ...record, escrow };
  }

  /** Syncs this identity's auth-capture payments the escrow may still change (held, or captured and not all refunded). */
  async syncEscrows(owner: MandateOwner): Promise<void> {
    if (!this.deps.wallets.available) return;
    const open = await this.deps.outgoing.find({ identityId: owner.identityId, scheme: 'auth-capture', status: 'settled', 'escrow.countedUsdcRaw': { $ne: '0' } } as never).sort({ createdAt: -1 }).limit(50).lean() as OutgoingPaymentDoc[];
    for (const record of open) await this.syncEscrow(record);
  }
}
