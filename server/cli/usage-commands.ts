import { createContext } from '../context.js';
import { loadConfig } from '../platform/config.js';
import { monthInput, monthOf } from '../usage/months.js';
import { METRIC_LABELS, USAGE_METRICS } from '../usage/metrics.js';
import { presentUsage } from '../usage/report.js';
import type { CommandIO } from './account-commands.js';

const USAGE = 'usage: agentgate usage show <orgId> [--month YYYY-MM] [--json] | plan <orgId> <PLAN> | plans';

/**
 * `agentgate usage`: an org's usage in a month against its plan's quotas, the plan an org is on, and the
 * plans USAGE_PLANS defines. Runs against the database of the environment's configuration, like
 * `agentgate limits`; a plan change reaches every process through the change feed.
 */
export async function usageCommand(io: CommandIO, action: string | undefined, args: string[], values: { month?: string; json?: boolean }): Promise<number> {
  const [orgId, plan] = args;
  const valid = action === 'plans' || (action === 'show' && orgId) || (action === 'plan' && orgId && plan);
  if (!valid) { io.out(USAGE); return 2; }
  const month = values.month === undefined ? monthOf() : monthInput.safeParse(values.month).success ? values.month : undefined;
  if (!month) { io.out(`--month must be YYYY-MM, not "${values.month}"`); return 2; }
  const app = await createContext(loadConfig(io.env));
  try {
    const plans = app.config.USAGE_PLANS;
    if (action === 'plans') {
      const names = Object.keys(plans);
      io.out(names.length ? names.map((name) => `${name}  ${describeQuotas(plans[name]!)}`).join('\n') : 'no plans: USAGE_PLANS is not set, nothing is limited');
      return 0;
    }
    if (!(await app.accounts.getOrg(orgId!))) { io.out(`no org ${orgId}`); return 1; }
    if (action === 'plan') {
      if (!Object.hasOwn(plans, plan!)) io.out(`note: USAGE_PLANS defines no plan ${plan}: the org is not limited (${Object.keys(plans).join(', ') || 'no plans'} defined)`);
      await app.accounts.setPlan(orgId!, plan!);
      io.out(`${orgId} is on plan ${plan}${Object.hasOwn(plans, plan!) ? ` (${describeQuotas(plans[plan!]!)})` : ''}`);
      return 0;
    }
    const report = presentUsage(await app.meter.report(orgId!, month));
    if (values.json) { io.out(JSON.stringify(report, null, 2)); return 0; }
    io.out(`${orgId} in ${month}, plan ${report.plan || '(none)'}`);
    for (const metric of USAGE_METRICS) {
      const { used, quota } = report.metrics[metric]!;
      io.out(`  ${METRIC_LABELS[metric].padEnd(18)} ${String(used).padStart(12)}${quota === null ? '' : ` of ${quota}`}`);
    }
    for (const s of report.settlements) io.out(`    ${s.scheme} on ${s.network}: ${s.count}`);
    return 0;
  } finally {
    await app.close();
  }
}

function describeQuotas(quotas: Partial<Record<string, number>>): string {
  const set = USAGE_METRICS.filter((m) => quotas[m] !== undefined);
  return set.length ? set.map((m) => `${METRIC_LABELS[m]} ${quotas[m]}`).join(', ') : 'nothing limited';
}
