import Router from '@koa/router';
import type { Context } from 'koa';
import { authenticate, principalOf, requireTier, type IdentityScopeSource } from '../platform/auth/authenticate.js';
import type { ApiKeyService } from '../platform/auth/api-keys.js';
import { parseInput } from '../platform/validate.js';
import type { ChainService } from '../chain/chain-service.js';
import { PAYMENT_IDENTIFIER } from './payment-identifier.js';
import { findNetwork, isSolanaNetwork, OFFER_RECEIPT } from 'agentgate-x402-wire';
import { facilitatorBody, settleRefused, verifyRefused, type Refusal } from './facilitator-api.js';
import type { SellerAcceptance } from './acceptance.js';
import type { Endpoints } from './endpoints.js';
import type { NetworkPayments } from './payment-service.js';
import type { PaymentSchemes } from './schemes/scheme.js';
import { requireChain } from './chain-required.js';
import type { SvmExactScheme } from './schemes/exact/svm/scheme.js';
import type { SvmExactFacilitator } from './schemes/exact/svm/facilitator.js';
import type { Screening } from '../screening/index.js';
import { screenedNetwork } from '../screening/sources.js';
import type { UsageMeter } from '../usage/index.js';
import { BAZAAR, EXTENSION_RESPONSES_HEADER, extensionResponsesHeader, readDeclaration, type BazaarCatalog, type BazaarStatus } from './bazaar.js';
import { catalogItem, discoveryQuery, endpointItem, matchesFilters, search, searchPage, searchQuery, type DiscoveryItem } from './discovery.js';

/**
 * The standard x402 facilitator API (`{url}/verify`, `{url}/settle`, `{url}/supported`), so sellers on
 * the official SDKs of any language use agentgate through their HTTPFacilitatorClient with
 * `url: {BASE_URL}/v0/x402` and their seller key as `Authorization: Bearer`. It is a second door to the
 * same path as our middleware's redeem: same verification, settlement, records, receipts and webhooks.
 * Each request is answered by its scheme's module (schemes/<name>/facilitator.ts).
 */

export { facilitatorBody } from './facilitator-api.js';

export { discoveryQuery, searchQuery } from './discovery.js';

/** Our reason codes are the spec's for what no scheme has read yet. */
const asIs = (reason: string) => reason;

/** What the facilitator routes use. */
export interface FacilitatorRouteServices {
  keys: ApiKeyService;
  identities: IdentityScopeSource;
  /** The default network's chain (the discovery catalog's prices are in its token). */
  chain: ChainService | undefined;
  acceptance: SellerAcceptance;
  endpoints: Endpoints;
  /** Every network this facilitator settles on, the default one first: a request goes to its network's schemes. */
  networks: readonly Pick<NetworkPayments, 'chain' | 'settlement' | 'schemes'>[];
  /** The default network's schemes (the extensions /supported lists). */
  schemes: PaymentSchemes;
  catalog: BazaarCatalog;
  /** exact on each Solana network this facilitator settles on. */
  solana?: ReadonlyArray<{ scheme: SvmExactScheme; facilitator: SvmExactFacilitator }>;
  /** Sanctions screening: a payment /verify finds valid is screened too (/settle screens when it claims). */
  screening: Screening;
  /** Usage: each /verify and /settle is a facilitator call of the seller's org, checked against its plan's quotas. */
  meter: UsageMeter;
}

export function facilitatorRoutes(services: FacilitatorRouteServices): Router {
  const { acceptance, endpoints, networks, schemes, catalog } = services;
  const solana = services.solana ?? [];
  const router = new Router({ prefix: '/v0/x402' });

  /** A valid verify answer whose payer or payTo screening refuses becomes invalid, for the screening's reason. */
  const screened = async (answer: { status?: number; body: Record<string, unknown> }, request: { paymentRequirements: Record<string, unknown>; paymentPayload: Record<string, unknown> }, orgId: string) => {
    if (answer.body.isValid !== true || !services.screening.enabled) return answer;
    const requirements = request.paymentRequirements as { payTo?: unknown; network?: unknown; scheme?: unknown };
    const payer = typeof answer.body.payer === 'string' ? answer.body.payer : '';
    const refusal = await services.screening.screen(
      [{ role: 'payer', address: payer }, ...(typeof requirements.payTo === 'string' ? [{ role: 'payTo' as const, address: requirements.payTo }] : [])],
      { orgId, network: screenedNetwork(String(requirements.network)), scheme: String(requirements.scheme), door: 'facilitator' },
    );
    return refusal ? { body: { isValid: false, invalidReason: refusal.reason, invalidMessage: refusal.message, payer } } : answer;
  };
  /**
   * Each call is counted for the seller's org. Quotas are checked at /verify only, before anything is
   * read: refusing the /settle of a payment already verified would leave a seller that has served the
   * buyer unpaid (the request limits spare /settle for the same reason). Over the plan's quota of calls a
   * /verify is a 429 quota_exceeded; over its quota of settlements the payment is invalid, for that reason.
   */
  const metered = (checked: boolean) => async (ctx: Context, next: () => Promise<unknown>) => {
    const { orgId } = principalOf(ctx);
    if (checked) await services.meter.enforce(orgId, 'facilitatorCalls');
    services.meter.record(orgId, 'facilitatorCalls');
    const refusal = checked ? await services.meter.refusal(orgId, 'settlements') : undefined;
    if (refusal) {
      parseInput(facilitatorBody, ctx.request.body, 'body'); // bad input is still a 400 first
      ctx.body = verifyRefused(asIs, { reason: 'quota_exceeded', message: refusal.message });
      return;
    }
    await next();
  };
  const sellerOnly = [authenticate(services.keys, services.identities), requireTier('seller')] as const;

  // Public: what this facilitator settles. The official clients read it at start-up.
  router.get('/supported', async (ctx) => {
    // Each network's kinds, with its relayer pool (read from its registry by a process given no keys of its own).
    const offered = await Promise.all(networks.map(async ({ chain, settlement, schemes: theirs }) => {
      const signers = await settlement.signers();
      await theirs.ready();
      return { kinds: theirs.supportedKinds(chain, signers), signers };
    }));
    const signers = [...new Set(offered.flatMap((o) => o.signers))];
    const solanaSigners = [...new Set(solana.flatMap((s) => s.scheme.signers()))];
    ctx.body = {
      kinds: [...offered.flatMap((o) => o.kinds), ...solana.flatMap((s) => s.scheme.supportedKinds())],
      extensions: [...new Set([PAYMENT_IDENTIFIER, 'bazaar', OFFER_RECEIPT, ...schemes.extensions()])],
      signers: { ...(networks.length ? { 'eip155:*': signers } : {}), ...(solanaSigners.length ? { 'solana:*': solanaSigners } : {}) },
    };
  });

  /**
   * The whole discovery catalog, in list order: registered endpoints whose sellers opted in, then
   * resources cataloged from settled payments' bazaar declarations; of sellers that accept payments now.
   */
  const catalogItems = async (): Promise<DiscoveryItem[]> => {
    const chain = requireChain(services.chain);
    const registered = (await endpoints.discoverable((orgId) => acceptance.accepting(orgId))).map(({ endpoint, seller }) => endpointItem(chain, endpoint, seller));
    const cataloged: DiscoveryItem[] = [];
    for (const entry of await catalog.all()) if (await acceptance.accepting(entry.orgId)) cataloged.push(catalogItem(entry));
    return [...registered, ...cataloged];
  };

  // Public: the bazaar discovery list (offset pages).
  router.get('/discovery/resources', async (ctx) => {
    requireChain(services.chain);
    const query = parseInput(discoveryQuery, ctx.query, 'query');
    const all = (await catalogItems()).filter((item) => matchesFilters(item, query));
    ctx.body = {
      x402Version: 2,
      items: all.slice(query.offset, query.offset + query.limit),
      pagination: { limit: query.limit, offset: query.offset, total: all.length },
    };
  });

  // Public: the bazaar search (a query, the same filters, cursor pages).
  router.get('/discovery/search', async (ctx) => {
    requireChain(services.chain);
    const query = parseInput(searchQuery, ctx.query, 'query');
    const matches = search((await catalogItems()).filter((item) => matchesFilters(item, query)), query.query);
    ctx.body = searchPage(matches, query.cursor ?? 0, query.limit);
  });

  /** The payload's bazaar declaration, when it carries one (v2 only: v1 has no extensions). */
  const declarationOf = (request: { x402Version: number; paymentPayload: Record<string, unknown> }) => {
    const extensions = request.paymentPayload.extensions as Record<string, unknown> | undefined;
    if (request.x402Version !== 2 || !extensions || typeof extensions !== 'object' || !(BAZAAR in extensions)) return undefined;
    return readDeclaration(extensions[BAZAAR]);
  };
  const tellBazaar = (ctx: Context, status: BazaarStatus) => ctx.set(EXTENSION_RESPONSES_HEADER, extensionResponsesHeader(status));

  /** The request, its network as answers name it, and the accepting seller and its scheme (or why not). */
  const prepare = async (ctx: Context) => {
    requireChain(services.chain);
    const request = parseInput(facilitatorBody, ctx.request.body, 'body');
    // The request's network picks the chain, the engine and the schemes that answer it; a network this
    // facilitator does not settle on is the default network's schemes' to refuse, in each scheme's own
    // terms (invalid_exact_evm_network_mismatch, ...).
    const asked = typeof request.paymentRequirements.network === 'string' ? findNetwork(request.paymentRequirements.network)?.chainId : undefined;
    const { chain, schemes: theirs } = networks.find((n) => n.chain.chainId === asked) ?? networks[0]!;
    const seller = await acceptance.accepting(principalOf(ctx).orgId);
    const network = request.x402Version === 1 ? chain.network : chain.caip2;
    if (!seller) return { network, refused: { reason: 'invalid_payment_requirements', message: 'payment acceptance is not turned on for this seller (PUT /v0/payments/acceptance)' } as Refusal };
    const scheme = theirs.forRequest(request);
    const unavailable = theirs.refusal(scheme);
    if (unavailable) return { network, refused: { reason: 'unsupported_scheme', message: unavailable } as Refusal };
    return { network, request, seller, scheme, refused: undefined };
  };

  /**
   * A request for a Solana network goes to that network's exact facilitator (a Solana network this
   * facilitator does not settle on is refused here); undefined: an EVM request.
   */
  const solanaRequest = async (ctx: Context, answer: (facilitator: SvmExactFacilitator, request: ReturnType<typeof parseInput<typeof facilitatorBody>>, seller: NonNullable<Awaited<ReturnType<SellerAcceptance['accepting']>>>) => Promise<{ status?: number; body: Record<string, unknown> }>, refuse: (network: string, refusal: Refusal) => Record<string, unknown>) => {
    const request = parseInput(facilitatorBody, ctx.request.body, 'body');
    const named = request.paymentRequirements.network;
    if (!isSolanaNetwork(named)) return false;
    const served = solana.find((s) => s.scheme.chain.caip2 === named || s.scheme.chain.network === named);
    const seller = await acceptance.accepting(principalOf(ctx).orgId);
    if (!served) ctx.body = refuse(String(named), { reason: 'invalid_exact_svm_network_mismatch', message: `this facilitator does not settle on ${String(named)}${solana.length ? ` (it does on ${solana.map((s) => s.scheme.chain.caip2).join(', ')})` : ''}` });
    else if (!seller) ctx.body = refuse(served.facilitator.networkOf(request), { reason: 'invalid_payment_requirements', message: 'payment acceptance is not turned on for this seller (PUT /v0/payments/acceptance)' });
    else {
      const answered = await answer(served.facilitator, request, seller);
      if (answered.status) ctx.status = answered.status;
      ctx.body = answered.body;
    }
    return true;
  };

  router.post('/verify', ...sellerOnly, metered(true), async (ctx) => {
    if (await solanaRequest(ctx, async (f, request, seller) => screened(await f.verify(request, seller), request, seller._id), (_, refusal) => verifyRefused(asIs, refusal))) return;
    const prepared = await prepare(ctx);
    if (prepared.refused) {
      ctx.body = verifyRefused(asIs, prepared.refused);
      return;
    }
    const answer = await screened(await prepared.scheme.verifyRequest(prepared.request, prepared.seller, prepared.network), prepared.request, prepared.seller._id);
    const declared = declarationOf(prepared.request);
    // Verify catalogs nothing: a valid declaration on a valid payment is cataloged when it settles.
    if (declared) {
      tellBazaar(ctx, !declared.ok ? { status: 'rejected', rejectedReason: declared.reason }
        : answer.body.isValid === true ? { status: 'processing' } : { status: 'rejected', rejectedReason: 'the payment is not valid; nothing is cataloged' });
    }
    if (answer.status) ctx.status = answer.status;
    ctx.body = answer.body;
  });

  router.post('/settle', ...sellerOnly, metered(false), async (ctx) => {
    if (await solanaRequest(ctx, (f, request, seller) => f.settle(request, seller), (network, refusal) => settleRefused(asIs, network, refusal))) return;
    const prepared = await prepare(ctx);
    if (prepared.refused) {
      ctx.body = settleRefused(asIs, prepared.network, prepared.refused);
      return;
    }
    const answer = await prepared.scheme.settleRequest(prepared.request, prepared.seller, prepared.network);
    const declared = declarationOf(prepared.request);
    if (declared) {
      if (!declared.ok) tellBazaar(ctx, { status: 'rejected', rejectedReason: declared.reason });
      else if (answer.body.success !== true) tellBazaar(ctx, { status: 'rejected', rejectedReason: 'the payment did not settle; nothing is cataloged' });
      else {
        const { paymentPayload, paymentRequirements } = prepared.request;
        const resource = (paymentPayload.resource && typeof paymentPayload.resource === 'object' ? paymentPayload.resource : {}) as Record<string, unknown>;
        tellBazaar(ctx, await catalog.record({ orgId: prepared.seller._id, declaration: declared.declaration, resource, accepted: paymentRequirements }));
      }
    }
    if (answer.status) ctx.status = answer.status;
    ctx.body = answer.body;
  });

  return router;
}
