import { AppError } from '../platform/errors.js';
import { TtlCache } from '../platform/ttl-cache.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { Metrics } from '../platform/metrics.js';
import { METRIC_LABELS, USAGE_METRICS, type CountedMetric, type UsageMetric } from './metrics.js';
import { monthOf, monthRange, secondsToNextMonth, type Month } from './months.js';
import type { MonthlyCounts } from './monthly-counts.js';
import type { SettlementCount, SettlementCounts } from './settlement-counts.js';

/** A plan's monthly quotas (storage: at any time); a metric left out is not limited. */
export type Quotas = Partial<Record<UsageMetric, number>>;

export interface UsageReport {
  orgId: string;
  month: Month;
  plan: string;
  usage: Record<UsageMetric, number>;
  quotas: Quotas;
  settlements: SettlementCount[];
}

export interface QuotaRefusal { metric: UsageMetric; plan: string; quota: number; used: number; message: string; resetsAt?: string }

export interface UsageMeterDeps {
  counts: MonthlyCounts;
  settlements: SettlementCounts;
  /** The operator's plans (USAGE_PLANS), by name. */
  plans: Readonly<Record<string, Quotas>>;
  /** The org's plan name (orgs are read through a short cache). */
  planOf: (orgId: string) => Promise<string | undefined>;
  /** How long the deployment's totals are reused by quota checks: the tolerance of a quota across processes. */
  cacheMs: number;
  logs: ActivityLog;
  metrics: Metrics;
}

interface Snapshot { counted: Record<CountedMetric, number>; ownAt: Record<CountedMetric, number> }

const sum = (rows: SettlementCount[]) => rows.reduce((total, row) => total + row.count, 0);

/**
 * How close to a quota (what is left) its counts are exact: read afresh at each check and written at
 * once. Far from it a check reads the totals at most once per `cacheMs`.
 */
const nearMargin = (quota: number) => Math.max(50, Math.ceil(quota * 0.02));

/** How often a refused org's activity log gets a line for the same quota (a refused burst is one line). */
const LOG_REFUSAL_EVERY_MS = 60_000;

/**
 * Usage per org and month, and the plan quotas it is checked against (docs/operators/quotas.md).
 *
 * Counting costs a request a map update (MonthlyCounts). A quota check costs nothing for a metric no
 * plan limits; otherwise it reads the deployment's totals at most once per `cacheMs`, adding what this
 * process counted since. Within `nearMargin` of a quota the counts are exact: each check reads them afresh
 * and each count is written at once, so N processes go past a quota only by the requests in flight.
 * Settlements are counted from the records (exact, but an aggregation: always through the cache), so a
 * settlements quota lets through what settles within `cacheMs` of reaching it.
 */
export class UsageMeter {
  /** The counted totals, and the settlements (an aggregation of the records), each reused for `cacheMs`. */
  private readonly snapshots: TtlCache<Snapshot>;
  private readonly settled: TtlCache<number>;
  private readonly loggedAt = new Map<string, number>();
  /** The metrics some plan limits: a check of any other costs nothing (not even the org's plan). */
  private readonly limited: ReadonlySet<UsageMetric>;
  /** `org|metric` pairs whose last check found them near their quota (counted exactly: see current). */
  private readonly near = new Set<string>();

  constructor(private readonly deps: UsageMeterDeps) {
    this.snapshots = new TtlCache(deps.cacheMs, 50_000);
    this.settled = new TtlCache(deps.cacheMs, 50_000);
    this.limited = new Set(USAGE_METRICS.filter((m) => Object.values(deps.plans).some((quotas) => quotas[m] !== undefined)));
  }

  /** Writes what this process counted (shutdown). */
  flush(): Promise<void> {
    return this.deps.counts.flush();
  }

  /** Counts what happened (a facilitator call, a mail, bytes stored or freed). Never waits. */
  record(orgId: string, metric: CountedMetric, n = 1): void {
    this.deps.counts.add(orgId, metric, n);
    if (this.near.has(`${orgId}|${metric}`)) void this.deps.counts.flush();
  }

  async report(orgId: string, month: Month = monthOf()): Promise<UsageReport> {
    const [plan, counted, settlements] = await Promise.all([this.deps.planOf(orgId), this.deps.counts.totals(orgId, month), this.deps.settlements.of(orgId, month)]);
    return {
      orgId, month, plan: plan ?? '',
      usage: { settlements: sum(settlements), ...counted },
      quotas: this.quotasOf(plan), settlements,
    };
  }

  quotasOf(plan: string | undefined): Quotas {
    return (plan !== undefined && Object.hasOwn(this.deps.plans, plan) ? this.deps.plans[plan] : undefined) ?? {};
  }

  /**
   * Why `adding` more of `metric` would go over the org's quota this month, or undefined if it would not
   * (or the plan sets none). A refusal is counted, and logged once a minute per org and quota.
   */
  async refusal(orgId: string, metric: UsageMetric, adding = 1): Promise<QuotaRefusal | undefined> {
    if (!this.limited.has(metric)) return undefined;
    const plan = await this.deps.planOf(orgId);
    const quota = this.quotasOf(plan)[metric];
    if (quota === undefined) return undefined;
    const used = await this.current(orgId, metric, quota);
    if (adding <= 0 || used + adding <= quota) return undefined;
    const label = METRIC_LABELS[metric];
    const monthly = metric !== 'storageBytes';
    const resetsAt = monthly ? monthRange(monthOf()).until.toISOString() : undefined;
    const refusal: QuotaRefusal = {
      metric, plan: plan!, quota, used,
      message: monthly
        ? `The ${plan} plan's quota of ${quota} ${label} a month is reached (${used} used in ${monthOf()}); it resets at ${resetsAt}`
        : `The ${plan} plan's storage quota of ${quota} bytes would be exceeded (${used} bytes kept, ${adding} more asked); free some or move to a larger plan`,
      ...(resetsAt ? { resetsAt } : {}),
    };
    this.deps.metrics.quotaRefusals.inc({ metric });
    this.logRefusal(orgId, refusal);
    return refusal;
  }

  /** Throws 429 `quota_exceeded` naming the quota (Retry-After: when the month ends) if `adding` more would exceed it. */
  async enforce(orgId: string, metric: UsageMetric, adding = 1): Promise<void> {
    const refusal = await this.refusal(orgId, metric, adding);
    if (refusal) throw quotaError(refusal);
  }

  private async current(orgId: string, metric: UsageMetric, quota: number): Promise<number> {
    const key = `${orgId}|${monthOf()}`;
    if (metric === 'settlements') return this.settled.through(key, async () => sum(await this.deps.settlements.of(orgId, monthOf())));
    const used = this.usedOf(await this.snapshots.through(key, () => this.snapshot(orgId)), orgId, metric);
    if (quota - used > nearMargin(quota)) {
      this.near.delete(`${orgId}|${metric}`);
      return used;
    }
    // Near the quota: the totals read afresh by each check (a read shared with checks that began earlier
    // would miss what was counted since, and let more past the quota), and what this process counts
    // written at once (record), so the processes together go past the quota only by the requests in
    // flight at the moment it is reached.
    if (this.near.size >= 50_000) this.near.delete(this.near.values().next().value!);
    this.near.add(`${orgId}|${metric}`);
    const snapshot = await this.snapshot(orgId);
    this.snapshots.set(key, snapshot);
    return this.usedOf(snapshot, orgId, metric);
  }

  /** The deployment's counted totals this month, with what this process had counted when they were read. */
  private async snapshot(orgId: string): Promise<Snapshot> {
    const ownAt = Object.fromEntries(COUNTED.map((m) => [m, this.deps.counts.own(orgId, m)])) as Record<CountedMetric, number>;
    return { counted: await this.deps.counts.totals(orgId, monthOf()), ownAt };
  }

  /** The snapshot's total plus what this process counted since it was read. */
  private usedOf(snapshot: Snapshot, orgId: string, metric: CountedMetric): number {
    return snapshot.counted[metric] + this.deps.counts.own(orgId, metric) - snapshot.ownAt[metric];
  }

  private logRefusal(orgId: string, refusal: QuotaRefusal): void {
    const key = `${orgId}|${refusal.metric}`;
    const now = Date.now();
    if ((this.loggedAt.get(key) ?? 0) > now - LOG_REFUSAL_EVERY_MS) return;
    this.loggedAt.set(key, now);
    if (this.loggedAt.size > 10_000) this.loggedAt.delete(this.loggedAt.keys().next().value!);
    this.deps.logs.recordSoon({
      orgId, action: 'usage.quota_reached', category: 'usage', severity: 'warning', status: 'failure',
      description: refusal.message, metadata: { metric: refusal.metric, plan: refusal.plan, quota: refusal.quota, used: refusal.used },
    });
  }
}

const COUNTED = USAGE_METRICS.filter((m): m is CountedMetric => m !== 'settlements');

export function quotaError(refusal: QuotaRefusal): AppError {
  const { message, ...details } = refusal;
  return new AppError(429, 'quota_exceeded', message, details, refusal.resetsAt ? { 'Retry-After': String(secondsToNextMonth()) } : {});
}

/** What the areas that count usage and keep to quotas need of the meter. */
export type Meter = Pick<UsageMeter, 'record' | 'refusal' | 'enforce'>;
