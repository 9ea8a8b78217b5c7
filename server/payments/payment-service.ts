import { outboundPolicy } from '../platform/ssrf.js';
import type { Connection } from 'mongoose';
import { SignInWithX } from './sign-in-with-x.js';
import type { ChainService } from '../chain/chain-service.js';
import type { ActivityLog } from '../logs/activity-log.js';
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
import { PaymentSettlement } from './settlement-path.js';
import { Redemption } from './redemption.js';
import { PaymentSchemes } from './schemes/scheme.js';
import { ExactScheme } from './schemes/exact/evm/scheme.js';
import { UptoScheme } from './schemes/upto/evm/scheme.js';
import { AuthCaptureScheme } from './schemes/auth-capture/evm/scheme.js';
import { AuthCaptureOperations } from './schemes/auth-capture/evm/operations.js';
import { requireChain } from './chain-required.js';
import { PaymentRefunds } from './refunds.js';
import { BatchSettlementScheme } from './schemes/batch-settlement/evm/scheme.js';

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
 *   settlement desk, record (settlement-path.ts);
 * - schemes: one module per x402 scheme over that path (schemes/exact, schemes/upto, schemes/auth-capture); adding a scheme is
 *   writing one and registering it below;
 * - redemption: our seller middleware's door, the seller-side checks before a scheme verifies (redemption.ts).
 * Holds (settle after the handler) are holds.ts, built on these by the context.
 */
export class PaymentService {
  readonly acceptance: SellerAcceptance;
  readonly endpoints: Endpoints;
  /** Resources cataloged from settled payments' bazaar declarations (bazaar.ts). */
  readonly catalog: BazaarCatalog;
  readonly registration: EndpointRegistration;
  readonly records: PaymentRecords;
  readonly settlement: PaymentSettlement;
  readonly schemes: PaymentSchemes;
  readonly exact: ExactScheme;
  readonly upto: UptoScheme;
  readonly authCapture: AuthCaptureScheme;
  /** Refunds a seller gives (refunds.ts): of auth-capture payments from the escrow, of exact ones from the org's wallet. */
  readonly refunds: PaymentRefunds;
  readonly batchSettlement: BatchSettlementScheme;
  readonly redemption: Redemption;
  readonly signInWithX: SignInWithX;

  constructor(
    conn: Connection,
    config: Config,
    readonly chain: ChainService | undefined,
    /**
     * The settlement engine: the desk this process hands claimed payments to, and, in a process holding
     * relayer lanes, the schemes' executors run there for payments accepted anywhere; undefined without a chain.
     */
    engine: SettlementEngine | undefined,
    signer: () => ReceiptSigner,
    secrets: SecretBox,
    logs: ActivityLog,
    log: Logger,
    metrics: Metrics,
    /** Seller settings and endpoints changed in any process reach this one's caches within a poll. */
    changes: ChangeFeed,
    /** How record updates are grouped on this database (platform/group-commit.ts updateGroupingFor). */
    updateGrouping: Pick<GroupCommitOptions, 'maxBatch' | 'maxInFlight'> = {},
  ) {
    this.acceptance = new SellerAcceptance(conn, chain, changes, logs, config.SELLER_CACHE_TTL_MS, () => this.schemes.sellerSettings());
    this.endpoints = new Endpoints(conn, config.mode, changes, logs, config.SELLER_CACHE_TTL_MS);
    this.catalog = new BazaarCatalog(conn);
    this.registration = new EndpointRegistration(this.endpoints, this.acceptance, secrets, config.mode, outboundPolicy(config));
    this.records = new PaymentRecords(conn, signer, logs, log, metrics, updateGrouping);
    this.settlement = new PaymentSettlement(conn, config, engine, this.records, this.endpoints, logs, log, metrics);
    this.schemes = new PaymentSchemes(this.settlement);
    // The first registered is the default scheme (a payment that names no other is read as it).
    this.exact = new ExactScheme(chain, config, this.settlement, this.endpoints, log, metrics);
    this.upto = new UptoScheme(chain, config, this.settlement, this.endpoints);
    this.schemes.register(this.exact);
    this.schemes.register(this.upto);
    const operations = new AuthCaptureOperations(conn, () => requireChain(chain), this.settlement, this.records, this.endpoints, signer, logs, log);
    this.authCapture = new AuthCaptureScheme(chain, config, this.settlement, this.endpoints, operations);
    this.schemes.register(this.authCapture);
    this.refunds = new PaymentRefunds(this.records, this.authCapture);
    this.batchSettlement = new BatchSettlementScheme(conn, chain, config, secrets, this.settlement, log, signer);
    this.schemes.register(this.batchSettlement);
    this.redemption = new Redemption(chain, this.acceptance, this.endpoints, this.exact);
    this.signInWithX = new SignInWithX(conn, chain, this.records);
  }
}
