import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { parseInput } from '../platform/validate.js';
import type { IdentityService } from '../identities/identity-service.js';
import type { MailDomains } from '../mail/domains/domain-service.js';
import { addressBody, createDomainBody, domainParams } from '../mail/domains/routes.js';
import { presentAddress, presentDomain } from '../mail/domains/present.js';
import { sessionOf, type ConsoleGuards } from './access.js';
import { domainPage, domainsPage } from './views/domains.js';
import { sendHtml, seeOther } from './render.js';

export interface DomainPageDeps {
  domains: MailDomains;
  identities: Pick<IdentityService, 'listAll' | 'getOwned'>;
}

const form = (ctx: Context) => ctx.request.body as Record<string, unknown>;

/** The org's mail domains, for the platform key (as /v0/domains with it): the same operations as the API. */
export function domainPages(router: Router, deps: DomainPageDeps, guards: ConsoleGuards): void {
  const orgOf = (ctx: Context) => sessionOf(ctx).orgId;

  router.get('/domains', guards.session, guards.admin, async (ctx) => {
    sendHtml(ctx, domainsPage({ session: sessionOf(ctx), domains: (await deps.domains.list(orgOf(ctx))).map(presentDomain) }));
  });

  router.post('/domains', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { domain } = parseInput(createDomainBody, { domain: form(ctx).domain }, 'body');
    const created = await deps.domains.create(orgOf(ctx), domain);
    seeOther(ctx, `/console/domains/${created.domain._id}`);
  });

  // Each visit reads the records from DNS, as GET /v0/domains/{id} does.
  router.get('/domains/:domainId', guards.session, guards.admin, async (ctx) => {
    const { domainId } = parseInput(domainParams, ctx.params, 'params');
    const domain = presentDomain(await deps.domains.get(orgOf(ctx), domainId, { check: true }));
    const addresses = (await deps.domains.addressesOn(orgOf(ctx), domainId)).map(presentAddress);
    const identities = (await deps.identities.listAll(orgOf(ctx))).map((i) => ({ identityId: i._id, name: i.name }));
    sendHtml(ctx, domainPage({ session: sessionOf(ctx), domain, addresses, identities }));
  });

  router.post('/domains/:domainId/addresses', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { domainId } = parseInput(domainParams, ctx.params, 'params');
    const body = parseInput(addressBody.extend({ identityId: z.string() }), { localPart: form(ctx).localPart, identityId: form(ctx).identityId }, 'body');
    const identity = await deps.identities.getOwned(orgOf(ctx), body.identityId);
    await deps.domains.addAddress(orgOf(ctx), domainId, body.localPart, identity._id);
    seeOther(ctx, `/console/domains/${domainId}`);
  });

  router.post('/domains/:domainId/rotate', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { domainId } = parseInput(domainParams, ctx.params, 'params');
    await deps.domains.rotateDkim(orgOf(ctx), domainId);
    seeOther(ctx, `/console/domains/${domainId}`);
  });

  router.post('/domains/:domainId/delete', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { domainId } = parseInput(domainParams, ctx.params, 'params');
    await deps.domains.remove(orgOf(ctx), domainId);
    seeOther(ctx, '/console/domains');
  });
}
