import { randomBytes } from 'node:crypto';
import { getAddress, toHex, type Address, type Hex } from 'viem';
import type { Connection, Model } from 'mongoose';
import type { Config } from '../platform/config.js';
import type { ActivityLog } from '../platform/activity-log.js';
import { newId } from '../platform/ids.js';
import { afterCursor, pageOf, type Cursor } from '../platform/pagination.js';
import { guardedFetch, GuardedFetchError, outboundPolicy, type GuardedResponse } from '../platform/ssrf.js';
import { authorizationState, type Authorization } from '../chain/usdc.js';
import { formatUsdc } from 'agentgate-x402-wire';
import type { WalletService } from '../wallet/wallet-service.js';
import type { WalletDoc } from '../wallet/wallet-model.js';
import type { MandateOwner, MandateService } from './mandate-service.js';
import { chooseOffer, paymentHeaderFor, readChallenge, readSettlement, type Offer } from './challenge.js';
import { permit2NonceUsed } from '../chain/permit2.js';
import { proxySettlementAmount } from '../payments/schemes/permit2-proxy.js';
import { EXACT_PROXY_ADDRESS, type ExactPermit } from '../payments/schemes/exact/evm/chain.js';
import { UPTO_PROXY_ADDRESS, type UptoPermit } from '../payments/schemes/upto/evm/chain.js';
import { EIP3009_TOKEN_COLLECTOR_ADDRESS, escrowOf, escrowState, payerAgnosticNonce, paymentInfoHash, paymentInfoOf } from '../payments/schemes/auth-capture/evm/chain.js';
import type { Reservation } from './mandate-service.js';
import { outgoingPaymentSchema, type OutgoingPaymentDoc } from './outgoing-payment-model.js';
import type { PayRefusal } from './pay-result.js';
import { contentOf, refuse, settlementFailure } from './seller-answer.js';
import { BatchSettlementPayer } from './channel-payer.js';

export interface PayInput {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: unknown;
  maxAmountAtomic?: bigint;
  dryRun?: boolean;
  mandateId?: string;
}

/** Outbound limits for a URL someone else chose. */
const FETCH_TIMEOUT_MS = 20_000;
const MAX_RESPONSE_BYTES = 1024 * 1024;
/** Authorizations live no longer than this, whatever the seller asks, so a stray one expires soon. */
const MAX_VALIDITY_SECONDS = 300;
const MIN_VALIDITY_SECONDS = 30;

/** Headers the caller may not set: they belong to the transport or to the payment itself. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'connection', 'transfer-encoding', 'x-payment', 'payment-signature', 'upgrade', 'te', 'trailer', 'keep-alive', 'proxy-authorization']);


/**
 * `payments_pay`: fetch a URL, and when it answers 402 pay it from the identity's wallet under its
 * mandate. Order matters for "no money moved": every check (challenge, network, caps, balance) happens
 * before the owner key signs, and a signed authorization the seller did not take is cancelled on chain.
 */
export class PayService {
  readonly outgoing: Model<OutgoingPaymentDoc>;
  readonly channels: BatchSettlementPayer;

  constructor(
    conn: Connection,
    private readonly config: Config,
    private readonly wallets: WalletService,
    private readonly mandates: MandateService,
    private readonly logs: ActivityLog,
  ) {
    this.outgoing = conn.models.OutgoingPayment ?? conn.model<OutgoingPaymentDoc>('OutgoingPayment', outgoingPaymentSchema, 'outgoing_payments');
    this.channels = new BatchSettlementPayer(conn, wallets, mandates, logs, this.outgoing, (url, request) => this.fetch(url, request));
  }

  async pay(owner: MandateOwner, input: PayInput) {
    if (!this.wallets.available) return refuse('wallet_unavailable', 'wallets are not configured on this server');
    const method = (input.method ?? 'GET').toUpperCase();
    const request = requestOf(method, input);

    const first = await this.fetch(input.url, request);
    if (!first.ok) return first;
    const response = first.response;
    if (response.status !== 402) return { ok: true as const, paid: false as const, ...contentOf(response) };

    const challenge = readChallenge(response);
    if (!challenge) return refuse('url_not_x402', `${input.url} answered 402 without an x402 challenge (no PAYMENT-REQUIRED header, no x402Version 1 body)`);
    const chain = this.wallets.requireChain();
    const choice = chooseOffer(challenge, { network: chain.network, caip2: chain.caip2, usdc: chain.usdc.address });
    if (!choice.ok) return refuse(choice.code, choice.message);
    const { amount, payTo, offer } = choice;
    // upto: `amount` is the most the seller may charge. That maximum is what the caps and maxAmountUsdc
    // judge, what is reserved and what is signed; the mandate keeps only what was charged.
    const cost = { amountUsdc: formatUsdc(amount), amountUsdcRaw: amount.toString(), asset: chain.usdc.address, network: chain.network, ...(offer.scheme === 'upto' ? { scheme: 'upto' as const, maxAmountUsdc: formatUsdc(amount), maxAmountUsdcRaw: amount.toString() } : {}) };
    if (input.maxAmountAtomic !== undefined && amount > input.maxAmountAtomic) {
      return refuse('max_amount_exceeded', `the ${offer.scheme === 'upto' ? 'maximum' : 'price'} ${cost.amountUsdc} USDC is over maxAmountUsdc ${formatUsdc(input.maxAmountAtomic)}`);
    }

    const reserved = await this.mandates.reserve(owner, new URL(response.url), amount, { mandateId: input.mandateId });
    if (!reserved.ok) return reserved;
    const { reservation } = reserved;
    // 'held' is released on any exit; once a signature may have reached the seller the amount stays
    // reserved unless we know for certain that nothing moved.
    const state: { hold: 'held' | 'in_flight' | 'done' } = { hold: 'held' };
    try {
      const wallet = await this.wallets.forIdentity(owner);
      const balance = await this.wallets.balance(wallet.address as Address);
      // A channel's call is paid from its deposit: the wallet's balance matters only for a deposit (BatchSettlementPayer checks it then).
      if (balance < amount && offer.scheme !== 'batch-settlement') {
        // A dev server mounts the faucet (server/dev/faucet.ts): say so, so an agent can fund itself.
        const hint = this.config.mode === 'dev' ? '; a dev server funds it with wallet_faucet (POST /v0/dev/faucet)' : '';
        return refuse('balance_insufficient', `the wallet ${wallet.address} holds ${formatUsdc(balance)} USDC; ${cost.amountUsdc} USDC are needed${hint}`);
      }
      if (input.dryRun) {
        state.hold = 'done';
        await this.mandates.release(reservation);
        return {
          ok: true as const, paid: false as const, dryRun: true as const, status: 402, cost, payer: wallet.address, recipient: payTo,
          resource: choice.resourceUrl, mandate: await this.mandates.present(reserved.mandate),
        };
      }

      await this.wallets.ensureDeployed(wallet);
      if (offer.scheme === 'batch-settlement') {
        return await this.channels.pay({ owner, url: input.url, request, method, wallet, offer, amount, payTo, resourceUrl: choice.resourceUrl, reservation, mandate: reserved.mandate, cost, state });
      }
      if (offer.scheme === 'auth-capture') {
        return await this.payAuthCapture({ owner, input, request, method, wallet, offer, amount, payTo, resourceUrl: choice.resourceUrl, reservation, cost, state });
      }
      // upto, and exact through Permit2 when the offer asks for it (a token without EIP-3009 needs it).
      if (offer.scheme === 'upto' || (offer.scheme === 'exact' && offer.version === 2 && offer.requirement.extra.assetTransferMethod === 'permit2')) {
        return await this.payByPermit2({ owner, input, request, method, wallet, offer, amount, payTo, resourceUrl: choice.resourceUrl, maxTimeoutSeconds: choice.maxTimeoutSeconds, reservation, cost, state });
      }
      const now = Math.floor(Date.now() / 1000);
      const validity = Math.min(MAX_VALIDITY_SECONDS, Math.max(MIN_VALIDITY_SECONDS, choice.maxTimeoutSeconds));
      const authorization: Authorization = {
        from: getAddress(wallet.address), to: getAddress(payTo), value: amount,
        validAfter: BigInt(now - 600), validBefore: BigInt(now + validity), nonce: toHex(randomBytes(32)),
      };
      const record: OutgoingPaymentDoc = {
        _id: newId('pay'), orgId: owner.orgId, identityId: owner.identityId, direction: 'out', mandateId: reservation.mandateId,
        network: chain.network, payerAddress: authorization.from, recipientAddress: authorization.to, amountUsdcRaw: amount.toString(),
        resourceUrl: choice.resourceUrl, requestUrl: input.url, method, x402Version: offer.version, authorizationNonce: authorization.nonce,
        status: 'pending', createdAt: new Date(),
      };
      await this.outgoing.create(record);
      const signature = await this.wallets.signTransfer(wallet, authorization);
      state.hold = 'in_flight';
      const payment = paymentHeaderFor(offer, {
        signature,
        authorization: {
          from: authorization.from, to: authorization.to, value: amount.toString(),
          validAfter: authorization.validAfter.toString(), validBefore: authorization.validBefore.toString(), nonce: authorization.nonce,
        },
      });

      const paid = await this.fetch(input.url, { ...request, headers: { ...request.headers, [payment.name]: payment.value } });
      const settlement = paid.ok ? readSettlement(paid.response) : undefined;
      const moved = settlement?.success === true || await this.authorizationUsed(wallet, authorization.nonce);
      if (!moved) {
        // Nothing settled: make sure the signature can never settle later, then give the cap back.
        const cancelled = await this.wallets.cancelAuthorization(wallet, authorization.nonce);
        if (cancelled || !(await this.authorizationUsed(wallet, authorization.nonce))) {
          const reason = !paid.ok ? paid.message : settlementFailure(paid.response, settlement);
          await this.outgoing.updateOne({ _id: record._id }, { $set: { status: 'failed', failureReason: reason, ...(paid.ok ? { responseStatus: paid.response.status } : {}) } });
          state.hold = 'done';
          // An authorization we could not cancel may still settle until it expires: its amount stays reserved.
          if (cancelled) await this.mandates.release(reservation);
          await this.logs.record({ ...owner, action: 'payments.pay_failed', category: 'payments', severity: 'warning', status: 'failure', description: `Payment of ${cost.amountUsdc} USDC to ${choice.resourceUrl} was not settled: ${reason}`.slice(0, 500), targetType: 'payment', targetId: record._id });
          return refuse('settle_failed', reason);
        }
      }

      const txHash = typeof settlement?.transaction === 'string' ? settlement.transaction : undefined;
      state.hold = 'done';
      const mandate = await this.mandates.commit(reservation);
      await this.outgoing.updateOne({ _id: record._id }, {
        $set: { status: 'settled', settledAt: new Date(), ...(txHash ? { txHash } : {}), ...(paid.ok ? { responseStatus: paid.response.status } : {}), ...(settlement ? { paymentResponse: settlement } : {}) },
      });
      await this.logs.record({ ...owner, action: 'payments.paid', category: 'payments', description: `Paid ${cost.amountUsdc} USDC to ${authorization.to} for ${choice.resourceUrl}`, targetType: 'payment', targetId: record._id, metadata: { txHash: txHash ?? null, mandateId: reservation.mandateId } });
      return {
        ok: true as const, paid: true as const, paymentId: record._id,
        ...(paid.ok ? contentOf(paid.response) : { status: 0, contentType: null }),
        cost, txHash: txHash ?? null, payer: authorization.from, recipient: authorization.to, resource: choice.resourceUrl,
        mandate: mandate ? await this.mandates.present(mandate) : null, paymentResponse: settlement ?? null,
      };
    } finally {
      // Refusals, dry runs and errors before signing give the cap back.
      if (state.hold === 'held') await this.mandates.release(reservation);
    }
  }

  /**
   * Pays an offer through Permit2: x402 `upto`, or `exact` whose offer asks `assetTransferMethod:
   * "permit2"`. The wallet approves Permit2 once (relayer-paid through USDC's EIP-2612 permit, recorded),
   * the owner key signs a Permit2 witness permit for the amount (upto: the maximum, bound to the seller
   * and to the facilitator the offer names; exact: the price, bound to the seller) with that proxy as
   * spender, and the seller settles it (upto: for what the request used). The mandate reserved the
   * amount; it keeps what the chain says moved. A permit the seller did not take cannot be cancelled
   * without the account sending a transaction, so it is left to expire (at most 300 s) with its amount
   * still reserved.
   */
  private async payByPermit2(p: {
    owner: MandateOwner; input: PayInput; request: { method: string; headers: Record<string, string>; body?: string }; method: string;
    wallet: WalletDoc; offer: Extract<Offer, { scheme: 'upto' } | { scheme: 'exact'; version: 2 }>; amount: bigint; payTo: Address; resourceUrl: string; maxTimeoutSeconds: number;
    reservation: Reservation; cost: Record<string, unknown>; state: { hold: 'held' | 'in_flight' | 'done' };
  }) {
    const { owner, input, wallet, offer, amount, reservation, state } = p;
    const kind = offer.scheme;
    const chain = this.wallets.requireChain();
    await this.wallets.ensurePermit2Allowance(wallet, amount);
    const now = Math.floor(Date.now() / 1000);
    const validity = Math.min(MAX_VALIDITY_SECONDS, Math.max(MIN_VALIDITY_SECONDS, p.maxTimeoutSeconds));
    const signed = { from: getAddress(wallet.address), token: chain.usdc.address, nonce: BigInt(toHex(randomBytes(32))), deadline: BigInt(now + validity), to: getAddress(p.payTo), validAfter: 0n };
    const upto: UptoPermit | undefined = offer.scheme === 'upto'
      ? { ...signed, maxAmount: amount, spender: UPTO_PROXY_ADDRESS, facilitator: getAddress(offer.requirement.extra.facilitatorAddress!) }
      : undefined;
    const exact: ExactPermit = { ...signed, amount, spender: EXACT_PROXY_ADDRESS };
    const record: OutgoingPaymentDoc = {
      _id: newId('pay'), orgId: owner.orgId, identityId: owner.identityId, direction: 'out', mandateId: reservation.mandateId,
      network: chain.network, payerAddress: signed.from, recipientAddress: signed.to, amountUsdcRaw: amount.toString(),
      ...(upto ? { scheme: 'upto' as const, maxAmountUsdcRaw: amount.toString() } : {}),
      resourceUrl: p.resourceUrl, requestUrl: input.url, method: p.method, x402Version: 2, authorizationNonce: signed.nonce.toString(),
      status: 'pending', createdAt: new Date(),
    };
    await this.outgoing.create(record);
    const signature = upto ? await this.wallets.signUptoPermit(wallet, upto) : await this.wallets.signExactPermit(wallet, exact);
    state.hold = 'in_flight';
    const permitted = { from: signed.from, permitted: { token: signed.token, amount: amount.toString() }, nonce: signed.nonce.toString(), deadline: signed.deadline.toString() };
    const payment = paymentHeaderFor(offer, {
      signature,
      permit2Authorization: upto
        ? { ...permitted, spender: upto.spender, witness: { to: signed.to, facilitator: upto.facilitator, validAfter: '0' } }
        : { ...permitted, spender: exact.spender, witness: { to: signed.to, validAfter: '0' } },
    });
    const paid = await this.fetch(input.url, { ...p.request, headers: { ...p.request.headers, [payment.name]: payment.value } });
    const settlement = paid.ok ? readSettlement(paid.response) : undefined;
    const used = settlement?.success === true || await permit2NonceUsed(chain.publicClient, signed.from, signed.nonce).catch(() => false);
    const upTo = upto ? 'up to ' : '';
    if (!used) {
      const reason = !paid.ok ? paid.message : settlementFailure(paid.response, settlement);
      await this.outgoing.updateOne({ _id: record._id }, { $set: { status: 'failed', failureReason: reason, ...(paid.ok ? { responseStatus: paid.response.status } : {}) } });
      state.hold = 'done'; // the amount stays reserved: the unused permit may still settle until its deadline
      await this.logs.record({ ...owner, action: 'payments.pay_failed', category: 'payments', severity: 'warning', status: 'failure', description: `Payment of ${upTo}${formatUsdc(amount)} USDC to ${p.resourceUrl} was not settled: ${reason}`.slice(0, 500), targetType: 'payment', targetId: record._id });
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
    const mandate = await this.mandates.commit(reservation, moved !== undefined && moved <= amount ? moved : amount);
    await this.outgoing.updateOne({ _id: record._id }, {
      $set: { status: 'settled', settledAt: new Date(), amountUsdcRaw: charged.toString(), ...(txHash ? { txHash } : {}), ...(paid.ok ? { responseStatus: paid.response.status } : {}), ...(settlement ? { paymentResponse: settlement } : {}) },
    });
    const description = upto ? `Paid ${formatUsdc(charged)} USDC (of up to ${formatUsdc(amount)}) to ${signed.to} for ${p.resourceUrl}` : `Paid ${formatUsdc(charged)} USDC through Permit2 to ${signed.to} for ${p.resourceUrl}`;
    await this.logs.record({ ...owner, action: 'payments.paid', category: 'payments', description, targetType: 'payment', targetId: record._id, metadata: { txHash: txHash ?? null, mandateId: reservation.mandateId, scheme: kind, ...(upto ? {} : { assetTransferMethod: 'permit2' }) } });
    return {
      ok: true as const, paid: true as const, paymentId: record._id,
      ...(paid.ok ? contentOf(paid.response) : { status: 0, contentType: null }),
      cost: { ...p.cost, amountUsdc: formatUsdc(charged), amountUsdcRaw: charged.toString() },
      txHash: txHash ?? null, payer: signed.from, recipient: signed.to, resource: p.resourceUrl,
      mandate: mandate ? await this.mandates.present(mandate) : null, paymentResponse: settlement ?? null,
    };
  }

  /**
   * Pays an x402 `auth-capture` offer: the wallet signs a USDC ReceiveWithAuthorization to the escrow's
   * ERC-3009 collector whose nonce commits to the whole escrow payment (operator, payee, deadlines, fees),
   * so the seller's operator can only authorize exactly that into escrow. The mandate counts what the
   * escrow may still pay out of it (held + captured - refunded), read from the chain after the answer and
   * again whenever activity is read (syncEscrow): a void or a refund gives the mandate back the difference.
   * Not collected: the signature is cancelled on chain and the reservation released.
   */
  private async payAuthCapture(p: {
    owner: MandateOwner; input: PayInput; request: { method: string; headers: Record<string, string>; body?: string }; method: string;
    wallet: WalletDoc; offer: Extract<Offer, { scheme: 'auth-capture' }>; amount: bigint; payTo: Address; resourceUrl: string;
    reservation: Reservation; cost: Record<string, unknown>; state: { hold: 'held' | 'in_flight' | 'done' };
  }) {
    const { owner, input, wallet, offer, amount, reservation, state } = p;
    const chain = this.wallets.requireChain();
    const requirement = offer.requirement;
    if (!escrowOf(requirement.extra.authCaptureEscrow)) return refuse('network_unsupported', `the offer names escrow ${requirement.extra.authCaptureEscrow}, not the Commerce Payments escrow this wallet pays into`);
    const now = Math.floor(Date.now() / 1000);
    const validBefore = Math.min(now + Math.min(MAX_VALIDITY_SECONDS, Math.max(MIN_VALIDITY_SECONDS, requirement.maxTimeoutSeconds)), requirement.extra.captureDeadline);
    const salt = toHex(randomBytes(32));
    const from = getAddress(wallet.address);
    const info = paymentInfoOf(requirement, { salt, authorization: { from, validBefore: String(validBefore) } });
    const nonce = payerAgnosticNonce(info, chain.chainId);
    const hash = paymentInfoHash(info, chain.chainId);
    const authorization: Authorization = { from, to: EIP3009_TOKEN_COLLECTOR_ADDRESS, value: amount, validAfter: 0n, validBefore: BigInt(validBefore), nonce };
    const record: OutgoingPaymentDoc = {
      _id: newId('pay'), orgId: owner.orgId, identityId: owner.identityId, direction: 'out', mandateId: reservation.mandateId,
      network: chain.network, payerAddress: from, recipientAddress: getAddress(p.payTo), amountUsdcRaw: amount.toString(), scheme: 'auth-capture', maxAmountUsdcRaw: amount.toString(),
      resourceUrl: p.resourceUrl, requestUrl: input.url, method: p.method, x402Version: 2, authorizationNonce: nonce,
      escrow: { hash, reservationId: reservation.reservationId, day: reservation.day, countedUsdcRaw: amount.toString(), state: 'authorized' },
      status: 'pending', createdAt: new Date(),
    };
    await this.outgoing.create(record);
    const signature = await this.wallets.signReceiveAuthorization(wallet, authorization);
    state.hold = 'in_flight';
    const payment = paymentHeaderFor(offer, {
      authorization: { from, to: authorization.to, value: amount.toString(), validAfter: '0', validBefore: String(validBefore), nonce }, signature, salt,
    });
    const paid = await this.fetch(input.url, { ...p.request, headers: { ...p.request.headers, [payment.name]: payment.value } });
    const settlement = paid.ok ? readSettlement(paid.response) : undefined;
    const escrow = await escrowState(chain.publicClient, hash).catch(() => undefined);
    if (escrow && !escrow.hasCollectedPayment) {
      // Never collected: the signature is cancelled so it can never be, and the cap goes back.
      const cancelled = await this.wallets.cancelAuthorization(wallet, nonce);
      const reason = !paid.ok ? paid.message : settlementFailure(paid.response, settlement);
      await this.outgoing.updateOne({ _id: record._id }, { $set: { status: 'failed', failureReason: reason, ...(paid.ok ? { responseStatus: paid.response.status } : {}) } });
      state.hold = 'done';
      if (cancelled) await this.mandates.release(reservation);
      await this.logs.record({ ...owner, action: 'payments.pay_failed', category: 'payments', severity: 'warning', status: 'failure', description: `Payment of ${formatUsdc(amount)} USDC to ${p.resourceUrl} was not authorized: ${reason}`.slice(0, 500), targetType: 'payment', targetId: record._id });
      return refuse('settle_failed', reason);
    }
    // Collected (or the chain could not be read: then it counts in full until a later sync reads it).
    state.hold = 'done';
    const mandate = await this.mandates.commit(reservation);
    const txHash = typeof settlement?.transaction === 'string' && settlement.transaction ? settlement.transaction : undefined;
    await this.outgoing.updateOne({ _id: record._id }, {
      $set: { status: 'settled', settledAt: new Date(), ...(txHash ? { txHash } : {}), ...(paid.ok ? { responseStatus: paid.response.status } : {}), ...(settlement ? { paymentResponse: settlement } : {}) },
    });
    const synced = await this.syncEscrow((await this.outgoing.findById(record._id).lean())!);
    await this.logs.record({ ...owner, action: 'payments.paid', category: 'payments', description: `Authorized ${formatUsdc(amount)} USDC into escrow for ${p.resourceUrl} (${synced.escrow?.state})`, targetType: 'payment', targetId: record._id, metadata: { txHash: txHash ?? null, mandateId: reservation.mandateId, scheme: 'auth-capture' } });
    const counted = BigInt(synced.escrow!.countedUsdcRaw);
    return {
      ok: true as const, paid: true as const, paymentId: record._id,
      ...(paid.ok ? contentOf(paid.response) : { status: 0, contentType: null }),
      cost: { ...p.cost, scheme: 'auth-capture' as const, amountUsdc: formatUsdc(counted), amountUsdcRaw: counted.toString(), escrow: synced.escrow!.state },
      txHash: txHash ?? null, payer: from, recipient: getAddress(p.payTo), resource: p.resourceUrl,
      mandate: mandate ? await this.mandates.present(await this.mandates.get(owner, mandate._id)) : null, paymentResponse: settlement ?? null,
    };
  }

  /**
   * Reads an auth-capture payment's escrow state and gives the mandate back what can no longer leave the
   * wallet for it: a voided hold, a refund. What it counts is what is held plus what was captured and not
   * refunded. Each give-back is once per amount counted (mandates.giveBack's unique key).
   */
  async syncEscrow(record: OutgoingPaymentDoc): Promise<OutgoingPaymentDoc> {
    if (record.scheme !== 'auth-capture' || !record.escrow || record.status !== 'settled') return record;
    const chain = this.wallets.requireChain();
    const state = await escrowState(chain.publicClient, record.escrow.hash as Hex).catch(() => undefined);
    if (!state?.hasCollectedPayment) return record;
    const counted = BigInt(record.escrow.countedUsdcRaw);
    const now = state.capturable + state.refundable;
    const wasCaptured = record.escrow.state === 'captured' || record.escrow.state === 'refunded';
    type EscrowState = NonNullable<OutgoingPaymentDoc['escrow']>['state'];
    const label: EscrowState = state.capturable > 0n ? 'authorized'
      : state.refundable > 0n ? (record.escrow.state === 'refunded' || (wasCaptured && state.refundable < counted) ? 'refunded' : 'captured')
        : wasCaptured ? 'refunded' : 'voided';
    if (now < counted) await this.mandates.giveBack({ reservationId: record.escrow.reservationId, mandateId: record.mandateId, day: record.escrow.day }, counted - now, now.toString());
    const escrow = { ...record.escrow, countedUsdcRaw: (now < counted ? now : counted).toString(), state: label };
    await this.outgoing.updateOne({ _id: record._id }, { $set: { escrow } });
    return { ...record, escrow };
  }

  /** Syncs this identity's auth-capture payments the escrow may still change (held, or captured and not all refunded). */
  async syncEscrows(owner: MandateOwner): Promise<void> {
    if (!this.wallets.available) return;
    const open = await this.outgoing.find({ identityId: owner.identityId, scheme: 'auth-capture', status: 'settled', 'escrow.countedUsdcRaw': { $ne: '0' } } as never).sort({ createdAt: -1 }).limit(50).lean() as OutgoingPaymentDoc[];
    for (const record of open) await this.syncEscrow(record);
  }

  private async authorizationUsed(wallet: WalletDoc, nonce: Hex): Promise<boolean> {
    const chain = this.wallets.requireChain();
    return authorizationState({ client: chain.publicClient, token: chain.usdc.address, authorizer: wallet.address as Address, nonce }).catch(() => false);
  }

  private async fetch(url: string, request: { method: string; headers: Record<string, string>; body?: string }): Promise<{ ok: true; response: GuardedResponse } | PayRefusal> {
    try {
      const response = await guardedFetch(url, {
        ...request, timeoutMs: FETCH_TIMEOUT_MS, maxBytes: MAX_RESPONSE_BYTES, maxRedirects: 3,
        ...outboundPolicy(this.config),
      });
      return { ok: true, response };
    } catch (err) {
      if (!(err instanceof GuardedFetchError)) throw err;
      if (err.code === 'blocked_address') return refuse('url_blocked', `refused to fetch ${url}: ${err.message}`);
      if (err.code === 'invalid_url') return refuse('url_invalid', `url ${err.message}`);
      return refuse('fetch_failed', `fetching ${url} failed (${err.code}): ${err.message}`);
    }
  }

  // --- records -------------------------------------------------------------------------------------

  async listOutgoing(owner: MandateOwner, limit: number, cursor?: Cursor) {
    const rows = await this.outgoing.find({ identityId: owner.identityId, ...afterCursor('createdAt', cursor) }).sort({ createdAt: -1, _id: -1 }).limit(limit + 1).lean();
    return pageOf(rows, limit, (row) => ({ at: row.createdAt, id: row._id }));
  }
}

function requestOf(method: string, input: PayInput): { method: string; headers: Record<string, string>; body?: string } {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    if (!RESERVED_HEADERS.has(name.toLowerCase())) headers[name] = value;
  }
  if (input.body === undefined || method === 'GET' || method === 'HEAD') return { method, headers };
  if (typeof input.body === 'string') return { method, headers, body: input.body };
  if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  return { method, headers, body: JSON.stringify(input.body) };
}
