import perfHooks from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The Prometheus metrics of one process (prom-client). Each context owns its registry, so a test that
 * builds several servers in one process reads each one's own numbers. Areas record through the typed
 * fields below; gauges whose value lives elsewhere (queue depth, gas balances) are read at scrape time
 * through `onCollect`.
 */
/**
 * The metrics one network's settlement records: every value carries that network's `network` label
 * (Metrics.forNetwork). A relayer key serving several networks has a lane, a balance and transactions on
 * each, so a value without its network would be overwritten by another network's.
 */
const PER_NETWORK: ReadonlySet<PropertyKey> = new Set([
  'paidRequests', 'settleSeconds', 'batchSize', 'settlementTransactions', 'inFlight', 'gasBalance', 'feePayerBalance', 'leasesHeld', 'relayerPool',
  'settlementQueued', 'settlementOldestQueuedSeconds', 'settlementAwaiting', 'settlementRouted', 'settlementInboxItems', 'settlementRole',
]);
const RECORDING: ReadonlySet<PropertyKey> = new Set(['set', 'inc', 'dec', 'observe']);

/** A metric whose set/inc/dec/observe add `network` to the labels they are given (or give it alone). */
function labelledWith<M extends object>(metric: M, network: string): M {
  return new Proxy(metric, {
    get(target, prop) {
      const value = Reflect.get(target, prop) as unknown;
      if (typeof value !== 'function') return value;
      if (!RECORDING.has(prop)) return value.bind(target);
      return (labels?: unknown, amount?: unknown) => (labels !== null && typeof labels === 'object'
        ? value.call(target, { ...labels, network }, amount)
        : value.call(target, { network }, labels));
    },
  });
}

export class Metrics {
  readonly registry = new Registry();

  /** Paid requests by how they ended (settled, refused reason, pending, unavailable) and by door (redeem | facilitator). */
  readonly paidRequests = new Counter({
    name: 'agentgate_paid_requests_total', help: 'Payments presented for settlement, by outcome and door',
    labelNames: ['outcome', 'door', 'network'] as const, registers: [this.registry],
  });
  /** From the claim to the answer, settled or not. */
  readonly settleSeconds = new Histogram({
    name: 'agentgate_settle_duration_seconds', help: 'Time from claiming a payment to its settlement answer',
    labelNames: ['outcome', 'network'] as const, buckets: [0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 20, 30, 60], registers: [this.registry],
  });
  readonly batchSize = new Histogram({
    name: 'agentgate_settlement_batch_size', help: 'Authorizations per settlement transaction',
    labelNames: ['network'] as const, buckets: [1, 2, 4, 8, 16, 32, 50, 100], registers: [this.registry],
  });
  /** sent, refused, replaced, fee_bumped, rebroadcast, mined, reverted, dropped. */
  readonly settlementTransactions = new Counter({
    name: 'agentgate_settlement_transactions_total', help: 'Settlement transaction events, by relayer',
    labelNames: ['event', 'relayer', 'network'] as const, registers: [this.registry],
  });
  readonly inFlight = new Gauge({
    name: 'agentgate_relayer_in_flight_transactions', help: 'Settlement transactions sent and not yet mined, by relayer',
    labelNames: ['relayer', 'network'] as const, registers: [this.registry],
  });
  /** Requests refused by a request limit (server/platform/limits), by which limit: key, org, anonymous. */
  readonly rateLimited = new Counter({
    name: 'agentgate_rate_limited_total', help: 'Requests answered 429 by a request limit, by the limit (key, org, anonymous)',
    labelNames: ['limit'] as const, registers: [this.registry],
  });
  readonly quotaRefusals = new Counter({
    name: 'agentgate_quota_refusals_total', help: 'Requests refused because the org reached a monthly quota of its plan, by metric',
    labelNames: ['metric'] as const, registers: [this.registry],
  });
  /** Payments refused by sanctions screening (server/screening): why, which source, whose address. */
  readonly screeningRefusals = new Counter({
    name: 'agentgate_screening_refusals_total', help: 'Payments refused by sanctions screening, by reason, the source that refused, the party and the network',
    labelNames: ['reason', 'source', 'role', 'network'] as const, registers: [this.registry],
  });
  readonly screeningSourceErrors = new Counter({
    name: 'agentgate_screening_source_errors_total', help: 'Screenings a source could not answer (SCREENING_ON_ERROR decides the payment)',
    labelNames: ['source', 'network'] as const, registers: [this.registry],
  });
  /**
   * The operator's screening list file as this process last loaded it: how many addresses, and the file's
   * modification time. A cron that stopped refreshing the list, or a new file this process failed to read,
   * shows here (each process reloads it on its own).
   */
  readonly screeningListAddresses = new Gauge({
    name: 'agentgate_screening_list_addresses', help: 'Addresses in the screening list file (SCREENING_LIST_FILE) as this process last loaded it', registers: [this.registry],
  });
  readonly screeningListModified = new Gauge({
    name: 'agentgate_screening_list_modified_timestamp_seconds', help: 'Modification time of the screening list file as this process last loaded it (Unix seconds)', registers: [this.registry],
  });
  readonly gasBalance = new Gauge({
    name: 'agentgate_relayer_gas_balance_eth', help: 'Native balance of each relayer account this process holds a lease on',
    labelNames: ['relayer', 'network'] as const, registers: [this.registry],
  });
  readonly feePayerBalance = new Gauge({
    name: 'agentgate_solana_fee_payer_balance_sol', help: 'SOL balance of each Solana fee payer (it pays every settlement fee on its network), read at each scrape',
    labelNames: ['fee_payer', 'network'] as const, registers: [this.registry],
  });
  readonly leasesHeld = new Gauge({
    name: 'agentgate_relayer_leases_held', help: 'Relayer accounts this process holds a lease on', labelNames: ['network'] as const, registers: [this.registry],
  });
  readonly relayerPool = new Gauge({
    name: 'agentgate_relayer_pool_size', help: 'Relayer accounts configured for the deployment', labelNames: ['network'] as const, registers: [this.registry],
  });
  /** Settlements in this process's queue for its next transaction, and the oldest one's wait. */
  readonly settlementQueued = new Gauge({
    name: 'agentgate_settlement_queued', help: 'Settlements waiting in this process for their transaction', labelNames: ['network'] as const, registers: [this.registry],
  });
  readonly settlementOldestQueuedSeconds = new Gauge({
    name: 'agentgate_settlement_oldest_queued_seconds', help: 'How long the oldest settlement waiting in this process has waited', labelNames: ['network'] as const, registers: [this.registry],
  });
  /** Settlements this process handed to another process's lane, outcome not back yet. */
  readonly settlementAwaiting = new Gauge({
    name: 'agentgate_settlement_awaiting_outcome', help: 'Settlements handed to other processes\' relayer lanes whose outcome has not come back', labelNames: ['network'] as const, registers: [this.registry],
  });
  /** local: a lane of this process took it; remote: another process's lane, through its inbox. */
  readonly settlementRouted = new Counter({
    name: 'agentgate_settlement_routed_total', help: 'Settlement work handed to a relayer lane, by where the lane is',
    labelNames: ['route', 'network'] as const, registers: [this.registry],
  });
  readonly settlementInboxItems = new Counter({
    name: 'agentgate_settlement_inbox_items_total', help: 'Settlement work this process took from its lanes\' inboxes (accepted by other processes)', labelNames: ['network'] as const, registers: [this.registry],
  });
  /** accepts: answers buyers; sends: holds a relayer lane now. */
  readonly settlementRole = new Gauge({
    name: 'agentgate_settlement_role', help: 'What this process does in settlement now (1) or not (0)',
    labelNames: ['role', 'network'] as const, registers: [this.registry],
  });
  /** 0: the scheme's contracts have no code on that network, and it is refused there (PaymentSchemes.checkContracts). */
  readonly schemeAvailable = new Gauge({
    name: 'agentgate_scheme_available', help: 'Whether a payment scheme is offered on a network (1) or refused there because its contracts are missing (0)',
    labelNames: ['network', 'scheme'] as const, registers: [this.registry],
  });
  readonly reconciled = new Counter({
    name: 'agentgate_reconciled_payments_total', help: 'Open payments closed by reconciliation, by result',
    labelNames: ['result'] as const, registers: [this.registry],
  });
  readonly jobQueueDepth = new Gauge({
    name: 'agentgate_job_queue_depth', help: 'Background jobs due or scheduled, by job name',
    labelNames: ['name'] as const, registers: [this.registry],
  });
  /** delivered, retry, failed. */
  readonly webhookOutcomes = new Counter({
    name: 'agentgate_webhook_attempts_total', help: 'Webhook delivery attempts, by outcome',
    labelNames: ['outcome'] as const, registers: [this.registry],
  });
  /** Read from the database at scrape time: any process reports the deployment's figure. */
  readonly webhookOldestDue = new Gauge({
    name: 'agentgate_webhook_oldest_due_seconds', help: 'How long the oldest webhook delivery whose attempt is due has waited for it (0: none waits)',
    registers: [this.registry],
  });
  readonly httpRequests = new Histogram({
    name: 'agentgate_http_request_duration_seconds', help: 'HTTP requests by method, route and status class',
    labelNames: ['method', 'route', 'status'] as const, buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers: [this.registry],
  });

  /** Every command this process sends the database (MongoDB command monitoring), by command and collection. */
  readonly dbCommands = new Counter({
    name: 'agentgate_db_commands_total', help: 'Commands sent to the database, by command name and collection',
    labelNames: ['command', 'collection'] as const, registers: [this.registry],
  });
  readonly payerReadBatchSize = new Histogram({
    name: 'agentgate_chain_payer_read_batch_size', help: 'Payments whose chain reads (nonce state, balance) shared one Multicall3 eth_call',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128], registers: [this.registry],
  });
  /** How many writes each group commit carried (platform/group-commit.ts), by what they write. */
  readonly groupCommitSize = new Histogram({
    name: 'agentgate_db_group_commit_size', help: 'Writes carried by one grouped database command, by what they write',
    labelNames: ['write'] as const, buckets: [1, 2, 4, 8, 16, 32, 64, 128], registers: [this.registry],
  });

  /** Settled payments whose record update (after the answer, payments/records.ts) this process has not written yet. */
  readonly paymentRecordWritesPending = new Gauge({
    name: 'agentgate_payment_record_writes_pending', help: 'Settled payments whose record update this process has not written yet (their settlement is recorded)',
    registers: [this.registry],
  });

  private readonly collectors: Array<() => Promise<void> | void> = [];

  /** prom-client's own metrics of this OS process (process_*, nodejs_*), shared by every context in it. */
  private readonly processDefaults: Registry | undefined;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    this.processDefaults = (options.defaultMetrics ?? true) ? processDefaultMetrics() : undefined;
  }

  /** Every metric this process exposes: its own and the process's defaults. */
  exposed(): Registry {
    return this.processDefaults ? Registry.merge([this.registry, this.processDefaults]) : this.registry;
  }

  /** Runs before every scrape: for gauges whose truth lives elsewhere (the database, the chain). */
  /** These metrics as one network records them: the per-network ones carry its `network` label (CAIP-2 id). */
  forNetwork(network: string): Metrics {
    return new Proxy(this, {
      get: (target, prop) => {
        const value = Reflect.get(target, prop) as unknown;
        if (PER_NETWORK.has(prop)) return labelledWith(value as object, network);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }

  onCollect(collector: () => Promise<void> | void): void {
    this.collectors.push(collector);
  }

  /** The text exposition format; a failing collector leaves its gauges at their last value. */
  async render(): Promise<string> {
    await Promise.all(this.collectors.map(async (collect) => { try { await collect(); } catch { /* stale beats missing */ } }));
    return this.exposed().metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

const PROCESS_DEFAULTS = Symbol.for('agentgate.processDefaultMetrics');

/**
 * prom-client's default metrics under our prefix (agentgate_process_cpu_seconds_total, ...), made once per
 * OS process: its GC metric registers a performance observer that nothing can remove, so one per context
 * (a test process builds hundreds) would keep every one of them alive. Kept on the perf_hooks module,
 * where the observers themselves live: the one object every context of a process shares (a test
 * runner gives each test file its own `globalThis` and `process`, not its own built-in modules).
 */
function processDefaultMetrics(): Registry {
  const holder = perfHooks as unknown as Record<symbol, Registry | undefined>;
  if (!holder[PROCESS_DEFAULTS]) {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: 'agentgate_' });
    holder[PROCESS_DEFAULTS] = registry;
  }
  return holder[PROCESS_DEFAULTS]!;
}
