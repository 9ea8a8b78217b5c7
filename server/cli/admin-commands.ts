import { createContext } from '../context.js';
import { loadConfig } from '../platform/config.js';
import type { CommandIO } from './account-commands.js';

/**
 * `agentgate admin grant|revoke <orgId>` and `agentgate admin list`: the operator's switch for admin
 * accounts (team chat is an admin preview). Runs against the database of the environment's configuration,
 * like `rotate-master-key`.
 */
export async function adminCommand(io: CommandIO, action: string | undefined, orgId: string | undefined): Promise<number> {
  const usage = 'usage: agentgate admin grant <orgId> | revoke <orgId> | list';
  if (action !== 'list' && !((action === 'grant' || action === 'revoke') && orgId)) {
    io.out(usage);
    return 2;
  }
  const app = await createContext(loadConfig(io.env));
  try {
    if (action === 'list') {
      const admins = await app.accounts.listAdmins();
      io.out(admins.length ? admins.map((org) => `${org._id}  ${org.name}`).join('\n') : 'no org has the admin role');
      if (app.config.ADMIN_ORG_IDS) io.out(`ADMIN_ORG_IDS also makes admins of: ${app.config.ADMIN_ORG_IDS}`);
      return 0;
    }
    const org = await app.accounts.setRole(orgId!, action === 'grant' ? 'admin' : 'member');
    if (!org) {
      io.out(`no org ${orgId}`);
      return 1;
    }
    io.out(action === 'grant' ? `${org._id} (${org.name}) is now an admin account` : `${org._id} (${org.name}) is no longer an admin account`);
    return 0;
  } finally {
    await app.close();
  }
}
