import { decodeBase64Json, ExactSvmPaymentPayloadV2Schema, findNetwork, isSolanaNetwork } from 'agentgate-x402-wire';
import { outboundPolicy } from '../platform/ssrf.js';
import type { PaymentDoc } from './models.js';
import type { Connection } from 'mongoose';
import { SignInWithX } from './sign-in-with-x.js';
import type { ChainService } from '../chain/chain-service.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { ChangeFeed } from '../platform/change-feed.js';
import type { SecretBox } from '../platform/secret-box.js';
import type { GroupCommitOptions } from '../platform/group-commit.js';
import type { SettlementEngine } from '../settlement/engine.js';
import type { ReceiptSigner } from './receipts.js';
import { SellerAcceptance } from './acceptance.js';
import { BazaarCatalog } from './bazaar.js';
import { Endpoints } from './endpoints.js';
import { EndpointRegistration } from './endpoint-registration.js';
import { PaymentRecords } from './records.js';
import { PaymentDayTotals } from './payment-totals.js';
import { PaymentSettlement } from './payment-settlement.js';
import { Redemption, type RedeemInput, type RedeemOutcome } from './redemption.js';
import { PaymentSchemes } from './schemes/scheme.js';
import { ExactScheme } from './schemes/exact/evm/scheme.js';
import { UptoScheme } from './schemes/upto/evm/scheme.js';
import { AuthCaptureScheme } from './schemes/auth-capture/evm/scheme.js';
import { AuthCaptureOperations } from './schemes/auth-capture/evm/operations.js';
import { requireChain } from './chain-required.js';
import { PaymentRefunds } from './refunds.js';
import { BatchSettlementChannels, BatchSettlementScheme } from './schemes/batch-settlement/evm/scheme.js';
import { EXACT_REFUND_WORK_KIND, ExactRefunds, type RefundMandates, type RefundWallets } from './schemes/exact/evm/refunds.js';
import { PaymentReceivedOutbox } from './webhook-outbox.js';
import { endpointWebhookTargets } from './webhook-targets.js';
import type { DeliveryQueue, DeliveryTargets, Outbox } from '../webhooks/webhook-service.js';
import type { Screening } from '../screening/index.js';
import type { UsageMeter } from '../usage/index.js';
import type { SolanaChain } from '../chain/solana/solana-chain.js';
import { SVM_EXACT_SETTLER, SvmExactScheme } from './schemes/exact/svm/scheme.js';
import { SvmExactFacilitator } from './schemes/exact/svm/facilitator.js';

/** What the payments area is built from. */
export interface PaymentServiceDeps {
  conn: Connection;
  config: Config;
  chain: ChainService | undefined;
  /**
   * The settlement engine: the desk this process hands claimed payments to, and, in a process holding
   * relayer lanes, the schemes' executors run there for payments accepted anywhere; undefined without a chain.
   */
  engine: SettlementEngine | undefined;
  signer: () => ReceiptSigner;
  secrets: SecretBox;
  logs: ActivityLog;
  log: Logger;
  metrics: Metrics;
  /** Seller settings and endpoints changed in any process reach this one's caches within a poll. */
  changes: ChangeFeed;
  /** The webhook engine: where the area's events (payment.received, refunds, voids, channel claims) go. */
  deliveries: DeliveryQueue;
  /** The org wallets and their owners' mandates that exact payments paid to a wallet are refunded from. */
  refundsFrom?: { wallets: RefundWallets & { readonly available: boolean }; mandates: RefundMandates };
  /** How record updates are grouped on this database (platform/group-commit.ts updateGroupingFor). */
  updateGrouping?: Pick<GroupCommitOptions, 'maxBatch' | 'maxInFlight'>;
  /** The deployment's other networks (NETWORKS after the first), each with its chain and settlement engine. */
  moreNetworks?: ReadonlyArray<{ chain: ChainService; engine: SettlementEngine }>;
  /** The Solana networks NETWORKS lists: exact on each, claimed and recorded on the default network's path. */
  solanaChains?: readonly SolanaChain[];
  /** Sanctions screening of every payment's payer and payTo before it is claimed (server/screening). */
  screening: Screening;
  /** The sellers' plan quotas (server/usage): over its quota of settlements, a seller's redeem is refused. */
  meter: Pick<UsageMeter, 'refusal'>;
}

/**
 * What the payments area keeps per network: its chain, its settlement path (over that network's engine:
 * lanes, nonces, batches) and its schemes bound to both. Records, endpoints and sellers are shared.
 */
export interface NetworkPayments {
  readonly chain: ChainService;
  readonly settlement: PaymentSettlement;
  readonly schemes: PaymentSchemes;
  readonly redemption: Redemption;
  /** Its auth-capture scheme: its escrow's operations (capture, void, refunds) go through this network. */
  readonly authCapture: AuthCaptureScheme;
  /** Its batch-settlement scheme: its channels' deposits, claims and refunds, and the sweep that claims them. */
  readonly batchSettlement: BatchSettlementScheme;
}

/**
 * The payments area, wired: each room is its own module, and this only builds them in order and hands
 * each the others it uses. Routes, jobs and other areas take the rooms they need (`payments.endpoints`,
 * `payments.records`, ...), never this whole.
 *
 * - acceptance: whether an org accepts payments, and where they go (acceptance.ts);
 * - endpoints: the seller's registered resources and prices (endpoints.ts), and registration's checks
 *   before storing one (endpoint-registration.ts);
 * - records: the payment records and their settlements, written and read (records.ts);
 * - settlement: the one path every scheme's payments take once verified: claim, hand-over to the
 *   settlement desk, record (payment-settlement.ts);
 * - schemes: one folder per x402 scheme over that path (schemes/<scheme>/evm/: exact, upto, auth-capture,
 *   batch-settlement), each with the same files (scheme.ts, verify.ts, settle.ts, facilitator.ts, chain.ts);
 *   adding a scheme is writing one and registering it below (docs/contributors/adding-a-scheme.md);
 * - redemption: our seller middleware's door, the seller-side checks before a scheme verifies (redemption.ts).
 * Holds (settle after the handler) are holds.ts, built on these by the context. Every entry point picks a
 * payment's scheme through `schemes`: a header by forHeader (redeem, holds), a facilitator request by
 * forRequest, a record by of.
 */
export class PaymentService {
  readonly acceptance: SellerAcceptance;
  readonly endpoints: Endpoints;
  /** Resources cataloged from settled payments' bazaar declarations (bazaar.ts). */
  readonly catalog: BazaarCatalog;
  readonly registration: EndpointRegistration;
  readonly records: PaymentRecords;
  /** The totals and volume chart above the console's payments list, by day. */
  readonly totals: PaymentDayTotals;
  readonly settlement: PaymentSettlement;
  readonly schemes: PaymentSchemes;
  readonly exact: ExactScheme;
  readonly upto: UptoScheme;
  readonly authCapture: AuthCaptureScheme;
  /** Refunds a seller gives (refunds.ts): of auth-capture payments from the escrow, of exact ones from the org's wallet. */
  readonly refunds: PaymentRefunds;
  /** The default network's batch-settlement scheme. */
  readonly batchSettlement: BatchSettlementScheme;
  /** What every network's batch-settlement shares: the voucher book of the channels sold through our middleware, their call records, claim webhooks. */
  readonly channels: BatchSettlementChannels;
  readonly redemption: Redemption;
  readonly signInWithX: SignInWithX;
  /**
   * Every network this deployment settles on, the default one first (its stack is the fields above),
   * each with every scheme.
   */
  readonly networks: readonly NetworkPayments[];
  private readonly primary: NetworkPayments;

  /** payment.received: each settled payment's event, handed to the webhook engine (webhook-outbox.ts). */
  readonly webhooks: PaymentReceivedOutbox;
  /** The payment area's outboxes, for the webhook engine's sweep: payment.received, refunds and voids, channel claims. */
  readonly outboxes: readonly Outbox[];

  readonly chain: ChainService | undefined;
  /** Sanctions screening (server/screening): claims screen through the settlement paths; the facilitator's /verify through this. */
  readonly screening: Screening;

  /** exact on each Solana network, and its facilitator API (the second chain family). */
  readonly solana: ReadonlyArray<{ scheme: SvmExactScheme; facilitator: SvmExactFacilitator }>;

  constructor(deps: PaymentServiceDeps) {
    const { conn, config, chain, engine, signer, secrets, logs, log, metrics, changes, deliveries, screening } = deps;
    this.chain = chain;
    this.screening = screening;
    this.acceptance = new SellerAcceptance(conn, chain, changes, logs, config.SELLER_CACHE_TTL_MS, () => this.schemes.sellerSettings(), () => Promise.all(this.networks.slice(1).map(async (n) => ({
      network: n.chain.network, chainId: n.chain.chainId, asset: n.chain.usdc.address, assetName: n.chain.usdc.name, assetVersion: n.chain.usdc.version,
      ...await n.schemes.sellerSettings(),
    }))), () => this.solana.map(({ scheme }) => ({ network: scheme.chain.network, caip2: scheme.chain.caip2, asset: scheme.chain.usdcMint, feePayer: scheme.chain.pickFeePayer().address })));
    this.endpoints = new Endpoints(conn, config.mode, changes, logs, config.SELLER_CACHE_TTL_MS);
    this.catalog = new BazaarCatalog(conn);
    this.registration = new EndpointRegistration(this.endpoints, this.acceptance, secrets, config.mode, outboundPolicy(config), (scheme) => this.schemes.refusal(scheme));
    this.records = new PaymentRecords(conn, signer, logs, log, metrics, deps.updateGrouping ?? {}, (payment) => this.webhooks.settled(payment));
    this.totals = new PaymentDayTotals(this.records.payments, conn, this.records.history);
    this.webhooks = new PaymentReceivedOutbox(conn, deliveries, this.records, this.endpoints, log);
    // Paid requests and settle times are counted per network.
    this.settlement = new PaymentSettlement(conn, config, engine, this.records, this.endpoints, logs, log, chain ? metrics.forNetwork(chain.caip2) : metrics, screening);
    this.schemes = new PaymentSchemes(this.settlement);
    this.exact = new ExactScheme(chain, config, this.settlement, this.endpoints, log, metrics);
    this.upto = new UptoScheme(chain, config, this.settlement, this.endpoints);
    this.schemes.register(this.exact);
    this.schemes.register(this.upto);
    const operations = new AuthCaptureOperations(conn, () => requireChain(chain), this.settlement, this.records, this.endpoints, deliveries, signer, logs, log);
    this.authCapture = new AuthCaptureScheme(chain, config, this.settlement, this.endpoints, operations);
    this.schemes.register(this.authCapture);
    // exact payments to an org's own wallet are refunded from it, under its owner's mandate.
    const exactRefunds = chain && deps.refundsFrom?.wallets.available
      ? new ExactRefunds(conn, () => chain, this.settlement, this.records, this.endpoints, deliveries, deps.refundsFrom.wallets, deps.refundsFrom.mandates, signer, logs, log)
      : undefined;
    if (exactRefunds) this.settlement.registerWork(EXACT_REFUND_WORK_KIND, exactRefunds.execute);
    this.refunds = new PaymentRefunds(this.records, (payment) => this.of(payment).authCapture, exactRefunds, screening);
    this.channels = new BatchSettlementChannels(conn, config, secrets, log, signer, this.endpoints, deliveries);
    if (chain) this.channels.load();
    this.batchSettlement = new BatchSettlementScheme(this.channels, chain, config, this.settlement, log, true);
    this.schemes.register(this.batchSettlement);
    this.redemption = new Redemption(chain, this.acceptance, this.endpoints, this.schemes, deps.meter);
    this.signInWithX = new SignInWithX(conn, chain, this.records);
    // The default network's stack, also without a chain (payments off): its schemes answer 503 then.
    this.primary = { chain: chain as ChainService, settlement: this.settlement, schemes: this.schemes, redemption: this.redemption, authCapture: this.authCapture, batchSettlement: this.batchSettlement };
    this.networks = [
      ...(chain ? [this.primary] : []),
      ...(deps.moreNetworks ?? []).map(({ chain: other, engine: otherEngine }) => {
        const otherLog = log.child({ network: other.caip2 });
        const settlement = new PaymentSettlement(conn, config, otherEngine, this.records, this.endpoints, logs, otherLog, metrics.forNetwork(other.caip2), screening);
        const schemes = new PaymentSchemes(settlement);
        schemes.register(new ExactScheme(other, config, settlement, this.endpoints, otherLog, metrics));
        schemes.register(new UptoScheme(other, config, settlement, this.endpoints));
        const authCapture = new AuthCaptureScheme(other, config, settlement, this.endpoints, new AuthCaptureOperations(conn, () => other, settlement, this.records, this.endpoints, deliveries, signer, logs, otherLog));
        schemes.register(authCapture);
        const batchSettlement = new BatchSettlementScheme(this.channels, other, config, settlement, otherLog, false);
        schemes.register(batchSettlement);
        return { chain: other, settlement, schemes, redemption: new Redemption(other, this.acceptance, this.endpoints, schemes, deps.meter), authCapture, batchSettlement };
      }),
    ];
    // The default network's sweep finishes every network's stale escrow operations, each on its own chain.
    operations.ownerOf = (payment) => this.of(payment).authCapture.operations;
    if (this.networks.length > 1) this.redemption.elsewhere = (paymentHeader) => this.forHeader(paymentHeader).redemption;
    this.solana = (deps.solanaChains ?? []).map((solanaChain) => {
      // Its own path (no engine: a Solana payment is sent by its scheme), counted under its own network.
      const solanaLog = log.child({ network: solanaChain.caip2 });
      const path = new PaymentSettlement(conn, config, undefined, this.records, this.endpoints, logs, solanaLog, metrics.forNetwork(solanaChain.caip2), screening);
      path.register(SVM_EXACT_SETTLER);
      const scheme = new SvmExactScheme(solanaChain, path, solanaLog, { settlementTimeoutMs: config.SETTLEMENT_TIMEOUT_MS });
      // A fee payer out of SOL fails every settlement on its network: each scrape reads their balances.
      const networkMetrics = metrics.forNetwork(solanaChain.caip2);
      metrics.onCollect(() => Promise.all(solanaChain.feePayers.map(async (feePayer) => {
        const { value } = await solanaChain.rpc.getBalance(feePayer.address).send({ abortSignal: AbortSignal.timeout(2_000) });
        networkMetrics.feePayerBalance.set({ fee_payer: feePayer.address }, Number(value) / 1e9);
      })).then(() => {}));
      return { scheme, facilitator: new SvmExactFacilitator(scheme, this.endpoints) };
    });
    if (this.solana.length) this.redemption.solana = (orgId, input) => this.redeemOnSolana(orgId, input);
    this.webhookTargets = endpointWebhookTargets(this.endpoints.endpoints, secrets);
    this.outboxes = [this.webhooks, operations.webhooks, ...(exactRefunds ? [exactRefunds.webhooks] : []), this.channels.claimWebhooks];
  }

  /**
   * Our middleware's redeem of a header naming a Solana network (v2 `accepted.network`): that network's
   * exact settles it, or it is refused as a network this backend does not settle on. Undefined: the
   * header names no Solana network.
   */
  private redeemOnSolana(orgId: string, input: RedeemInput): Promise<RedeemOutcome> | undefined {
    const decoded = decodeBase64Json(input.paymentHeader);
    const network = decoded.ok ? (decoded.value as { accepted?: { network?: unknown } } | null)?.accepted?.network : undefined;
    if (!isSolanaNetwork(network)) return undefined;
    const parsed = ExactSvmPaymentPayloadV2Schema.safeParse(decoded.ok ? decoded.value : undefined);
    if (!parsed.success) return Promise.resolve({ ok: false, error: 'invalid_payload', message: `the Solana payment is not an exact v2 payload: ${parsed.error.issues[0]?.path.join('.')} ${parsed.error.issues[0]?.message}` });
    const served = this.solana.find((s) => s.scheme.chain.caip2 === network);
    if (!served) return Promise.resolve({ ok: false, error: 'invalid_exact_svm_network_mismatch', message: `this backend does not settle on ${String(network)}` });
    return served.facilitator.redeem(orgId, input, parsed.data, this.redemption);
  }

  /** The network's payments, by v1 name or CAIP-2 id; undefined: this deployment does not settle there. */
  network(network: string): NetworkPayments | undefined {
    const chainId = findNetwork(network)?.chainId;
    return this.networks.find((n) => n.chain.chainId === chainId);
  }

  /** The payments of a record's network (the default network's for a network no longer configured: its schemes refuse or reconcile it). */
  of(payment: Pick<PaymentDoc, 'network'>): NetworkPayments {
    return this.network(payment.network) ?? this.primary;
  }

  /**
   * The payments of the network a buyer's payment header names (v1: `network`; v2: `accepted.network`),
   * decoded only when this deployment has several; the default network's otherwise, whose schemes refuse
   * a network they do not settle on in their own terms.
   */
  forHeader(paymentHeader: string): NetworkPayments {
    if (this.networks.length < 2) return this.primary;
    const decoded = decodeBase64Json(paymentHeader);
    const payload = decoded.ok && decoded.value && typeof decoded.value === 'object' ? decoded.value as { network?: unknown; accepted?: { network?: unknown } } : undefined;
    const named = payload?.accepted?.network ?? payload?.network;
    return (typeof named === 'string' && this.network(named)) || this.primary;
  }

  /** Where a payment endpoint's deliveries go (its URL and secret, read at each attempt); undefined: not a payment endpoint. */
  readonly webhookTargets: DeliveryTargets;
}
