import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { authenticatedRouter, identityIdOf, principalOf, requirePlatformOrScope, requireScope, type AuthDeps } from '../../platform/auth/authenticate.js';
import { parseInput } from '../../platform/validate.js';
import { badRequest } from '../../platform/errors.js';
import type { IdentityService } from '../../identities/identity-service.js';
import { domainName, localPart, type MailDomains } from './domain-service.js';
import { presentAddress, presentAddresses, presentDomain } from './present.js';

export const createDomainBody = z.strictObject({ domain: domainName });
export const domainParams = z.strictObject({ domainId: z.string().regex(/^dom_[A-Za-z0-9]{24}$/, 'must be a domain id (dom_ and 24 letters or digits)') });
export const addressBody = z.strictObject({
  localPart,
  /** With a platform key: the identity that takes the address. An identity key takes it for itself. */
  identityId: z.string().regex(/^id-[0-9a-f]{16}$/, 'must be an identity id (id- and 16 hex characters)').optional(),
});
export const addressParams = domainParams.extend({ address: z.string().trim().toLowerCase().max(320).pipe(z.email('must be an email address')) });

export interface DomainRouteDeps extends AuthDeps {
  domains: MailDomains;
  identities: AuthDeps['identities'] & Pick<IdentityService, 'getOwned'>;
}

/** Who acted, for the activity log: the identity, when an identity key did it. */
const actor = (ctx: Context) => {
  const { identityId } = principalOf(ctx);
  return identityId ? { identityId } : {};
};

/**
 * The org's own mail domains (/v0/domains): add one and get the DNS records to publish, check them,
 * rotate its DKIM key, delete it; and the addresses its identities take on it once it is verified. An
 * identity key sees its own addresses only; GET /v0/mail/addresses lists all of an identity's addresses.
 */
export function domainRoutes(deps: DomainRouteDeps): Router {
  const { domains, identities } = deps;
  const router = authenticatedRouter(deps);

  router.post('/v0/domains', requirePlatformOrScope('mail:manage'), async (ctx) => {
    const { domain } = parseInput(createDomainBody, ctx.request.body, 'body');
    ctx.status = 201;
    ctx.body = presentDomain(await domains.create(principalOf(ctx).orgId, domain, actor(ctx)));
  });

  router.get('/v0/domains', requirePlatformOrScope('mail:read'), async (ctx) => {
    const list = (await domains.list(principalOf(ctx).orgId)).map(presentDomain);
    ctx.body = { domains: list, count: list.length };
  });

  // Reads every record from DNS now (the scheduled re-check does it every MAIL_DOMAIN_CHECK_EVERY_MS).
  router.get('/v0/domains/:domainId', requirePlatformOrScope('mail:read'), async (ctx) => {
    const { domainId } = parseInput(domainParams, ctx.params, 'params');
    ctx.body = presentDomain(await domains.get(principalOf(ctx).orgId, domainId, { check: true }));
  });

  router.delete('/v0/domains/:domainId', requirePlatformOrScope('mail:manage'), async (ctx) => {
    const { domainId } = parseInput(domainParams, ctx.params, 'params');
    await domains.remove(principalOf(ctx).orgId, domainId, actor(ctx));
    ctx.body = { domainId, deleted: true };
  });

  router.post('/v0/domains/:domainId/dkim/rotate', requirePlatformOrScope('mail:manage'), async (ctx) => {
    const { domainId } = parseInput(domainParams, ctx.params, 'params');
    ctx.body = presentDomain(await domains.rotateDkim(principalOf(ctx).orgId, domainId, actor(ctx)));
  });

  router.post('/v0/domains/:domainId/addresses', requirePlatformOrScope('mail:manage'), async (ctx) => {
    const { domainId } = parseInput(domainParams, ctx.params, 'params');
    const body = parseInput(addressBody, ctx.request.body, 'body');
    const principal = principalOf(ctx);
    let identityId: string;
    if (principal.tier === 'identity') {
      identityId = identityIdOf(ctx);
      if (body.identityId && body.identityId !== identityId) throw badRequest('body.identityId: an identity key takes addresses for itself only; leave it out');
    } else {
      if (!body.identityId) throw badRequest('body.identityId: name the identity that takes the address');
      identityId = (await identities.getOwned(principal.orgId, body.identityId))._id; // 404 for another org's
    }
    ctx.status = 201;
    ctx.body = presentAddress(await domains.addAddress(principal.orgId, domainId, body.localPart, identityId));
  });

  router.get('/v0/domains/:domainId/addresses', requirePlatformOrScope('mail:read'), async (ctx) => {
    const { domainId } = parseInput(domainParams, ctx.params, 'params');
    const principal = principalOf(ctx);
    const list = (await domains.addressesOn(principal.orgId, domainId, principal.identityId)).map(presentAddress);
    ctx.body = { addresses: list, count: list.length };
  });

  router.delete('/v0/domains/:domainId/addresses/:address', requirePlatformOrScope('mail:manage'), async (ctx) => {
    const { domainId, address } = parseInput(addressParams, ctx.params, 'params');
    await domains.removeAddress(principalOf(ctx).orgId, domainId, address, principalOf(ctx).identityId);
    ctx.body = { address, deleted: true };
  });

  // The identity's own addresses: its inbox address, and those it has on custom domains.
  router.get('/v0/mail/addresses', requireScope('mail:read'), async (ctx) => {
    const identity = await identities.getOwned(principalOf(ctx).orgId, identityIdOf(ctx));
    ctx.body = presentAddresses(identity.emailAddress, await domains.addressesOf(identity._id));
  });
  return router;
}
