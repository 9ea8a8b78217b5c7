import type { Db } from 'mongodb';
import mongoose, { type Connection } from 'mongoose';
import { configFor, type Config } from './platform/config.js';
import { ensureIndexes } from './platform/indexes.js';
import { SecretBox, type MasterKeyring } from './platform/secret-box.js';
import { ApiKeyService } from './platform/auth/api-keys.js';
import { UsageTracker } from './platform/usage.js';
import { RateLimiter } from './platform/rate-limit.js';
import { ChangeFeed } from './platform/change-feed.js';
import { ActivityLog } from './platform/activity-log.js';
import { ServiceEvents } from './platform/events.js';
import { AccountService } from './accounts/account-service.js';
import { IdentityService } from './identities/identity-service.js';
import type { IdentityDoc } from './identities/identity-model.js';
import { createJobQueue, type JobQueue } from './platform/jobs.js';
import { MailService, type MessagePage } from './mail/mail-service.js';
import { PageCache } from './mail/page-cache.js';
import { MailEventLog } from './mail/mail-events.js';
import { VaultService } from './vault/vault-service.js';
import type { Address } from 'viem';
import { ChainConfigError, createChainServices, type ChainService } from './chain/chain-service.js';
import { createScreening, loadScreeningList } from './screening/index.js';
import { OrgLimits } from './platform/limits/org-limits.js';
import { WindowCounts } from './platform/limits/window-counts.js';
import { createUsageMeter, type UsageMeter } from './usage/index.js';
import { describeContracts, type RequiredContract } from './chain/contract-code.js';
import { PaymentService } from './payments/payment-service.js';
import { SolanaChain } from './chain/solana/solana-chain.js';
import { SolanaWallets } from './wallet/solana-wallets.js';
import { SettlementEngine } from './settlement/engine.js';
import { HoldService } from './payments/holds.js';
import { WebhookService } from './webhooks/webhook-service.js';
import { MailWebhooks } from './mail/webhooks.js';
import { MailDomains } from './mail/domains/domain-service.js';
import { MailSendLimits } from './mail/send-limits.js';
import { mailResolver } from './mail/mail-auth.js';
import { loadServiceKey, type ServiceKey } from './did/service-key.js';
import { DidService } from './did/did-service.js';
import { didDetail } from './did/identity-detail.js';
import { CalendarService } from './calendar/calendar-service.js';
import { WalletService } from './wallet/wallet-service.js';
import { walletDetail } from './wallet/identity-detail.js';
import { MandateService } from './buyer/mandate-service.js';
import { PayService } from './buyer/pay-service.js';
import { ChatService } from './chat/chat-service.js';
import { adminCheck } from './accounts/admins.js';
import { createLogger, endLogger, type Logger } from './platform/logger.js';
import { Metrics } from './platform/metrics.js';
import { ShutdownSteps } from './platform/shutdown.js';
import { ProcessRegistry } from './platform/process-registry.js';
import { updateGroupingFor } from './platform/group-commit.js';
import { DatabaseConnectError, retryWhileDatabaseAway } from './platform/database-outage.js';
import { StartSteps } from './platform/start-steps.js';

/** How long a starting process waits for a database that is away before it gives up. */
const START_DATABASE_WAIT_MS = 60_000;

/**
 * Everything a route or job needs, built once at the entry point and passed down. No module reaches for
 * a global: a test builds a whole server against its own database by calling `createContext`.
 */
export interface AppContext {
  config: Config;
  /** Structured JSON logs (pino); every line written inside a request carries its request id. */
  log: Logger;
  /** This process's Prometheus metrics (served at /metrics to the operator only). */
  metrics: Metrics;
  /** How long each step of this process's start took (logged when it runs). */
  startSteps: StartSteps;
  db: Connection;
  secrets: SecretBox;
  keys: ApiKeyService;
  /** Cache invalidations shared by every process (revocations, scope and role changes), polled. */
  changes: ChangeFeed;
  rateLimiter: RateLimiter;
  logs: ActivityLog;
  accounts: AccountService;
  /** A tap on what the service does (payments, mail, webhooks, chat), one line each; agentgate dev prints it. */
  events: ServiceEvents;
  /** Whether an org is an admin account (ADMIN_ORG_IDS or the role the operator granted). */
  isAdmin: (orgId: string) => Promise<boolean>;
  identities: IdentityService;
  usage: UsageTracker;
  /** Background jobs (Agenda on the same database); workers are started by startServer. */
  jobs: JobQueue;
  mail: MailService;
  /** The orgs' own mail domains (DNS records, checks, DKIM keys) and the addresses identities take on them. */
  domains: MailDomains;
  vault: VaultService;
  /** The settlement chain; undefined when CHAIN_RPC_URL is not configured (payment routes answer 503). */
  chain: ChainService | undefined;
  /** Who accepts and who sends settlements in this deployment, and this process's part (started by serve and worker): the default network's. */
  settlement: SettlementEngine | undefined;
  /** Every network's settlement engine, the default one first. */
  settlements: SettlementEngine[];
  payments: PaymentService;
  /** Payments held while a seller's handler runs (capture settles, release charges nothing). */
  holds: HoldService;
  /** The webhook engine: deliveries of every area's events (Agenda jobs, attempt claims, the delivery log). */
  webhooks: WebhookService;
  /** Identities' webhooks for their mail events, delivered by `webhooks`. */
  mailWebhooks: MailWebhooks;
  /** The service's did:web Ed25519 key (/.well-known/did.json); signs payment receipts. */
  serviceKey: ServiceKey;
  /** did:web identities: per-identity Ed25519 keys, DID documents, sign and verify. */
  did: DidService;
  /** Events and the public iCal feed of each identity. */
  calendar: CalendarService;
  /** Each identity's server-held smart-account USDC wallet. */
  wallets: WalletService;
  /** Spend policies of identities (caps reserved atomically). */
  mandates: MandateService;
  /** payments_pay and the identity's outgoing payment records. */
  buyer: PayService;
  /** The identity's team-chat workspace (install, channels, send, stored inbound messages). */
  chat: ChatService;
  /**
   * Areas that add fields to an identity's detail (wallet address, DID, ...) register here, so whoami and
   * the platform view show them without the identities module knowing those areas.
   */
  identityDetail: Array<(identity: IdentityDoc) => Promise<Record<string, unknown>> | Record<string, unknown>>;
  /**
   * The deployment's live processes: this one joins when it starts background work, and what it holds
   * for a while (job locks, webhook attempt claims) is taken over by others as soon as it is gone.
   */
  processes: ProcessRegistry;
  /** Request limits: the counts shared by the deployment's processes, and the orgs' own limits. */
  limits: { counts: WindowCounts; orgLimits: OrgLimits };
  /** Usage per org and month (settlements, facilitator calls, mail, storage) and the plans' quotas. */
  meter: UsageMeter;
  /** What close() stops, named and timed, last added first. */
  shutdown: ShutdownSteps;
  /** Set when a graceful stop begins: /ready answers 503 so a balancer stops sending requests here. */
  stopping: boolean;
  /** Stops everything; `stoppingSince`: when the process began to stop, for its 'stopped' line. */
  close(options?: { stoppingSince?: number }): Promise<void>;
}

export function keyringFrom(config: Config): MasterKeyring {
  const previous = (config.MASTER_KEYS_PREVIOUS ?? '').split(',').filter(Boolean).map((entry) => {
    const [version, encoded] = [entry.slice(0, entry.indexOf(':')), entry.slice(entry.indexOf(':') + 1)];
    const key = /^[0-9a-fA-F]{64}$/.test(encoded) ? Buffer.from(encoded, 'hex') : Buffer.from(encoded, 'base64');
    return { version: Number(version), key };
  });
  return { current: { version: config.MASTER_KEY_VERSION, key: config.MASTER_KEY }, previous };
}

/**
 * Message-list pages: at most 2,000 pages and 32 MiB per process; a page over 1 MiB (long bodies) is
 * always read from the database. The age bound only matters if an inbox's change token failed to bump.
 */
const MESSAGE_PAGE_CACHE = { maxPages: 2000, maxBytes: 32 << 20, maxPageBytes: 1 << 20, maxAgeMs: 60_000 };

/** `settles`: the context of a serve or worker, which starts its settlement once the context is made. */
export async function createContext(config: Config, options: { log?: Logger; settles?: boolean; startSteps?: StartSteps } = {}): Promise<AppContext> {
  const startSteps = options.startSteps ?? new StartSteps();
  startSteps.mark('load');
  const log = options.log ?? createLogger({ level: config.LOG_LEVEL });
  const metrics = new Metrics();
  // The chain first: a start refused for its configuration (an RPC URL of another chain, a token or
  // Multicall3 without code) has opened nothing to close.
  const chains = await createChainServices(config, {
    onFailover: ({ url, method, reason }) => log.warn({ rpcUrl: url, method, reason }, 'chain RPC URL failed a request (it goes on to the next URL, if any)'),
  });
  for (const check of chains.flatMap((c) => c.rpcCheck.map((rpc) => ({ ...rpc, network: c.caip2 })))) {
    if ('error' in check) log.warn({ network: check.network, rpcUrl: check.url, reason: check.error }, 'chain RPC URL did not answer at start-up');
  }
  // Each network sees the global settings with its own (<NAME>_SETTLEMENT_STUCK_BLOCKS, ...; config.ts).
  const configOf = (c: ChainService) => configFor(config, config.networks.find((n) => n.network === c.network));
  await Promise.all(chains.map((c) => checkEssentialContracts(c, configOf(c))));
  startSteps.mark('chains');
  const [chain, ...moreChains] = chains as [ChainService | undefined, ...ChainService[]];
  const screeningList = await loadScreeningList(config, log);
  // Command monitoring feeds agentgate_db_commands_total: on the embedded engine every command costs
  // milliseconds of CPU, so what each request path sends is something an operator must see.
  // A bounded pool: on the embedded engine every command costs CPU and memory in one FerretDB process, and
  // once a database outage or a backlog had every process open its default 100 connections, seven
  // processes' worth of concurrent collection reads held more than its memory limit, and it spent itself
  // collecting garbage for minutes. Requests beyond the pool wait in the driver instead.
  // Indexes and collections are made by ensureIndexes below, with far fewer commands than mongoose's own.
  const db = mongoose.createConnection(config.MONGODB_URI, { dbName: config.MONGODB_DB, autoIndex: false, autoCreate: false, serverSelectionTimeoutMS: 10_000, monitorCommands: true, maxPoolSize: config.MONGODB_MAX_POOL_SIZE });
  try {
    await db.asPromise();
  } catch (err) {
    // Nothing answers at MONGODB_URI at all (a wrong URI, no server): the start fails, and is not made again
    // in this process as one the database interrupted is (startServer).
    await db.close().catch(() => {});
    screeningList?.stop();
    if (!options.log) await endLogger(log);
    throw new DatabaseConnectError(err as Error);
  }
  const shutdown = new ShutdownSteps();
  // Added first, so run last: what the areas' steps may still write, then the queue and the connection.
  shutdown.add('database connection', () => db.close());
  shutdown.add('screening list', async () => screeningList?.stop());
  try {
    // A process started while the database is away (a restart during its outage) waits for it instead of
    // failing: the embedded engine accepts the connection while its PostgreSQL is down and fails the first
    // query, and a failed start costs an orchestrator's relaunch and a new boot. Given up after a minute.
    // Asked every 250 ms at most (a query a process that serves nothing yet can afford): the doubling
    // delays of other retries made a start find the database up to twice the outage late. (The engine
    // answers a read of a collection it has not made yet without its PostgreSQL: a first start's outage
    // shows at its first write instead, and the start is made again: startServer.)
    await retryWhileDatabaseAway(() => db.collection('processes').findOne({}, { projection: { _id: 1 } }), log, 'starting', Date.now() + START_DATABASE_WAIT_MS, 250);
    startSteps.mark('database');
    db.getClient().on('commandStarted', (event) => {
      const target = event.commandName === 'getMore' ? event.command.collection : event.command[event.commandName];
      metrics.dbCommands.inc({ command: event.commandName, collection: typeof target === 'string' ? target : '' });
    });
    const events = new ServiceEvents();
    const logs = new ActivityLog(db, log.child({ area: 'activity-log' }), events);
    const usage = new UsageTracker(db);
    const changes = new ChangeFeed(db, {
      pollMs: config.CHANGE_FEED_POLL_MS,
      onError: (err) => log.warn({ err: err.message }, 'change feed poll failed; cached keys fall back to AUTH_CACHE_TTL_MS'),
    });
    const keys = new ApiKeyService(db, usage, changes, config.AUTH_CACHE_TTL_MS);
    const secrets = new SecretBox(keyringFrom(config));
    shutdown.add('job queue', () => jobs.stop());
    shutdown.add('usage and activity log writes', async () => { await Promise.all([usage.flush(), logs.flush()]); });
    // Who is live: what a process holds for a while (a job's lock, a webhook attempt's claim) names it.
    const processes = new ProcessRegistry(db);
    // Request limits per key, org and anonymous client, counted across the deployment (server/platform/limits).
    const limits = { counts: new WindowCounts(db, processes, config.RATE_LIMIT_WINDOW_MS, { log: log.child({ area: 'limits' }) }), orgLimits: new OrgLimits(db, config.AUTH_CACHE_TTL_MS) };
    shutdown.add('request limit counts', () => limits.counts.stop());
    const accounts = new AccountService(db, changes);
    // Usage per org and month, checked against the plan quotas the operator sets (server/usage).
    const meter = createUsageMeter({ conn: db, config, processId: processes.id, planOf: async (orgId) => (await accounts.getOrg(orgId))?.plan, logs, metrics });
    shutdown.add('usage counts', () => meter.flush());
    const jobs = createJobQueue(db, { processEveryMs: config.JOBS_PROCESS_EVERY_MS, registry: processes, log: log.child({ area: 'jobs' }), retainGivenUpMs: config.JOB_RETENTION_DAYS * 86_400_000 });
    const identities = new IdentityService(db, config, keys, logs, usage, changes);
    const serviceKey = await loadServiceKey(db, config, secrets, log.child({ area: 'did' }));
    // The receipt signer is the service DID key, resolved when a receipt is signed.
    const settlement = chain && new SettlementEngine(db, config, chain, log, metrics, processes.id);
    // Each other network its own engine (lanes, nonces, block clock, batches, mailboxes): a slow or dead
    // RPC of one network holds up only its own settlements.
    const moreNetworks = moreChains.map((other) => ({ chain: other, engine: new SettlementEngine(db, configOf(other), other, log, metrics, processes.id, false) }));
    const settlements = [...(settlement ? [settlement] : []), ...moreNetworks.map((n) => n.engine)];
    if (options.settles) {
      // The block clocks listen from now, so the phase a sending process waits for before it sends (about a
      // block) is learned while the rest of the start (services, indexes, the change feed) runs.
      for (const engine of settlements) engine.listenForBlocks();
      shutdown.add('block clocks', async () => { for (const engine of settlements) engine.stopListeningForBlocks(); });
    }
    // The wallets pay on every network, each network's deployments and approvals sent by its own relayers.
    const wallets = new WalletService(db, [
      ...(chain ? [{ chain, relayer: settlement?.settler, factory: config.WALLET_FACTORY_ADDRESS }] : []),
      ...moreNetworks.map((n) => ({ chain: n.chain, relayer: n.engine.settler, factory: configOf(n.chain).WALLET_FACTORY_ADDRESS })),
    ], secrets, logs);
    const mandates = new MandateService(db, logs);
    // Solana: each network's RPC and fee payers, and every identity's Solana wallet beside its EVM one.
    const solanaChains = await Promise.all(config.solanaNetworks.map((settings) => SolanaChain.open(settings)));
    const solanaWallets = new SolanaWallets(db, solanaChains, secrets, logs);
    // Sanctions screening of every payment's parties and every paying wallet (server/screening).
    const screening = createScreening({ conn: db, config, list: screeningList, chains, configOf, logs, log, metrics });
    if (solanaWallets.available) wallets.solana = solanaWallets;
    // The webhook engine knows no area: each area hands it its events (payment.received, refunds, voids,
    // channel claims, mail events), says where its endpoints' deliveries go, and keeps its own outbox,
    // which the engine's sweep drains. Asked only once the areas below exist (at a delivery, a sweep).
    const webhooks: WebhookService = new WebhookService(db, config, jobs, {
      targets: async (endpointId) => (await mailWebhooks.target(endpointId)) ?? payments.webhookTargets(endpointId),
      outboxes: () => [...payments.outboxes, { sweep: (olderThanMs) => mailEvents.redispatch(olderThanMs) }, { sweep: (olderThanMs) => domains.redispatch(olderThanMs) }],
    }, logs, processes, { log: log.child({ area: 'webhooks' }), metrics, events });
    const payments: PaymentService = new PaymentService({
      conn: db, config, chain, engine: settlement, signer: () => ctx.serviceKey, secrets, logs, log: log.child({ area: 'payments' }), metrics, changes,
      deliveries: webhooks, refundsFrom: { wallets, mandates }, updateGrouping: await updateGroupingFor(db.db as unknown as Db), moreNetworks,
      solanaChains, screening, meter,
    });
    shutdown.add('payment record writes', () => payments.records.recordsWritten());
    // Each scheme's contracts: a scheme whose contracts are missing is refused on this network, the others served.
    await Promise.all(payments.networks.map((n) => n.schemes.checkContracts(n.chain, { log, metrics })));
    startSteps.mark('services');
    const did = new DidService(db, config, secrets, identities, () => serviceKey, logs);
    const isAdmin = adminCheck(config, accounts);
    const mailWebhooks = new MailWebhooks(db, config, secrets, webhooks, logs);
    const mailEvents = new MailEventLog(db, changes, log.child({ area: 'mail-events' }), (event) => mailWebhooks.dispatch(event));
    const domains = new MailDomains({ conn: db, config, secrets, logs, log: log.child({ area: 'mail-domains' }), dns: mailResolver(config), onEvent: (event) => mailWebhooks.dispatchDomainEvent(event) });
    // Sends per identity and org per MAIL_SEND_LIMIT_WINDOW_MS, counted across processes as request limits are.
    const sendLimits = new MailSendLimits(new WindowCounts(db, processes, config.MAIL_SEND_LIMIT_WINDOW_MS, { log: log.child({ area: 'mail-send-limits' }) }), { perIdentity: config.MAIL_SEND_LIMIT_PER_IDENTITY, perOrg: config.MAIL_SEND_LIMIT_PER_ORG });
    shutdown.add('mail send limit counts', () => sendLimits.stop());
    const mail = new MailService(db, config, identities, logs, jobs, new PageCache<MessagePage>(MESSAGE_PAGE_CACHE), log.child({ area: 'mail' }), mailEvents, domains, sendLimits, meter, events);
    const ctx: AppContext = {
      config,
      log,
      metrics,
      db,
      secrets,
      keys,
      changes,
      rateLimiter: new RateLimiter(db),
      logs,
      accounts,
      isAdmin,
      events,
      identities,
      jobs,
      processes, limits, meter,
      mail,
      domains,
      vault: new VaultService(db, secrets, logs, usage, meter),
      chain,
      settlement,
      settlements,
      serviceKey,
      did,
      calendar: new CalendarService(db, config, secrets, identities, logs),
      payments,
      holds: new HoldService(db, config, payments, logs, log.child({ area: 'payments' }), metrics),
      webhooks,
      mailWebhooks,
      wallets,
      mandates,
      buyer: new PayService(db, config, wallets, mandates, logs, screening, solanaWallets),
      chat: new ChatService(db, config, secrets, identities, logs, isAdmin),
      identityDetail: [walletDetail(wallets), didDetail(did)],
      usage,
      shutdown,
      startSteps,
      stopping: false,
      async close(how = {}) {
        const { slowest } = await shutdown.run(log);
        // A serve or worker says it has stopped, and how long it took since it began to (SIGTERM).
        if (how.stoppingSince !== undefined) log.info({ durationMs: Date.now() - how.stoppingSince, slowest }, 'stopped');
        // The logger this context made itself, last (a logger passed in is the caller's).
        if (!options.log) await endLogger(log);
      },
    };
    // Unique indexes carry correctness (inbox addresses, key hashes): make sure they exist before serving.
    await ensureIndexes(db);
    // A model compiled later (by a module loaded at its first use) gets its indexes as mongoose makes them.
    db.set('autoIndex', true);
    db.set('autoCreate', true);
    startSteps.mark('indexes');
    await ctx.mail.assignPositionsOnce();
    // In the background: a large mailbox takes a while, and new mail is indexed as it arrives meanwhile.
    void ctx.mail.indexUnsearched().catch((err) => log.warn({ err }, 'search backfill stopped; it runs again at the next start'));
    // Before anything is cached; stopped before the connection closes.
    await changes.start();
    shutdown.add('change feed', () => changes.stop());
    startSteps.mark('change feed');
    return ctx;
  } catch (err) {
    // A start that failed half-way hands back what it took (the connection, the block clocks): the caller
    // may start again in this process (startServer, when the database went away meanwhile).
    await shutdown.run(log);
    if (!options.log) await endLogger(log);
    throw err;
  }
}

/**
 * The contracts every settlement relies on, asked of the chain once at start: without the token or
 * Multicall3 every settlement would "succeed" moving nothing (a call to an address without code does),
 * so the process refuses to start. (A scheme whose own contracts are missing is only refused on this
 * network: PaymentSchemes.checkContracts.)
 */
async function checkEssentialContracts(chain: ChainService, config: Config): Promise<void> {
  const essential: RequiredContract[] = [
    { name: 'the token (USDC_ADDRESS)', address: chain.usdc.address },
    { name: 'Multicall3 (MULTICALL3_ADDRESS)', address: config.MULTICALL3_ADDRESS as Address },
  ];
  await chain.code.check(essential);
  const missing = chain.code.missing(essential);
  if (missing.length) throw new ChainConfigError(`configuration error: ${describeContracts(missing)} ${missing.length === 1 ? 'has' : 'have'} no code on ${chain.caip2}; settlements would move nothing`);
}
