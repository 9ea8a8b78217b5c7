import type { Config } from '../platform/config.js';
import type { AccountService } from './account-service.js';

/**
 * Whether an org is an admin account: listed in ADMIN_ORG_IDS (`*` is every org, which `agentgate dev`
 * uses), or given the admin role by the operator (`agentgate admin grant`; other processes see a change
 * within the org cache's few seconds).
 */
export function adminCheck(config: Pick<Config, 'ADMIN_ORG_IDS'>, accounts: Pick<AccountService, 'getOrg'>): (orgId: string) => Promise<boolean> {
  const listed = config.ADMIN_ORG_IDS === '*' ? '*' : new Set(config.ADMIN_ORG_IDS.split(',').filter(Boolean));
  return async (orgId) => listed === '*' || listed.has(orgId) || (await accounts.getOrg(orgId))?.role === 'admin';
}
