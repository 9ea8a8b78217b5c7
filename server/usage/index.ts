import type { Connection } from 'mongoose';
import type { Config } from '../platform/config.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { Metrics } from '../platform/metrics.js';
import { settledPaymentModel } from '../payments/settled-payments.js';
import { channelActionModel } from '../payments/schemes/batch-settlement/evm/settle.js';
import { MonthlyCounts } from './monthly-counts.js';
import { SettlementCounts } from './settlement-counts.js';
import { UsageMeter } from './usage-meter.js';

export { UsageMeter, quotaError, type Meter, type Quotas, type QuotaRefusal, type UsageReport } from './usage-meter.js';
export { MonthlyCounts } from './monthly-counts.js';

export interface UsageDeps {
  conn: Connection;
  config: Pick<Config, 'USAGE_PLANS' | 'USAGE_CACHE_MS'>;
  processId: string;
  /** The org's plan (its record, read through the accounts' short cache). */
  planOf: (orgId: string) => Promise<string | undefined>;
  logs: ActivityLog;
  metrics: Metrics;
}

/** Usage per org and month and the plans' quotas (server/usage; docs/operators/quotas.md). */
export function createUsageMeter({ conn, config, processId, planOf, logs, metrics }: UsageDeps): UsageMeter {
  return new UsageMeter({
    counts: new MonthlyCounts(conn, processId),
    settlements: new SettlementCounts(settledPaymentModel(conn), channelActionModel(conn)),
    plans: config.USAGE_PLANS, planOf, cacheMs: config.USAGE_CACHE_MS, logs, metrics,
  });
}
