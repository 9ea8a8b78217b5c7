import { csvLine } from '../platform/csv.js';
import { USAGE_METRICS } from './metrics.js';
import type { UsageMeter, UsageReport } from './usage-meter.js';
import type { Month } from './months.js';

/** A usage report as the API answers it: each metric with its quota (null: none) and what is left. */
export function presentUsage(report: UsageReport) {
  return {
    orgId: report.orgId,
    month: report.month,
    plan: report.plan,
    metrics: Object.fromEntries(USAGE_METRICS.map((metric) => {
      const used = report.usage[metric];
      const quota = report.quotas[metric];
      return [metric, { used, quota: quota ?? null, remaining: quota === undefined ? null : Math.max(0, quota - used) }];
    })),
    settlements: report.settlements,
  };
}

const USAGE_CSV_HEADER = ['month', 'plan', 'metric', 'scheme', 'network', 'used', 'quota'];

/**
 * One month's rows of the usage export: a row per metric (storage: as it is now), then one per scheme
 * and network settled on. Cells go through csvCell (no formula injection).
 */
function usageCsvRows(report: UsageReport): string {
  let out = '';
  for (const metric of USAGE_METRICS) out += csvLine([report.month, report.plan, metric, '', '', report.usage[metric], report.quotas[metric] ?? '']);
  for (const s of report.settlements) out += csvLine([report.month, report.plan, 'settlements', s.scheme, s.network, s.count, '']);
  return out;
}

/** The org's usage export (the API's and the console's): a header, then each month's rows, oldest first. */
export async function usageCsv(meter: Pick<UsageMeter, 'report'>, orgId: string, months: readonly Month[]): Promise<string> {
  let csv = csvLine(USAGE_CSV_HEADER);
  for (const month of months) csv += usageCsvRows(await meter.report(orgId, month));
  return csv;
}
