import { randomBytes } from 'node:crypto';
import { getAddress, toHex, type Address, type Hex } from 'viem';
import { formatUsdc } from 'agentgate-x402-wire';
import { newId } from '../../../../platform/ids.js';
import { authorizationState, type Authorization } from '../../../../chain/usdc.js';
import type { WalletDoc } from '../../../../wallet/wallet-model.js';
import type { WalletService } from '../../../../wallet/wallet-service.js';
import { paymentHeaderFor, readSettlement } from '../../../challenge.js';
import type { OutgoingPaymentDoc } from '../../../outgoing-payment-model.js';
import type { PayRefusal } from '../../../pay-result.js';
import { refuse, settlementFailure } from '../../../seller-answer.js';
import type { Permit2Payer } from '../../permit2-payer.js';
import { contentOrNone, validitySeconds, type Paid, type PayCall, type PayerDeps, type SchemePayer } from '../../payer.js';

/**
 * Pays an x402 `exact` offer. By default the wallet signs a USDC TransferWithAuthorization (EIP-3009) to
 * the seller; an offer that asks `assetTransferMethod: "permit2"` (a token without EIP-3009 needs it) is
 * paid through Permit2 (permit2-payer.ts). A signed authorization the seller did not settle is cancelled
 * on chain before the reservation goes back, so it can never settle later.
 */
export class ExactPayer implements SchemePayer<'exact'> {
  constructor(private readonly deps: PayerDeps, private readonly permit2: Permit2Payer) {}

  async pay(call: PayCall<'exact'>): Promise<Paid | PayRefusal> {
    const { owner, wallet, offer, amount, reservation, state } = call;
    if (offer.version === 2 && offer.requirement.extra.assetTransferMethod === 'permit2') return this.permit2.pay({ ...call, offer });
    const { mandates, logs, outgoing } = this.deps;
    const { wallets } = call;
    const chain = wallets.requireChain();
    const now = Math.floor(Date.now() / 1000);
    const authorization: Authorization = {
      from: getAddress(wallet.address), to: getAddress(call.payTo), value: amount,
      validAfter: BigInt(now - 600), validBefore: BigInt(now + validitySeconds(call.maxTimeoutSeconds)), nonce: toHex(randomBytes(32)),
    };
    const record: OutgoingPaymentDoc = {
      _id: newId('pay'), orgId: owner.orgId, identityId: owner.identityId, direction: 'out', mandateId: reservation.mandateId,
      network: chain.network, payerAddress: authorization.from, recipientAddress: authorization.to, amountUsdcRaw: amount.toString(),
      resourceUrl: call.resourceUrl, requestUrl: call.url, method: call.method, x402Version: offer.version, authorizationNonce: authorization.nonce,
      status: 'pending', createdAt: new Date(),
    };
    await outgoing.create(record);
    const signature = await wallets.signTransfer(wallet, authorization);
    state.hold = 'in_flight';
    const payment = paymentHeaderFor(offer, {
      signature,
      authorization: {
        from: authorization.from, to: authorization.to, value: amount.toString(),
        validAfter: authorization.validAfter.toString(), validBefore: authorization.validBefore.toString(), nonce: authorization.nonce,
      },
    });

    const paid = await this.deps.fetch(call.url, { ...call.request, headers: { ...call.request.headers, [payment.name]: payment.value } });
    const settlement = paid.ok ? readSettlement(paid.response) : undefined;
    const moved = settlement?.success === true || await this.authorizationUsed(wallets, wallet, authorization.nonce);
    if (!moved) {
      // Nothing settled: make sure the signature can never settle later, then give the cap back.
      const cancelled = await wallets.cancelAuthorization(wallet, authorization.nonce);
      if (cancelled || !(await this.authorizationUsed(wallets, wallet, authorization.nonce))) {
        const reason = !paid.ok ? paid.message : settlementFailure(paid.response, settlement);
        await outgoing.updateOne({ _id: record._id }, { $set: { status: 'failed', failureReason: reason, ...(paid.ok ? { responseStatus: paid.response.status } : {}) } });
        state.hold = 'done';
        // An authorization we could not cancel may still settle until it expires: its amount stays reserved.
        if (cancelled) await mandates.release(reservation);
        await logs.record({ ...owner, action: 'payments.pay_failed', category: 'payments', severity: 'warning', status: 'failure', description: `Payment of ${formatUsdc(amount)} USDC to ${call.resourceUrl} was not settled: ${reason}`.slice(0, 500), targetType: 'payment', targetId: record._id });
        return refuse('settle_failed', reason);
      }
    }

    const txHash = typeof settlement?.transaction === 'string' ? settlement.transaction : undefined;
    state.hold = 'done';
    const mandate = await mandates.commit(reservation);
    await outgoing.updateOne({ _id: record._id }, {
      $set: { status: 'settled', settledAt: new Date(), ...(txHash ? { txHash } : {}), ...(paid.ok ? { responseStatus: paid.response.status } : {}), ...(settlement ? { paymentResponse: settlement } : {}) },
    });
    await logs.record({ ...owner, action: 'payments.paid', category: 'payments', description: `Paid ${formatUsdc(amount)} USDC to ${authorization.to} for ${call.resourceUrl}`, targetType: 'payment', targetId: record._id, metadata: { txHash: txHash ?? null, mandateId: reservation.mandateId } });
    return {
      ok: true as const, paid: true as const, paymentId: record._id, ...contentOrNone(paid),
      cost: call.cost, txHash: txHash ?? null, payer: authorization.from, recipient: authorization.to, resource: call.resourceUrl,
      mandate: mandate ? await mandates.present(mandate) : null, paymentResponse: settlement ?? null,
    };
  }

  private async authorizationUsed(wallets: WalletService, wallet: WalletDoc, nonce: Hex): Promise<boolean> {
    const chain = wallets.requireChain();
    return authorizationState({ client: chain.publicClient, token: chain.usdc.address, authorizer: wallet.address as Address, nonce }).catch(() => false);
  }
}
