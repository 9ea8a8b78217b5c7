import type { Address } from 'viem';
import type { Connection, Model } from 'mongoose';
import type { Config } from '../platform/config.js';
import type { ActivityLog } from '../platform/activity-log.js';
import { afterCursor, pageOf, type Cursor } from '../platform/pagination.js';
import { guardedFetch, GuardedFetchError, outboundPolicy, type GuardedResponse } from '../platform/ssrf.js';
import { findNetwork, findSolanaNetwork, formatUsdc } from 'agentgate-x402-wire';
import type { WalletService } from '../wallet/wallet-service.js';
import type { WalletDoc } from '../wallet/wallet-model.js';
import type { Screening } from '../screening/index.js';
import { screenedNetwork } from '../screening/sources.js';
import type { MandateOwner, MandateService } from './mandate-service.js';
import { payableOffers, readChallenge, whyNoOffer, type Offer, type OurAsset, type PayableOffer, type SolanaOffer } from './challenge.js';
import { outgoingPaymentSchema, type OutgoingPaymentDoc } from './outgoing-payment-model.js';
import type { PayRefusal } from './pay-result.js';
import { contentOf, refuse, type OutgoingRequest } from './seller-answer.js';
import type { HoldState, PayCall, PayerDeps, SchemePayer } from './schemes/payer.js';
import { Permit2Payer } from './schemes/permit2-payer.js';
import { ExactPayer } from './schemes/exact/evm/payer.js';
import { UptoPayer } from './schemes/upto/evm/payer.js';
import { AuthCapturePayer } from './schemes/auth-capture/evm/payer.js';
import { BatchSettlementPayer } from './schemes/batch-settlement/evm/payer.js';
import { ExactSvmPayer } from './schemes/exact/svm/payer.js';
import type { SolanaWallets } from '../wallet/solana-wallets.js';
import type { SolanaChain } from '../chain/solana/solana-chain.js';

export interface PayInput {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: unknown;
  maxAmountAtomic?: bigint;
  dryRun?: boolean;
  mandateId?: string;
  /** Pay only on this network (v1 name or CAIP-2 id); unset: the preference of choosePayable. */
  network?: string;
}

/** Outbound limits for a URL someone else chose. */
const FETCH_TIMEOUT_MS = 20_000;
const MAX_RESPONSE_BYTES = 1024 * 1024;

/** Headers the caller may not set: they belong to the transport or to the payment itself. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'connection', 'transfer-encoding', 'x-payment', 'payment-signature', 'upgrade', 'te', 'trailer', 'keep-alive', 'proxy-authorization']);

/** One payer per scheme (schemes/<scheme>/evm/payer.ts): the offer's scheme picks it, and nothing else does. */
type Payers = { [S in Offer['scheme']]: SchemePayer<S> };

/**
 * `payments_pay`: fetch a URL, and when it answers 402 pay it from the identity's wallet under its
 * mandate. Order matters for "no money moved": every check (challenge, network, caps, balance) happens
 * here, before the scheme's payer has the owner key sign, and a signed authorization the seller did not
 * take is cancelled on chain (or, a Permit2 permit, left reserved until it expires).
 */
export class PayService {
  readonly outgoing: Model<OutgoingPaymentDoc>;
  /** batch-settlement's payer, also the wallet's channels (list, refund, withdraw) and their idle sweep. */
  readonly channels: BatchSettlementPayer;
  readonly authCapture: AuthCapturePayer;
  private readonly payers: Payers;
  /** exact on Solana, from the identity's Solana wallet; undefined: this deployment pays on no Solana network. */
  private readonly solanaPayer: ExactSvmPayer | undefined;

  constructor(
    conn: Connection,
    private readonly config: Config,
    private readonly wallets: WalletService,
    private readonly mandates: MandateService,
    logs: ActivityLog,
    /** Sanctions screening: the paying wallet and the seller's payTo, before anything is reserved or signed. */
    private readonly screening: Screening,
    private readonly solana?: SolanaWallets,
  ) {
    this.outgoing = conn.models.OutgoingPayment ?? conn.model<OutgoingPaymentDoc>('OutgoingPayment', outgoingPaymentSchema, 'outgoing_payments');
    const deps: PayerDeps = { wallets, mandates, logs, outgoing: this.outgoing, fetch: (url, request) => this.fetch(url, request) };
    const permit2 = new Permit2Payer(deps);
    this.channels = new BatchSettlementPayer(conn, deps);
    this.authCapture = new AuthCapturePayer(deps);
    this.payers = { exact: new ExactPayer(deps, permit2), upto: new UptoPayer(permit2), 'auth-capture': this.authCapture, 'batch-settlement': this.channels };
    this.solanaPayer = solana?.available ? new ExactSvmPayer(deps, solana) : undefined;
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
    // A Solana network named: only there. Otherwise the EVM offers first, then Solana's where the wallet is funded.
    const solanaNamed = input.network !== undefined && findSolanaNetwork(input.network) !== undefined;
    const ours = solanaNamed ? { ok: true as const, networks: [] } : this.ourNetworks(input.network);
    if (!ours.ok) return ours;
    const offers = payableOffers(challenge, ours.networks);
    const onSolana = this.solanaOffers(challenge, input.network);
    if (!offers.length && !onSolana.length) return solanaNamed ? refuse('network_unsupported', `this wallet does not pay on ${input.network} here, or the seller does not offer it`) : whyNoOffer(challenge, ours.networks, this.solana?.networks ?? []);
    const wallet = offers.length ? await this.wallets.forIdentity(owner) : undefined;
    const chosen = wallet ? await this.choosePayable(wallet, offers, input.maxAmountAtomic) : undefined;
    if (onSolana.length && (!chosen?.ok || chosen.shortfall)) {
      const paidOnSolana = await this.payOnSolana(owner, input, request, method, response.url, onSolana, chosen);
      if (paidOnSolana) return paidOnSolana;
    }
    if (!wallet || !chosen) return refuse('network_unsupported', 'no offer of this seller is payable by this wallet');
    if (!chosen.ok) return chosen;
    const { offer: choice, shortfall } = chosen;
    const { amount, payTo, offer } = choice;
    const wallets = this.wallets.on(choice.network.caip2)!;
    const chain = wallets.requireChain();
    // upto: `amount` is the most the seller may charge. That maximum is what the caps and maxAmountUsdc
    // judge, what is reserved and what is signed; the mandate keeps only what was charged. Every network's
    // token is a 6-decimal dollar token (chain-service.ts), so the mandate counts dollars on all of them.
    const cost = { amountUsdc: formatUsdc(amount), amountUsdcRaw: amount.toString(), asset: chain.usdc.address, network: chain.network, caip2: chain.caip2, ...(offer.scheme === 'upto' ? { scheme: 'upto' as const, maxAmountUsdc: formatUsdc(amount), maxAmountUsdcRaw: amount.toString() } : {}) };

    const screened = await this.screened(owner, wallet.address, payTo, chain.network, offer.scheme);
    if (screened) return screened;
    const reserved = await this.mandates.reserve(owner, new URL(response.url), amount, { mandateId: input.mandateId });
    if (!reserved.ok) return reserved;
    const { reservation } = reserved;
    // 'held' is released on any exit; once a signature may have reached the seller the amount stays
    // reserved unless we know for certain that nothing moved.
    const state: HoldState = { hold: 'held' };
    try {
      // After the mandate's checks, as before many networks: a refusal names the mandate first.
      if (shortfall) return shortfall;
      if (input.dryRun) {
        state.hold = 'done';
        await this.mandates.release(reservation);
        return {
          ok: true as const, paid: false as const, dryRun: true as const, status: 402, cost, payer: wallet.address, recipient: payTo,
          resource: choice.resourceUrl, mandate: await this.mandates.present(reserved.mandate),
        };
      }

      const here = await wallets.forIdentity(owner);
      await wallets.ensureDeployed(here);
      const call: PayCall = {
        owner, url: input.url, request, method, wallet: here, wallets, offer, amount, payTo, resourceUrl: choice.resourceUrl, maxTimeoutSeconds: choice.maxTimeoutSeconds,
        reservation, mandate: reserved.mandate, cost, state,
      };
      return await this.payByScheme(call);
    } finally {
      // Refusals, dry runs and errors before signing give the cap back.
      if (state.hold === 'held') await this.mandates.release(reservation);
    }
  }

  /** Why this wallet may not pay this payTo (sanctions screening), or undefined: it may. */
  private async screened(owner: MandateOwner, walletAddress: string, payTo: string, network: string, scheme: string) {
    const refusal = await this.screening.screen(
      [{ role: 'wallet', address: walletAddress }, { role: 'payTo', address: payTo }],
      { orgId: owner.orgId, network: screenedNetwork(network), scheme, door: 'payments_pay' },
    );
    return refusal && refuse(refusal.reason, `${refusal.message}; nothing was paid`);
  }

  /** The seller's exact offers on our Solana networks in our USDC, within the caller's network if it names one. */
  private solanaOffers(challenge: NonNullable<ReturnType<typeof readChallenge>>, network: string | undefined): Array<{ offer: SolanaOffer; chain: SolanaChain; amount: bigint }> {
    if (!this.solanaPayer || !this.solana) return [];
    const named = network === undefined ? undefined : findSolanaNetwork(network);
    if (network !== undefined && !named) return [];
    return challenge.solanaOffers.flatMap((offer) => {
      const chain = this.solana!.on(offer.requirement.network);
      if (!chain || (named && chain.caip2 !== named.caip2) || offer.requirement.asset !== chain.usdcMint) return [];
      return [{ offer, chain, amount: BigInt(offer.requirement.amount) }];
    });
  }

  /**
   * Pays a Solana offer when one is within maxAmountUsdc and funded (or when Solana is all the seller
   * offers us: then with the refusal that says what the wallet holds), under the same mandate, caps and
   * dry run as any payment. Undefined: an EVM offer should be tried instead.
   */
  private async payOnSolana(owner: MandateOwner, input: PayInput, request: OutgoingRequest, method: string, responseUrl: string, candidates: Array<{ offer: SolanaOffer; chain: SolanaChain; amount: bigint }>, evm: Awaited<ReturnType<PayService['choosePayable']>> | undefined) {
    const solana = this.solana!;
    const within = candidates.filter((c) => input.maxAmountAtomic === undefined || c.amount <= input.maxAmountAtomic);
    if (!within.length) return evm ? undefined : refuse('max_amount_exceeded', `the price ${formatUsdc(candidates[0]!.amount)} USDC is over maxAmountUsdc ${formatUsdc(input.maxAmountAtomic!)}`);
    const wallet = await solana.forIdentity(owner);
    const balances = await Promise.all(within.map((c) => solana.balance(c.chain, wallet.address).catch(() => -1n)));
    const funded = within.findIndex((c, i) => balances[i]! >= c.amount);
    if (funded < 0 && evm) return undefined;
    const choice = within[funded < 0 ? 0 : funded]!;
    const shortfall = funded < 0 ? refuse('balance_insufficient', `the Solana wallet ${wallet.address} holds ${balances[0]! < 0n ? 'an unknown balance (its RPC did not answer)' : `${formatUsdc(balances[0]!)} USDC`} on ${choice.chain.network}; ${formatUsdc(choice.amount)} USDC are needed${this.config.mode === 'dev' ? '; a dev server funds it with wallet_faucet (POST /v0/dev/faucet)' : ''}`) : undefined;
    const cost = { amountUsdc: formatUsdc(choice.amount), amountUsdcRaw: choice.amount.toString(), asset: choice.chain.usdcMint, network: choice.chain.network, caip2: choice.chain.caip2 };
    const screened = await this.screened(owner, wallet.address, choice.offer.requirement.payTo, choice.chain.network, 'exact');
    if (screened) return screened;
    const reserved = await this.mandates.reserve(owner, new URL(responseUrl), choice.amount, { mandateId: input.mandateId });
    if (!reserved.ok) return reserved;
    const state: HoldState = { hold: 'held' };
    try {
      if (shortfall) return shortfall;
      if (input.dryRun) {
        state.hold = 'done';
        await this.mandates.release(reserved.reservation);
        return { ok: true as const, paid: false as const, dryRun: true as const, status: 402, cost, payer: wallet.address, recipient: choice.offer.requirement.payTo, resource: choice.offer.resource.url, mandate: await this.mandates.present(reserved.mandate) };
      }
      return await this.solanaPayer!.pay({ owner, url: input.url, request, method, chain: choice.chain, wallet, offer: choice.offer, amount: choice.amount, reservation: reserved.reservation, mandate: reserved.mandate, cost, state });
    } finally {
      if (state.hold === 'held') await this.mandates.release(reserved.reservation);
    }
  }

  /** The networks the wallet pays on (only `network` when the caller names one), the default one first. */
  private ourNetworks(network: string | undefined): { ok: true; networks: OurAsset[] } | PayRefusal {
    const networks = this.wallets.everywhere.map((w): OurAsset => {
      const chain = w.requireChain();
      return { network: chain.network, caip2: chain.caip2, usdc: chain.usdc.address };
    });
    if (network === undefined) return { ok: true, networks };
    const named = findNetwork(network);
    const only = networks.filter((n) => n.caip2 === named?.caip2);
    if (!only.length) return refuse('network_unsupported', `this wallet does not pay on ${network}; it pays on ${networks.map((n) => `${n.network} (${n.caip2})`).join(', ')}`);
    return { ok: true, networks: only };
  }

  /**
   * The offer to pay, following the documented preference (docs/agents/wallet.md, "On several networks"):
   * of the offers within maxAmountUsdc, the best (payableOffers' order: scheme, flow, version, then our
   * network order) on a network where the wallet holds the amount, or, for a channel offer, where the
   * wallet's channel with that seller still holds it. Balances are read side by side; a network whose RPC
   * does not answer counts as holding nothing, so a dead network never blocks paying on another. No network
   * funded: the best offer, with the refusal that says what each network holds.
   */
  private async choosePayable(wallet: WalletDoc, offers: PayableOffer[], maxAmount: bigint | undefined): Promise<{ ok: true; offer: PayableOffer; shortfall?: PayRefusal } | PayRefusal> {
    const address = wallet.address as Address;
    const within = offers.filter((o) => maxAmount === undefined || o.amount <= maxAmount);
    if (!within.length) {
      const best = offers[0]!;
      return refuse('max_amount_exceeded', `the ${best.offer.scheme === 'upto' ? 'maximum' : 'price'} ${formatUsdc(best.amount)} USDC is over maxAmountUsdc ${formatUsdc(maxAmount!)}`);
    }
    const networks = [...new Set(within.map((o) => o.network.caip2))];
    // One network and a channel first: nothing to choose, and the channel's payer reads what it needs (the
    // channel's balance, the wallet's for a deposit), so a voucher-only call reads nothing more here.
    if (networks.length === 1 && within[0]!.offer.scheme === 'batch-settlement') return { ok: true, offer: within[0]! };
    const balances = new Map(await Promise.all(networks.map(async (caip2) => [caip2, await this.wallets.on(caip2)!.balance(address).catch((err: Error) => err)] as const)));
    for (const o of within) {
      const held = balances.get(o.network.caip2);
      if (typeof held === 'bigint' && held >= o.amount) return { ok: true, offer: o };
      if (o.offer.scheme === 'batch-settlement' && await this.channels.covers(wallet, o.offer, this.wallets.on(o.network.caip2)!, o.amount)) return { ok: true, offer: o };
    }
    const needed = formatUsdc(within[0]!.amount);
    const held = networks.map((caip2) => {
      const value = balances.get(caip2)!;
      const name = within.find((o) => o.network.caip2 === caip2)!.network.network;
      return typeof value === 'bigint' ? `${formatUsdc(value)} USDC${networks.length > 1 ? ` on ${name}` : ''}` : `an unknown balance on ${name} (its RPC did not answer)`;
    }).join(', ');
    // A dev server mounts the faucet (server/dev/faucet.ts): say so, so an agent can fund itself.
    const hint = this.config.mode === 'dev' ? '; a dev server funds it with wallet_faucet (POST /v0/dev/faucet)' : '';
    return { ok: true, offer: within[0]!, shortfall: refuse('balance_insufficient', `the wallet ${address} holds ${held}; ${needed} USDC are needed${hint}`) };
  }

  /** The call, paid by its scheme's payer (the cast carries what `call.offer.scheme` already proved). */
  private payByScheme(call: PayCall) {
    return (this.payers[call.offer.scheme] as SchemePayer<Offer['scheme']>).pay(call);
  }

  /** Syncs this identity's auth-capture payments the escrow may still change (auth-capture's payer). */
  syncEscrows(owner: MandateOwner): Promise<void> {
    return this.authCapture.syncEscrows(owner);
  }

  private async fetch(url: string, request: OutgoingRequest): Promise<{ ok: true; response: GuardedResponse } | PayRefusal> {
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

function requestOf(method: string, input: PayInput): OutgoingRequest {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    if (!RESERVED_HEADERS.has(name.toLowerCase())) headers[name] = value;
  }
  if (input.body === undefined || method === 'GET' || method === 'HEAD') return { method, headers };
  if (typeof input.body === 'string') return { method, headers, body: input.body };
  if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  return { method, headers, body: JSON.stringify(input.body) };
}
