import Router from '@koa/router';
import type { AccountService } from '../accounts/account-service.js';
import type { DidService } from '../did/did-service.js';
import type { IdentityService } from '../identities/identity-service.js';
import type { Config } from '../platform/config.js';
import { notFound } from '../platform/errors.js';
import { IDENTITY_TYPES } from '../signup/identity-types.js';
import type { IdentityDoc } from '../identities/identity-model.js';

const capabilities = IDENTITY_TYPES.identityTypes[0]!.provides;

/** A skill per identity, listing only what that identity's scopes allow. */
function skillsOf(identity: IdentityDoc, didOf: (identityId: string) => string) {
  const granted = new Set(identity.scopes);
  return capabilities
    .filter((c) => c.scopes.some((s) => granted.has(s)))
    .map((c) => ({
      id: `${identity._id}:${c.capability}`,
      name: `${identity.displayName} ${c.capability}`,
      description: c.description,
      tags: [c.capability, identity.name],
      identity: { identityId: identity._id, email: identity.emailAddress, did: didOf(identity._id) },
    }));
}

export interface AgentCardRouteDeps {
  config: Pick<Config, 'BASE_URL'>;
  accounts: AccountService;
  identities: IdentityService;
  did: DidService;
}

/** GET /.well-known/agents/{orgId}: an A2A-style agent card for discovery (SPEC 1.7). Not versioned. */
export function agentCardRoutes({ config, accounts, identities: identityService, did }: AgentCardRouteDeps): Router {
  const router = new Router();
  router.get('/.well-known/agents/:orgId', async (ctx) => {
    const orgId = String(ctx.params.orgId);
    const org = /^org_[a-z0-9]{1,64}$/.test(orgId) ? await accounts.getOrg(orgId) : null;
    if (!org) throw notFound('Agent card not found');
    const identities = await identityService.listAll(org._id);
    const base = config.BASE_URL;
    ctx.set('Cache-Control', 'public, max-age=60');
    ctx.body = {
      protocolVersion: '0.3.0',
      name: org.name,
      description: `Agent org ${org._id} with ${identities.length} identit${identities.length === 1 ? 'y' : 'ies'}`,
      url: `${base}/.well-known/agents/${org._id}`,
      provider: { organization: org.name, url: base },
      version: '1.0.0',
      capabilities: { streaming: false, pushNotifications: false, stateTransitionHistory: false },
      defaultInputModes: ['application/json', 'text/plain'],
      defaultOutputModes: ['application/json', 'text/plain'],
      skills: identities.flatMap((identity) => skillsOf(identity, (id) => did.didOf(id))),
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An identity key of this org' } },
      security: [{ bearer: [] }],
      identities: identities.map((i) => ({ identityId: i._id, name: i.name, email: i.emailAddress, did: did.didOf(i._id) })),
    };
  });
  return router;
}
