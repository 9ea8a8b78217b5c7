import type { AccountService } from '../accounts/account-service.js';
import type { IdentityService } from '../identities/identity-service.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { ApiKeyService } from '../platform/auth/api-keys.js';
import type { Config } from '../platform/config.js';

export interface SignupDeps {
  config: Pick<Config, 'BASE_URL'>;
  accounts: AccountService;
  identities: IdentityService;
  keys: ApiKeyService;
  logs: ActivityLog;
}

export interface SignupResult {
  user_id: string;
  user_email: string;
  org_id: string;
  platform_key: string;
  agent_card_url: string;
  identity: { identityId: string; name: string; emailAddress: string; scopes: string[]; apiKeyPrefix: string; rawKey: string };
}

/**
 * One unauthenticated call creates the User (AGENT), the Org (FREE), the platform key and the first
 * Identity (SPEC 4.1). Documents are written in an order where a crash leaves only unreachable rows,
 * never a reachable half-account: the platform key, the only way in, is issued last.
 */
export async function signUpAgent({ config, accounts, identities, keys, logs }: SignupDeps): Promise<SignupResult> {
  const ids = accounts.newIds();
  const { identity, rawKey } = await identities.create(ids);
  await accounts.createAgentAccount(ids, { name: identity.name, email: identity.emailAddress });
  const platformKey = await keys.issue('platform', { orgId: ids.orgId, userId: ids.userId, name: 'signup' });
  await logs.record({
    orgId: ids.orgId, identityId: identity._id, action: 'agent.signup', category: 'account',
    description: `Agent signed up as ${identity.name}`, targetType: 'org', targetId: ids.orgId,
    metadata: { userId: ids.userId, emailAddress: identity.emailAddress },
  });
  return {
    user_id: ids.userId,
    user_email: identity.emailAddress,
    org_id: ids.orgId,
    platform_key: platformKey.rawKey,
    agent_card_url: `${config.BASE_URL}/.well-known/agents/${ids.orgId}`,
    identity: {
      identityId: identity._id,
      name: identity.name,
      emailAddress: identity.emailAddress,
      scopes: identity.scopes,
      apiKeyPrefix: identity.apiKeyPrefix,
      rawKey,
    },
  };
}
