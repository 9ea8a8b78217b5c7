import type { AccountService } from '../accounts/account-service.js';
import { notFound } from '../platform/errors.js';
import type { IdentityDoc } from './identity-model.js';
import type { IdentityService } from './identity-service.js';

/**
 * One area's fields on an identity (wallet address, DID, ...). The areas register theirs at the
 * composition root, so whoami and the platform view show them without this module knowing those areas.
 */
export type IdentityDetailSource = (identity: IdentityDoc) => Promise<Record<string, unknown>> | Record<string, unknown>;

/** The fields other areas add to an identity. */
export async function detailOf(identityDetail: readonly IdentityDetailSource[], identity: IdentityDoc): Promise<Record<string, unknown>> {
  const parts = await Promise.all(identityDetail.map((fn) => fn(identity)));
  return Object.assign({}, ...parts);
}

export interface SelfViewDeps {
  identities: IdentityService;
  accounts: AccountService;
  identityDetail: readonly IdentityDetailSource[];
}

/** An identity as its own key sees it: GET /v0/whoami and the MCP tool identity_whoami. */
export async function selfView({ identities, accounts, identityDetail }: SelfViewDeps, identityId: string, knownOrg?: { plan: string } | null) {
  const identity = await identities.getLive(identityId);
  if (!identity) throw notFound('Identity not found');
  const org = knownOrg ?? await accounts.getOrg(identity.orgId);
  return {
    identityId: identity._id,
    name: identity.name,
    displayName: identity.displayName,
    email: identity.emailAddress,
    scopes: identity.scopes,
    inbox: { address: identity.emailAddress },
    wallet: null,
    org: { id: identity.orgId, plan: org?.plan ?? null },
    createdAt: identity.createdAt.toISOString(),
    ...(await detailOf(identityDetail, identity)),
  };
}

/** The platform view of an identity (DESIGN.md): list and get under /v0/platform/identities. */
export function presentIdentity(identity: IdentityDoc, usage: { count: number; lastUsedAt?: Date } | undefined, extras: Record<string, unknown> = {}) {
  return {
    identityId: identity._id,
    name: identity.name,
    displayName: identity.displayName,
    email: identity.emailAddress,
    scopes: identity.scopes,
    apiKeyPrefix: identity.apiKeyPrefix,
    usageCount: usage?.count ?? 0,
    lastUsedAt: usage?.lastUsedAt?.toISOString() ?? null,
    createdAt: identity.createdAt.toISOString(),
    wallet: null,
    ...extras,
  };
}
