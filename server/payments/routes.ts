import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { anyNetworkName, networkName } from '../platform/network-name.js';
import { findSolanaNetwork, SOLANA_ADDRESS } from 'agentgate-x402-wire';
import { authenticatedRouter, principalOf, requireTier, type IdentityScopeSource } from '../platform/auth/authenticate.js';
import type { ApiKeyService } from '../platform/auth/api-keys.js';
import type { UsageTracker } from '../platform/usage.js';
import type { ActivityLog } from '../platform/activity-log.js';
import { parseInput } from '../platform/validate.js';
import { decodeCursor } from '../platform/pagination.js';
import { AppError, badRequest, notFound } from '../platform/errors.js';
import { parseCharge } from 'agentgate-x402-wire';
import { presentEndpoint, presentPayment } from './present.js';
import { keyUsage } from '../platform/usage.js';
import type { EndpointRegistration } from './endpoint-registration.js';
import { issueSellerKey, revokeSellerKey } from './seller-keys.js';
import { MAX_HOLD_SECONDS, type HoldService } from './holds.js';
import type { SellerAcceptance } from './acceptance.js';
import type { SellerAccountDoc } from './models.js';
import type { Endpoints } from './endpoints.js';
import type { VoucherBook } from './schemes/batch-settlement/evm/voucher-book.js';
import type { ChannelCalls } from './schemes/batch-settlement/evm/calls.js';
import { presentChannel, presentChannelCall } from './schemes/batch-settlement/evm/present.js';
import { VOUCHER_ID_PATTERN } from './schemes/batch-settlement/evm/voucher-sequence.js';
import type { PaymentRecords } from './records.js';
import type { Redemption } from './redemption.js';
import type { SignInWithX } from './sign-in-with-x.js';
import type { PaymentRefunds } from './refunds.js';

const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed address');
const price = z.string().trim().min(1).max(32);
export const acceptanceBody = z.object({
  enabled: z.boolean(),
  payTo: address,
  // Addresses a route may pay per request instead of payTo (the middleware's payTo function).
  payees: z.array(address).max(20).optional(),
  // Where another network's payments go ({"polygon-amoy": "0x…", "solana-devnet": "base58…"}, by v1 name
  // or CAIP-2 id); absent: payTo. A Solana network has no default: its routes are offered only with one.
  payToByNetwork: z.record(z.string().max(64), z.string().max(64)).refine((m) => Object.keys(m).length <= 30, 'at most 30 networks')
    .transform((m, ctx) => {
      const out: Record<string, string> = {};
      for (const [name, payTo] of Object.entries(m)) {
        const solana = findSolanaNetwork(name);
        if (solana) {
          if (SOLANA_ADDRESS.test(payTo)) out[solana.name] = payTo;
          else ctx.addIssue({ code: 'custom', path: [name], message: `${name}: must be a base58 Solana address` });
          continue;
        }
        const network = networkName.safeParse(name);
        if (!network.success) ctx.addIssue({ code: 'custom', message: `${name} must be a network by v1 name or CAIP-2 id` });
        else if (!address.safeParse(payTo).success) ctx.addIssue({ code: 'custom', path: [name], message: `${name}: must be a 0x-prefixed address` });
        else out[network.data] = payTo;
      }
      return out;
    }).optional(),
  // How often the backend claims this seller's channel calls on chain (one transaction for all its
  // channels): longer saves gas, shorter gets the money sooner. Absent: every sweep round.
  channelClaimEverySeconds: z.number().int().min(10).max(86_400).optional(),
}).strict();
export const sellerKeyBody = z.object({ name: z.string().trim().min(1).max(64).optional() }).strict();
/** A JSON Schema a seller declares for discovery: any JSON object, stored as text, at most 16 KiB. */
const declaredSchema = z.record(z.string(), z.unknown()).refine((s) => JSON.stringify(s).length <= 16_384, 'must be at most 16 KiB of JSON');
const discovery = {
  discoverable: z.boolean().optional(),
  inputSchema: declaredSchema.nullable().optional(),
  outputSchema: declaredSchema.nullable().optional(),
};
export const endpointBody = z.object({
  url: z.string().min(1).max(2048),
  // One of the two: a fixed price, or the most a dynamically priced request may cost.
  priceUsdc: price.optional(),
  maxPriceUsdc: price.optional(),
  description: z.string().max(500).optional(),
  webhookUrl: z.url({ protocol: /^https?$/ }).max(2048).optional(),
  // The method the URL is checked with (its 402): a route that answers only POST is asked by POST, with no body.
  method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).optional(),
  ...discovery,
  // Dev mode only: register before the seller's server is up (agentgate dev, tests).
  skipUrlCheck: z.boolean().optional(),
}).strict().refine((b) => (b.priceUsdc === undefined) !== (b.maxPriceUsdc === undefined), { message: 'give priceUsdc (a fixed price) or maxPriceUsdc (a dynamic price, at most this), not both', path: ['priceUsdc'] });
export const endpointPatch = z.object({
  priceUsdc: price.optional(),
  maxPriceUsdc: price.optional(),
  description: z.string().max(500).optional(),
  webhookUrl: z.url({ protocol: /^https?$/ }).max(2048).nullable().optional(),
  ...discovery,
}).strict()
  .refine((b) => Object.keys(b).length > 0, 'give at least one of priceUsdc, maxPriceUsdc, description, webhookUrl, discoverable, inputSchema, outputSchema')
  .refine((b) => b.priceUsdc === undefined || b.maxPriceUsdc === undefined, { message: 'give priceUsdc (a fixed price) or maxPriceUsdc (a dynamic price), not both', path: ['priceUsdc'] });
export const redeemBody = z.object({
  paymentHeader: z.string().min(1).max(16_384),
  resource: z.string().min(1).max(2048),
  // What the middleware asked this request for: the price (fixed or computed) and, if not the default, the payee.
  amount: z.string().min(1).max(32),
  payTo: address.optional(),
}).strict();
/** Sign-In-With-X: the buyer's header as sent, and the resource the middleware protects. */
export const signInBody = z.object({
  header: z.string().min(1).max(16_384),
  resource: z.string().url().max(2048),
}).strict();
export const holdBody = redeemBody.extend({ holdSeconds: z.number().int().min(1).max(MAX_HOLD_SECONDS).optional() }).strict();
/** upto holds: what the request used, in USDC ("0.0123"), at most the permit's maximum; absent means 0. */
export const captureBody = z.object({ amount: z.string().min(1).max(32).optional() }).strict();
/** A refund: part of what was captured (USDC, "0.25"; absent: all that is left), and why. */
export const refundBody = z.object({ amount: z.string().min(1).max(32).optional(), reason: z.string().trim().min(1).max(500) }).strict();
/** Idempotency-Key: a repeat with the same key answers the first refund. */
export const idempotencyKeyHeader = z.string().regex(/^[\x21-\x7e]{1,128}$/, 'must be 1 to 128 visible ASCII characters').optional();
export const listQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(50), pageToken: z.string().optional() });
/** GET /v0/payments: a page, of one network's payments when `network` is given. */
export const paymentListQuery = listQuery.extend({ network: anyNetworkName.optional() });
export const idParam = z.object({ id: z.string().regex(/^[a-z]+_[a-z0-9]{1,64}$/, 'malformed id') });

/** What the payment routes use. */
export interface PaymentRouteServices {
  keys: ApiKeyService;
  identities: IdentityScopeSource;
  usage: UsageTracker;
  logs: ActivityLog;
  acceptance: SellerAcceptance;
  endpoints: Endpoints;
  registration: EndpointRegistration;
  redemption: Redemption;
  holds: HoldService;
  records: PaymentRecords;
  /** batch-settlement calls through our middleware: channel state and vouchers in the database. */
  channels: VoucherBook;
  /** Those channels and their calls as records (the seller's and ops' view). */
  channelCalls: ChannelCalls;
  signInWithX: SignInWithX;
  refunds: PaymentRefunds;
  /** skipUrlCheck is for dev mode only. */
  devMode: boolean;
}

/**
 * Seller set-up (platform key: the "console" of SPEC 4.5), the facilitator (seller key `loid-`), and
 * payment records for the seller and for ops (both key kinds of the org).
 */
/**
 * A channel call: the redeem body, held while the handler runs when `hold` (captured or released after it);
 * `byUsage`: its route is priced by usage (the amount is the maximum; the capture names what was used).
 */
export const channelPayBody = redeemBody.extend({ hold: z.boolean().optional(), holdSeconds: z.number().int().min(1).max(MAX_HOLD_SECONDS).optional(), byUsage: z.boolean().optional() }).strict()
  .refine((b) => !b.byUsage || b.hold, { message: 'a call priced by usage is held while its handler runs (hold: true): its charge is known only after it', path: ['byUsage'] });
/** A held channel call's id: `<channel id>:<the voucher's number in the channel, 12 digits>:<hold token>`. */
export const voucherIdParam = z.object({ id: z.string().regex(new RegExp(`^${VOUCHER_ID_PATTERN}:[0-9a-f]{16}$`), 'malformed hold id') });
const DEFAULT_CHANNEL_HOLD_SECONDS = 120;
/** A batch-settlement channel: its id, the hash of its config (0x and 64 hex digits). */
export const channelIdParam = z.object({ channelId: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a channel id (0x and 64 hex digits)').transform((id) => id.toLowerCase()) });
/** A channel call's record id (`chc_…`): GET /v0/payments/{id} answers it like a payment. */
const isChannelCallId = (id: string) => id.startsWith('chc_');

/** A channel's call is priced as an exact one (a fixed or dynamic price per call), x402 v2 only. */
const CHANNEL_RULES = { pricedByUsage: false, paidInV1: false } as const;

const presentAcceptance = (doc: SellerAccountDoc) => ({
  enabled: doc.enabled, payTo: doc.payTo, payees: doc.payees ?? [], payToByNetwork: doc.payToByNetwork ?? {}, channelClaimEverySeconds: doc.channelClaimEverySeconds ?? null, updatedAt: doc.updatedAt.toISOString(),
});

export function paymentRoutes(services: PaymentRouteServices): Router {
  const { keys, usage, acceptance, endpoints, registration, redemption, holds, records, refunds } = services;
  const router = authenticatedRouter(services, { prefix: '/v0/payments' });
  const orgOf = (ctx: Context) => principalOf(ctx).orgId;
  const platform = requireTier('platform');
  const seller = requireTier('seller');
  const sellerOrOps = requireTier('seller', 'platform');

  router.put('/acceptance', platform, async (ctx) => {
    const body = parseInput(acceptanceBody, ctx.request.body, 'body');
    const doc = await acceptance.set(orgOf(ctx), body);
    ctx.body = presentAcceptance(doc);
  });
  router.get('/acceptance', sellerOrOps, async (ctx) => {
    const doc = await acceptance.get(orgOf(ctx));
    ctx.body = doc ? presentAcceptance(doc) : { enabled: false, payTo: null, payees: [], payToByNetwork: {}, channelClaimEverySeconds: null };
  });

  router.post('/seller-keys', platform, async (ctx) => {
    const body = parseInput(sellerKeyBody, ctx.request.body, 'body');
    const key = await issueSellerKey(services, orgOf(ctx), body.name ?? 'seller');
    ctx.status = 201;
    ctx.body = { keyId: key.keyId, apiKey: key.rawKey, apiKeyPrefix: key.prefix, name: body.name ?? 'seller' };
  });
  router.get('/seller-keys', platform, async (ctx) => {
    const sellerKeys = await keys.list({ orgId: orgOf(ctx), tier: 'seller' });
    const used = await usage.read(sellerKeys.map((k) => keyUsage(k._id)));
    ctx.body = { keys: sellerKeys.map((k) => ({ keyId: k._id, apiKeyPrefix: k.prefix, name: k.name ?? null, createdAt: k.createdAt.toISOString(), lastUsedAt: used.get(keyUsage(k._id))?.lastUsedAt?.toISOString() ?? null, revokedAt: k.revokedAt?.toISOString() ?? null })) };
  });
  router.delete('/seller-keys/:id', platform, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    await revokeSellerKey(services, orgOf(ctx), id);
    ctx.body = { keyId: id, revoked: true };
  });

  router.post('/endpoints', platform, async (ctx) => {
    const body = parseInput(endpointBody, ctx.request.body, 'body');
    if (body.skipUrlCheck && !services.devMode) throw new AppError(400, 'validation_error', 'body.skipUrlCheck: only allowed in dev mode');
    const { endpoint, webhookSecret } = await registration.register(orgOf(ctx), body);
    ctx.status = 201;
    ctx.body = { ...presentEndpoint(endpoint), ...(webhookSecret ? { webhookSecret } : {}) };
  });
  router.get('/endpoints', sellerOrOps, async (ctx) => {
    ctx.body = { endpoints: (await endpoints.list(orgOf(ctx))).map(presentEndpoint) };
  });
  router.get('/endpoints/:id', sellerOrOps, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    ctx.body = presentEndpoint(await endpoints.get(orgOf(ctx), id));
  });
  router.patch('/endpoints/:id', platform, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const body = parseInput(endpointPatch, ctx.request.body, 'body');
    const { endpoint, webhookSecret } = await registration.update(orgOf(ctx), id, body);
    ctx.body = { ...presentEndpoint(endpoint), ...(webhookSecret ? { webhookSecret } : {}) };
  });
  router.post('/endpoints/:id/rotate-webhook-secret', platform, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    ctx.body = await registration.rotateWebhookSecret(orgOf(ctx), id);
  });
  router.delete('/endpoints/:id', platform, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    await endpoints.delete(orgOf(ctx), id);
    ctx.body = { id, deleted: true };
  });

  router.get('/settings', seller, async (ctx) => {
    ctx.body = await acceptance.settingsFor(orgOf(ctx));
  });
  router.post('/redeem', seller, async (ctx) => {
    const body = parseInput(redeemBody, ctx.request.body, 'body');
    const outcome = await redemption.redeem(orgOf(ctx), body);
    ctx.status = outcome.ok ? 200 : 402;
    ctx.body = outcome.ok ? outcome : { ...outcome, status: 402 };
  });

  // A batch-settlement call: a deposit with its first voucher, or a voucher, accepted once (the channel's
  // state is in the database). A refusal carries the channel's state so the buyer can sign the right voucher.
  router.post('/channels/pay', seller, async (ctx) => {
    const { hold, holdSeconds, byUsage, ...body } = parseInput(channelPayBody, ctx.request.body, 'body');
    const prepared = await redemption.prepareTerms(orgOf(ctx), body, CHANNEL_RULES);
    const outcome = 'refused' in prepared ? prepared.refused : await services.channels.pay(prepared.seller, prepared.terms, body.paymentHeader, hold ? { seconds: holdSeconds ?? DEFAULT_CHANNEL_HOLD_SECONDS, ...(byUsage ? { byUsage } : {}) } : undefined);
    ctx.status = outcome.ok ? 200 : 402;
    ctx.body = outcome.ok ? outcome : { ...outcome, status: 402 };
  });
  // A held call's voucher: captured when the handler succeeded (charged), released when it failed (not
  // charged). A call priced by usage is captured for what it used (`amount`, USDC, at most its maximum).
  router.post('/channels/vouchers/:id/capture', seller, async (ctx) => {
    const { id } = parseInput(voucherIdParam, ctx.params, 'params');
    const { amount } = parseInput(captureBody, ctx.request.body ?? {}, 'body');
    let usage: bigint | undefined;
    try { usage = amount === undefined ? undefined : parseCharge(amount); } catch (err) { throw badRequest(`body.amount: ${(err as Error).message}`); }
    const outcome = await services.channels.capture(orgOf(ctx), id, usage);
    ctx.status = outcome.ok ? 200 : 409;
    ctx.body = outcome.ok ? outcome : { ...outcome, status: 409 };
  });
  router.post('/channels/vouchers/:id/release', seller, async (ctx) => {
    const { id } = parseInput(voucherIdParam, ctx.params, 'params');
    ctx.body = await services.channels.release(orgOf(ctx), id);
  });
  // Sign-In-With-X: a buyer who paid for the resource reaches it again by signing in with the paying wallet.
  // A refusal is an answer (200, granted false), not an error: the middleware then asks for payment.
  router.post('/sign-in-with-x', seller, async (ctx) => {
    const body = parseInput(signInBody, ctx.request.body, 'body');
    ctx.body = await services.signInWithX.signIn(orgOf(ctx), body);
  });

  // Settle after the handler: hold (verify and claim), then capture (settle) or release (nothing charged).
  router.post('/holds', seller, async (ctx) => {
    const body = parseInput(holdBody, ctx.request.body, 'body');
    const outcome = await holds.hold(orgOf(ctx), body);
    ctx.status = outcome.ok ? 201 : 402;
    ctx.body = outcome.ok ? outcome : { ...outcome, status: 402 };
  });
  router.post('/holds/:id/capture', seller, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const { amount } = parseInput(captureBody, ctx.request.body ?? {}, 'body');
    const outcome = await holds.capture(orgOf(ctx), id, amount);
    ctx.status = outcome.ok ? 200 : 402;
    ctx.body = outcome.ok ? outcome : { ...outcome, status: 402 };
  });
  router.post('/holds/:id/release', seller, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    ctx.body = await holds.release(orgOf(ctx), id);
  });

  // Channels sold through our middleware and their paid calls (one record per call, with its signed
  // receipt and, once claimed, the claim transaction). Not in GET /v0/payments: a channel's calls come
  // hundreds a minute and move no money each; the list of payments stays the list of transfers.
  router.get('/channels', sellerOrOps, async (ctx) => {
    const query = parseInput(listQuery, ctx.query, 'query');
    const page = await services.channelCalls.listChannels(orgOf(ctx), query.limit, query.pageToken ? decodeCursor(query.pageToken) : undefined);
    ctx.body = { channels: page.items.map(presentChannel), count: page.items.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  });
  router.get('/channels/:channelId', sellerOrOps, async (ctx) => {
    const { channelId } = parseInput(channelIdParam, ctx.params, 'params');
    ctx.body = presentChannel(await services.channelCalls.summary(orgOf(ctx), channelId));
  });
  router.get('/channels/:channelId/calls', sellerOrOps, async (ctx) => {
    const { channelId } = parseInput(channelIdParam, ctx.params, 'params');
    const query = parseInput(listQuery, ctx.query, 'query');
    const page = await services.channelCalls.calls(orgOf(ctx), channelId, query.limit, query.pageToken ? decodeCursor(query.pageToken) : undefined);
    ctx.body = { calls: page.items.map((c) => presentChannelCall(c)), count: page.items.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  });

  router.get('/', sellerOrOps, async (ctx) => {
    const query = parseInput(paymentListQuery, ctx.query, 'query');
    const page = await records.list(orgOf(ctx), query.limit, query.pageToken ? decodeCursor(query.pageToken) : undefined, query.network ? { network: query.network } : {});
    ctx.body = { payments: page.items.map((p) => presentPayment(p)), count: page.items.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  });
  // Refunds: platform keys (the console, the CLI) and seller keys (the seller's own code, its agents).
  router.post('/:id/refund', sellerOrOps, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const body = parseInput(refundBody, ctx.request.body ?? {}, 'body');
    const key = idempotencyKeyHeader.safeParse(ctx.get('Idempotency-Key') || undefined);
    if (!key.success) throw new AppError(400, 'validation_error', `header.Idempotency-Key: ${key.error.issues[0]?.message ?? 'invalid'}`);
    const idempotencyKey = key.data;
    ctx.body = await refunds.refund(orgOf(ctx), id, { ...body, ...(idempotencyKey ? { idempotencyKey } : {}) });
  });
  router.get('/:id/refunds', sellerOrOps, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    ctx.body = { refunds: await refunds.list(orgOf(ctx), id) };
  });
  // Other areas' routes under /v0/payments (pay, mandates, activity) must be mounted before this router.
  router.get('/:id', sellerOrOps, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    if (isChannelCallId(id)) {
      const call = await services.channelCalls.find(orgOf(ctx), id);
      if (!call) throw notFound('Payment not found');
      ctx.body = presentChannelCall(call, true);
      return;
    }
    ctx.body = presentPayment(await records.get(orgOf(ctx), id), true);
  });
  return router;
}

/**
 * POST /v0/webhooks/endpoints/{id}/rotate-secret: the same operation as POST /v0/payments/endpoints/{id}/
 * rotate-webhook-secret, where a webhook user looks for it (mounted before the identities' mail webhook
 * routes, whose /v0/webhooks/{webhookId} would otherwise see it).
 */
export function endpointWebhookRoutes(services: Pick<PaymentRouteServices, 'keys' | 'identities' | 'registration'>): Router {
  const router = authenticatedRouter(services, { prefix: '/v0/webhooks' });
  router.post('/endpoints/:id/rotate-secret', requireTier('platform'), async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    ctx.body = await services.registration.rotateWebhookSecret(principalOf(ctx).orgId, id);
  });
  return router;
}
