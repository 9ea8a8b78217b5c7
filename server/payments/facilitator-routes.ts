import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { authenticate, principalOf, requireTier, type IdentityScopeSource } from '../platform/auth/authenticate.js';
import type { ApiKeyService } from '../platform/auth/api-keys.js';
import { parseInput } from '../platform/validate.js';
import { wholeNumberParam } from '../platform/pagination.js';
import type { ChainService } from '../chain/chain-service.js';
import { PAYMENT_IDENTIFIER } from './payment-identifier.js';
import { OFFER_RECEIPT } from '../../middleware/offer-receipt.js';
import { facilitatorBody, settleRefused, verifyRefused, type Refusal } from './facilitator-api.js';
import type { SellerAcceptance } from './acceptance.js';
import type { Endpoints } from './endpoints.js';
import type { PaymentSettlement } from './settlement-path.js';
import type { PaymentSchemes } from './schemes/scheme.js';
import { requireChain } from './chain-required.js';

/**
 * The standard x402 facilitator API (`{url}/verify`, `{url}/settle`, `{url}/supported`), so sellers on
 * the official SDKs of any language use agentgate through their HTTPFacilitatorClient with
 * `url: {BASE_URL}/v0/x402` and their seller key as `Authorization: Bearer`. It is a second door to the
 * same path as our middleware's redeem: same verification, settlement, records, receipts and webhooks.
 * Each request is answered by its scheme's module (schemes/<name>/facilitator.ts).
 */

export { facilitatorBody } from './facilitator-api.js';

export const discoveryQuery = z.object({
  type: z.enum(['http', 'mcp']).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: wholeNumberParam(0, 1_000_000).default(0),
});

/** An MCP tool is registered as mcp://tool/<name>; everything else is an HTTP resource. */
const resourceType = (url: string) => (url.startsWith('mcp://') ? 'mcp' : 'http');

/** Our reason codes are the spec's for what no scheme has read yet. */
const asIs = (reason: string) => reason;

/** What the facilitator routes use. */
export interface FacilitatorRouteServices {
  keys: ApiKeyService;
  identities: IdentityScopeSource;
  chain: ChainService | undefined;
  acceptance: SellerAcceptance;
  endpoints: Endpoints;
  settlement: PaymentSettlement;
  schemes: PaymentSchemes;
}

export function facilitatorRoutes(services: FacilitatorRouteServices): Router {
  const { acceptance, endpoints, settlement, schemes } = services;
  const router = new Router({ prefix: '/v0/x402' });
  const sellerOnly = [authenticate(services.keys, services.identities), requireTier('seller')] as const;

  // Public: what this facilitator settles. The official clients read it at start-up.
  router.get('/supported', async (ctx) => {
    const chain = services.chain;
    // The relayer pool (read from the registry by a process given no keys of its own).
    const signers = chain ? await settlement.signers() : [];
    if (chain) await schemes.ready();
    ctx.body = {
      kinds: chain ? schemes.supportedKinds(chain, signers) : [],
      extensions: [PAYMENT_IDENTIFIER, 'bazaar', OFFER_RECEIPT, ...schemes.extensions()],
      signers: chain ? { [`${chain.caip2.split(':')[0]}:*`]: signers } : {},
    };
  });

  // Public: the bazaar discovery list of registered endpoints whose sellers opted in.
  router.get('/discovery/resources', async (ctx) => {
    const chain = requireChain(services.chain);
    const query = parseInput(discoveryQuery, ctx.query, 'query');
    const all = (await endpoints.discoverable((orgId) => acceptance.accepting(orgId))).filter(({ endpoint }) => !query.type || resourceType(endpoint.url) === query.type);
    const page = all.slice(query.offset, query.offset + query.limit);
    ctx.body = {
      x402Version: 2,
      items: page.map(({ endpoint, seller }) => ({
        resource: endpoint.url,
        type: resourceType(endpoint.url),
        x402Version: 2,
        accepts: [{
          scheme: 'exact', network: chain.caip2, amount: endpoint.priceAtomic, asset: chain.usdc.address, payTo: seller.payTo,
          maxTimeoutSeconds: 60, extra: { name: chain.usdc.name, version: chain.usdc.version },
        }],
        lastUpdated: endpoint.updatedAt.toISOString(),
        metadata: {
          description: endpoint.description,
          priceUsdc: endpoint.priceUsdc,
          // dynamic: each request is priced by the seller (its 402 says how much), at most priceUsdc.
          pricing: endpoint.pricing ?? 'fixed',
          ...(endpoint.inputSchemaJson ? { inputSchema: JSON.parse(endpoint.inputSchemaJson) as unknown } : {}),
          ...(endpoint.outputSchemaJson ? { outputSchema: JSON.parse(endpoint.outputSchemaJson) as unknown } : {}),
        },
      })),
      pagination: { limit: query.limit, offset: query.offset, total: all.length },
    };
  });

  /** The request, its network as answers name it, and the accepting seller and its scheme (or why not). */
  const prepare = async (ctx: Context) => {
    const chain = requireChain(services.chain);
    const request = parseInput(facilitatorBody, ctx.request.body, 'body');
    const seller = await acceptance.accepting(principalOf(ctx).orgId);
    const network = request.x402Version === 1 ? chain.network : chain.caip2;
    if (!seller) return { network, refused: { reason: 'invalid_payment_requirements', message: 'payment acceptance is not turned on for this seller (PUT /v0/payments/acceptance)' } as Refusal };
    return { network, request, seller, scheme: schemes.forRequest(request), refused: undefined };
  };

  router.post('/verify', ...sellerOnly, async (ctx) => {
    const prepared = await prepare(ctx);
    if (prepared.refused) {
      ctx.body = verifyRefused(asIs, prepared.refused);
      return;
    }
    const answer = await prepared.scheme.verifyRequest(prepared.request, prepared.seller, prepared.network);
    if (answer.status) ctx.status = answer.status;
    ctx.body = answer.body;
  });

  router.post('/settle', ...sellerOnly, async (ctx) => {
    const prepared = await prepare(ctx);
    if (prepared.refused) {
      ctx.body = settleRefused(asIs, prepared.network, prepared.refused);
      return;
    }
    const answer = await prepared.scheme.settleRequest(prepared.request, prepared.seller, prepared.network);
    if (answer.status) ctx.status = answer.status;
    ctx.body = answer.body;
  });

  return router;
}
