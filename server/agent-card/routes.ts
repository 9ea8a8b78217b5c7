import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { AccountService } from '../accounts/account-service.js';
import type { DidService } from '../did/did-service.js';
import type { ServiceKey } from '../did/service-key.js';
import type { IdentityService } from '../identities/identity-service.js';
import type { SellerAcceptance } from '../payments/acceptance.js';
import type { Endpoints } from '../payments/endpoints.js';
import type { Config } from '../platform/config.js';
import { notFound } from '../platform/errors.js';
import type { ToolDefinition } from '../platform/mcp-tool.js';
import { etagOf, signCard, type AgentCard } from './a2a.js';
import { orgCard, serviceCard } from './cards.js';

export const orgCardParams = z.object({ orgId: z.string().regex(/^org_[a-z0-9]{1,64}$/, 'must be an org id') });

/** Cards change rarely (A2A 8.6): clients may keep one five minutes, then ask again with If-None-Match. */
const MAX_AGE_SECONDS = 300;

/** The JWKS of the key that signs the cards, the `jku` of their signatures. */
export const JWKS_PATH = '/.well-known/jwks.json';

/**
 * RFC 9110 13.1.2: If-None-Match fails (304 for a GET or HEAD) when it is `*` or lists a tag that weakly
 * matches the current one. Not koa's ctx.fresh, which answers 200 to any request with
 * `Cache-Control: no-cache`, the header fetch() adds to every conditional request it sends.
 */
function noneMatch(header: string, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  const opaque = (tag: string) => tag.trim().replace(/^W\//, '');
  return header.split(',').some((tag) => opaque(tag) === opaque(etag));
}

/** A card as it is served: signed, with the ETag of its bytes. */
interface PublishedCard { card: AgentCard; etag: string }

/** Serves a signed card with Cache-Control and ETag, or 304 when the client's If-None-Match names it. */
function publishCard(ctx: Context, { card, etag }: PublishedCard) {
  ctx.set('Access-Control-Allow-Origin', '*');
  // A browser's script may read the tag to revalidate (ETag is not a CORS-safelisted response header).
  ctx.set('Access-Control-Expose-Headers', 'ETag');
  ctx.set('Cache-Control', `public, max-age=${MAX_AGE_SECONDS}`);
  ctx.set('ETag', etag);
  ctx.status = 200;
  ctx.type = 'application/json';
  if (noneMatch(ctx.get('If-None-Match'), etag)) {
    ctx.status = 304;
    return;
  }
  ctx.body = card;
}

export interface AgentCardRouteDeps {
  config: Pick<Config, 'BASE_URL'>;
  accounts: AccountService;
  identities: IdentityService;
  did: DidService;
  serviceKey: ServiceKey;
  endpoints: Endpoints;
  acceptance: SellerAcceptance;
  /** The MCP tools the service card lists as skills (the registry's, server/tools.ts). */
  tools: ReadonlyArray<ToolDefinition<never>>;
}

/**
 * A2A v1.0 agent cards, unauthenticated and unversioned (their paths are fixed: A2A 8.2, SPEC 1.7):
 * the service's at /.well-known/agent-card.json and each org's at /.well-known/agents/{orgId}, both
 * signed with the service's did:web key (A2A 8.4).
 */
export function agentCardRoutes({ config, accounts, identities, did, serviceKey, endpoints, acceptance, tools }: AgentCardRouteDeps): Router {
  const router = new Router();
  const base = config.BASE_URL;
  const jwksUrl = `${base}${JWKS_PATH}`;
  const published = async (card: AgentCard): Promise<PublishedCard> => {
    const signed = await signCard(card, serviceKey, jwksUrl);
    return { card: signed, etag: etagOf(signed) };
  };
  // The service's card depends on the configuration and the key only: signed and tagged once per process
  // (every process signs it to the same bytes).
  let publishedServiceCard: Promise<PublishedCard> | undefined;

  router.get('/.well-known/agent-card.json', async (ctx) => {
    publishedServiceCard ??= published(serviceCard({ baseUrl: base, tools }));
    publishCard(ctx, await publishedServiceCard);
  });

  router.get('/.well-known/agents/:orgId', async (ctx) => {
    const parsed = orgCardParams.safeParse(ctx.params);
    const org = parsed.success ? await accounts.getOrg(parsed.data.orgId) : null;
    if (!org) throw notFound('Agent card not found');
    const [live, seller] = await Promise.all([identities.listAll(org._id), acceptance.accepting(org._id)]);
    const paidEndpoints = seller ? await endpoints.discoverableOf(org._id) : [];
    const card = orgCard({ baseUrl: base, org, identities: live, didOf: (id) => did.didOf(id), paidEndpoints });
    publishCard(ctx, await published(card));
  });

  return router;
}
