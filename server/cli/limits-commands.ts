import { createContext } from '../context.js';
import { loadConfig } from '../platform/config.js';
import type { CommandIO } from './account-commands.js';

const USAGE = 'usage: agentgate limits set <orgId> [--per-key N] [--per-seller-key N] [--per-org N] | clear <orgId> | list';
const FLAGS = { 'per-key': 'perKey', 'per-seller-key': 'perSellerKey', 'per-org': 'perOrg' } as const;

/**
 * `agentgate limits`: an org's own request limits (requests per RATE_LIMIT_WINDOW_MS; 0 for none), in place
 * of the RATE_LIMIT_* defaults, reaching every process within AUTH_CACHE_TTL_MS. Runs against the
 * database of the environment's configuration, like `agentgate admin`.
 */
export async function limitsCommand(io: CommandIO, action: string | undefined, orgId: string | undefined, values: Record<string, unknown>): Promise<number> {
  const set: Record<string, number> = {};
  for (const [flag, field] of Object.entries(FLAGS)) {
    const raw = values[flag];
    if (raw === undefined) continue;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 0) { io.out(`--${flag} must be a whole number of requests, 0 or more`); return 2; }
    set[field] = n;
  }
  if (!(action === 'list' || ((action === 'set' || action === 'clear') && orgId)) || (action === 'set' && !Object.keys(set).length)) {
    io.out(USAGE);
    return 2;
  }
  const app = await createContext(loadConfig(io.env));
  try {
    const { orgLimits } = app.limits;
    const defaults = `defaults per ${app.config.RATE_LIMIT_WINDOW_MS / 1000} s: key ${app.config.RATE_LIMIT_PER_KEY}, seller key ${app.config.RATE_LIMIT_PER_SELLER_KEY}, org ${app.config.RATE_LIMIT_PER_ORG}, anonymous client ${app.config.RATE_LIMIT_PER_ANONYMOUS}`;
    if (action === 'list') {
      const all = await orgLimits.list();
      io.out([defaults, ...all.map((l) => `${l._id}  key ${l.perKey ?? 'default'}, seller key ${l.perSellerKey ?? 'default'}, org ${l.perOrg ?? 'default'}`)].join('\n'));
      return 0;
    }
    if (!(await app.accounts.getOrg(orgId!))) { io.out(`no org ${orgId}`); return 1; }
    if (action === 'clear') {
      io.out((await orgLimits.clear(orgId!)) ? `${orgId} takes the defaults again (${defaults})` : `${orgId} had no limits of its own`);
      return 0;
    }
    const saved = await orgLimits.set(orgId!, set);
    io.out(`${orgId}: key ${saved.perKey ?? 'default'}, seller key ${saved.perSellerKey ?? 'default'}, org ${saved.perOrg ?? 'default'} (per ${app.config.RATE_LIMIT_WINDOW_MS / 1000} s)`);
    return 0;
  } finally {
    await app.close();
  }
}
