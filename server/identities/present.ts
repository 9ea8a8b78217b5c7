import type { IdentityDoc } from './identity-model.js';

export const didOf = (didDomain: string, identityId: string) => `did:web:${didDomain}:identities:${identityId}`;

/** The platform view of an identity (DESIGN.md): list and get under /v0/platform/identities. */
export function presentIdentity(identity: IdentityDoc, extras: Record<string, unknown> = {}) {
  return {
    identityId: identity._id,
    name: identity.name,
    displayName: identity.displayName,
    email: identity.emailAddress,
    scopes: identity.scopes,
    apiKeyPrefix: identity.apiKeyPrefix,
    usageCount: identity.usageCount ?? 0,
    lastUsedAt: identity.lastUsedAt?.toISOString() ?? null,
    createdAt: identity.createdAt.toISOString(),
    wallet: null,
    ...extras,
  };
}
