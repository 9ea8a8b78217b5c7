import type { AppContext } from '../context.js';
import { notFound } from '../platform/errors.js';
import type { IdentityDoc } from './identity-model.js';

/** The fields other areas add to an identity (wallet, DID, ...), see AppContext.identityDetail. */
export async function detailOf(app: AppContext, identity: IdentityDoc): Promise<Record<string, unknown>> {
  const parts = await Promise.all(app.identityDetail.map((fn) => fn(identity)));
  return Object.assign({}, ...parts);
}

/** An identity as its own key sees it: GET /v0/whoami and the MCP tool identity_whoami. */
export async function selfView(app: AppContext, identityId: string, knownOrg?: { plan: string } | null) {
  const identity = await app.identities.getLive(identityId);
  if (!identity) throw notFound('Identity not found');
  const org = knownOrg ?? await app.accounts.getOrg(identity.orgId);
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
    ...(await detailOf(app, identity)),
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
