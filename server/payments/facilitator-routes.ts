import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { isAddressEqual, type Address } from 'viem';
import type { AppContext } from '../context.js';
import { authenticate, principalOf, requireTier } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { wholeNumberParam } from '../platform/pagination.js';
import { decodePaymentPayload, type DecodedPaymentHeader } from '../../middleware/protocol/payment-header.js';
import { PaymentRequirementsV1Schema } from '../../middleware/protocol/v1.js';
import { PaymentRequirementsV2Schema } from '../../middleware/protocol/v2.js';
import { toCaip2Network, toV1Network } from '../../middleware/networks.js';
import type { SellerAccountDoc } from './models.js';
import { normalizeResource } from './resource-url.js';
import { PAYMENT_IDENTIFIER } from './payment-identifier.js';
import { OFFER_RECEIPT, offerReceiptExtension } from '../../middleware/offer-receipt.js';
import { decodeUptoPayload, isUptoPayload, UptoRequirementsV2Schema, type UptoPaymentPayloadV2 } from '../../middleware/protocol/upto-evm.js';

/**
 * The standard x402 facilitator API (`{url}/verify`, `{url}/settle`, `{url}/supported`), so sellers on
 * the official SDKs of any language use agentgate through their HTTPFacilitatorClient with
 * `url: {BASE_URL}/v0/x402` and their seller key as `Authorization: Bearer`. It is a second door to the
 * same path as our middleware's redeem: same verification, settlement, records, receipts and webhooks.
 */

export const facilitatorBody = z.object({
  x402Version: z.union([z.literal(1), z.literal(2)]),
  paymentPayload: z.record(z.string(), z.unknown()),
  paymentRequirements: z.record(z.string(), z.unknown()),
}).strict();

export const discoveryQuery = z.object({
  type: z.enum(['http', 'mcp']).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: wholeNumberParam(0, 1_000_000).default(0),
});

/** An MCP tool is registered as mcp://tool/<name>; everything else is an HTTP resource. */
const resourceType = (url: string) => (url.startsWith('mcp://') ? 'mcp' : 'http');

/** Our reason codes (one per check) as the x402 exact EVM scheme names them. */
const SPEC_REASONS: Record<string, string> = {
  unsupported_scheme: 'invalid_exact_evm_scheme',
  network_mismatch: 'invalid_exact_evm_network_mismatch',
  asset_mismatch: 'invalid_payment_requirements',
  invalid_signature: 'invalid_exact_evm_signature',
  recipient_mismatch: 'invalid_exact_evm_recipient_mismatch',
  amount_mismatch: 'invalid_exact_evm_payload_authorization_value_mismatch',
  authorization_not_yet_valid: 'invalid_exact_evm_payload_authorization_valid_after',
  authorization_expired: 'invalid_exact_evm_payload_authorization_valid_before',
  nonce_already_used: 'invalid_exact_evm_nonce_already_used',
  insufficient_funds: 'invalid_exact_evm_insufficient_balance',
  invalid_payload: 'invalid_payload',
  unsupported_x402_version: 'invalid_x402_version',
  settle_failed: 'invalid_exact_evm_transaction_failed',
  settle_reverted: 'invalid_exact_evm_transaction_failed',
  settle_unconfirmed: 'settlement_pending',
  payer_blacklisted: 'invalid_exact_evm_transaction_failed',
  token_paused: 'invalid_exact_evm_transaction_failed',
};
const specReason = (reason: string) => SPEC_REASONS[reason] ?? reason;

/** The same for `upto`, as the x402 upto EVM scheme and @x402/evm's Permit2 checks name them. */
const UPTO_SPEC_REASONS: Record<string, string> = {
  unsupported_scheme: 'invalid_upto_evm_scheme',
  network_mismatch: 'invalid_upto_evm_network_mismatch',
  asset_mismatch: 'permit2_token_mismatch',
  invalid_spender: 'invalid_permit2_spender',
  recipient_mismatch: 'invalid_permit2_recipient_mismatch',
  facilitator_mismatch: 'upto_facilitator_mismatch',
  authorization_expired: 'permit2_deadline_expired',
  authorization_not_yet_valid: 'permit2_not_yet_valid',
  amount_mismatch: 'permit2_amount_mismatch',
  invalid_signature: 'invalid_permit2_signature',
  nonce_already_used: 'permit2_invalid_nonce',
  permit2_allowance_required: 'permit2_allowance_required',
  insufficient_funds: 'permit2_insufficient_balance',
  settlement_exceeds_amount: 'invalid_upto_evm_payload_settlement_exceeds_amount',
  invalid_eip2612_permit: 'invalid_eip2612_extension_format',
  settle_reverted: 'invalid_upto_evm_transaction_failed',
  settle_failed: 'invalid_upto_evm_transaction_failed',
  settle_unconfirmed: 'settlement_pending',
  unsupported_x402_version: 'invalid_x402_version',
};
const uptoSpecReason = (reason: string) => UPTO_SPEC_REASONS[reason] ?? reason;
/** The spec's answer to a payer who never approved Permit2: 412 Precondition Failed, approve once and retry. */
const statusOfUpto = (reason: string) => (reason === 'permit2_allowance_required' ? 412 : 200);

type Terms = { decoded: DecodedPaymentHeader; amountAtomic: bigint; resource: string; payTo: string };
type Refusal = { reason: string; message: string };

/**
 * Reads a request body into the payment and the terms it must meet, or the reason it cannot be. The
 * requirements come from the seller, but what they may ask for is bounded here: our scheme, network and
 * asset, and payment to this seller's own accepting address only, so nobody spends our relayer's gas on
 * transfers to someone else.
 */
function termsOf(body: z.output<typeof facilitatorBody>, seller: SellerAccountDoc, ours: { network: string; caip2: string; usdc: Address }): Terms | Refusal {
  const decoded = decodePaymentPayload(body.paymentPayload);
  if (!decoded.ok) return { reason: decoded.reason, message: decoded.message };
  if (decoded.version !== body.x402Version) return { reason: 'unsupported_x402_version', message: `x402Version ${body.x402Version} does not match the payload's ${decoded.version}` };
  const requirement = body.x402Version === 1 ? PaymentRequirementsV1Schema.safeParse(body.paymentRequirements) : PaymentRequirementsV2Schema.safeParse(body.paymentRequirements);
  if (!requirement.success) return { reason: 'invalid_payment_requirements', message: `paymentRequirements: ${requirement.error.issues[0]?.path.join('.') || 'body'} ${requirement.error.issues[0]?.message ?? 'is invalid'}` };
  const r = requirement.data;
  const network = body.x402Version === 1 ? toV1Network(r.network) === ours.network : toCaip2Network(r.network) === ours.caip2;
  if (!network) return { reason: 'network_mismatch', message: `this facilitator settles on ${body.x402Version === 1 ? ours.network : ours.caip2}, not ${r.network}` };
  if (!isAddressEqual(r.asset as Address, ours.usdc)) return { reason: 'asset_mismatch', message: `this facilitator settles USDC at ${ours.usdc}, not ${r.asset}` };
  const payees = [seller.payTo, ...(seller.payees ?? [])];
  if (!payees.some((p) => isAddressEqual(r.payTo as Address, p as Address))) {
    return { reason: 'invalid_payment_requirements', message: `payTo must be this seller's accepting address ${seller.payTo}${seller.payees?.length ? ' or one of its payees' : ''}` };
  }
  const amountAtomic = BigInt('maxAmountRequired' in r ? r.maxAmountRequired : r.amount);
  if (decoded.version === 2) {
    // The payload echoes the requirement it was signed for: it must be the one presented now.
    const accepted = decoded.payload.accepted;
    if (accepted.amount !== String(amountAtomic) || !isAddressEqual(accepted.payTo as Address, r.payTo as Address) || !isAddressEqual(accepted.asset as Address, r.asset as Address)) {
      return { reason: 'invalid_payment_requirements', message: 'the payload was accepted for other requirements (amount, payTo or asset differ)' };
    }
  }
  const rawResource = 'resource' in r ? r.resource : decoded.version === 2 ? decoded.payload.resource?.url : undefined;
  let resource = 'unknown';
  try { if (rawResource) resource = normalizeResource(rawResource); } catch { resource = String(rawResource).slice(0, 2048); }
  return { decoded, amountAtomic, resource, payTo: r.payTo };
}

type UptoTerms = { payload: UptoPaymentPayloadV2; amountAtomic: bigint; maxAmount: bigint; resource: string; payTo: string };

/**
 * The same for an `upto` payment (v2 only). The requirements' amount is phase-dependent (the scheme's
 * rule): at /verify the maximum, which the permit must allow exactly; at /settle the amount to charge,
 * at most the permit's maximum. The payload's `accepted` must be the requirement it was signed for.
 */
function uptoTermsOf(body: z.output<typeof facilitatorBody>, seller: SellerAccountDoc, ours: { caip2: string; usdc: Address }): UptoTerms | Refusal {
  if (body.x402Version !== 2) return { reason: 'unsupported_x402_version', message: 'the upto scheme is x402 v2 only' };
  if (body.paymentRequirements.scheme !== 'upto' || !isUptoPayload(body.paymentPayload)) {
    return { reason: 'unsupported_scheme', message: 'the payment payload and the requirements name different schemes' };
  }
  const decoded = decodeUptoPayload(body.paymentPayload);
  if (!decoded.ok) return { reason: 'invalid_payload', message: decoded.message };
  const requirement = UptoRequirementsV2Schema.safeParse(body.paymentRequirements);
  if (!requirement.success) return { reason: 'invalid_payment_requirements', message: `paymentRequirements: ${requirement.error.issues[0]?.path.join('.') || 'body'} ${requirement.error.issues[0]?.message ?? 'is invalid'}` };
  const r = requirement.data;
  if (toCaip2Network(r.network) !== ours.caip2) return { reason: 'network_mismatch', message: `this facilitator settles on ${ours.caip2}, not ${r.network}` };
  if (!isAddressEqual(r.asset as Address, ours.usdc)) return { reason: 'asset_mismatch', message: `this facilitator settles USDC at ${ours.usdc}, not ${r.asset}` };
  const payees = [seller.payTo, ...(seller.payees ?? [])];
  if (!payees.some((p) => isAddressEqual(r.payTo as Address, p as Address))) {
    return { reason: 'invalid_payment_requirements', message: `payTo must be this seller's accepting address ${seller.payTo}${seller.payees?.length ? ' or one of its payees' : ''}` };
  }
  const payload = decoded.payload;
  const accepted = payload.accepted;
  const maxAmount = BigInt(payload.payload.permit2Authorization.permitted.amount);
  if (BigInt(accepted.amount) !== maxAmount || !isAddressEqual(accepted.payTo as Address, r.payTo as Address) || !isAddressEqual(accepted.asset as Address, r.asset as Address)) {
    return { reason: 'invalid_payment_requirements', message: 'the payload was accepted for other requirements (its maximum, payTo or asset differ from the permit\'s or these)' };
  }
  let resource = 'unknown';
  const rawResource = payload.resource?.url;
  try { if (rawResource) resource = normalizeResource(rawResource); } catch { resource = String(rawResource).slice(0, 2048); }
  return { payload, amountAtomic: BigInt(r.amount), maxAmount, resource, payTo: r.payTo };
}

export function facilitatorRoutes(app: AppContext): Router {
  const router = new Router({ prefix: '/v0/x402' });
  const sellerOnly = [authenticate(app.keys, app.identities), requireTier('seller')] as const;

  // Public: what this facilitator settles. The official clients read it at start-up.
  router.get('/supported', async (ctx) => {
    const chain = app.chain;
    // The relayer pool (read from the registry by a process given no keys of its own).
    const pool = chain ? await app.payments.uptoFacilitators() : [];
    ctx.body = {
      kinds: chain ? [
        { x402Version: 1, scheme: 'exact', network: chain.network },
        { x402Version: 2, scheme: 'exact', network: chain.caip2 },
        // upto: the buyer binds the facilitator that may settle into its permit (scheme_upto_evm.md).
        // Only while some process with keys runs: the facilitator is the pool's first relayer.
        ...(pool[0] ? [{ x402Version: 2, scheme: 'upto', network: chain.caip2, extra: { facilitatorAddress: pool[0] } }] : []),
      ] : [],
      // eip2612GasSponsoring: an upto buyer without a Permit2 allowance may send its USDC permit with the payment.
      extensions: [PAYMENT_IDENTIFIER, 'bazaar', OFFER_RECEIPT, 'eip2612GasSponsoring'],
      signers: chain ? { [`${chain.caip2.split(':')[0]}:*`]: pool } : {},
    };
  });

  // Public: the bazaar discovery list of registered endpoints whose sellers opted in.
  router.get('/discovery/resources', async (ctx) => {
    const chain = app.payments.requireChain();
    const query = parseInput(discoveryQuery, ctx.query, 'query');
    const all = (await app.payments.discoverable()).filter(({ endpoint }) => !query.type || resourceType(endpoint.url) === query.type);
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

  const prepare = async (ctx: Context) => {
    const chain = app.payments.requireChain();
    const body = parseInput(facilitatorBody, ctx.request.body, 'body');
    const seller = await app.payments.acceptingSeller(principalOf(ctx).orgId);
    const network = body.x402Version === 1 ? chain.network : chain.caip2;
    if (!seller) return { scheme: 'exact' as const, network, refused: { reason: 'invalid_payment_requirements', message: 'payment acceptance is not turned on for this seller (PUT /v0/payments/acceptance)' } };
    if (body.paymentRequirements.scheme === 'upto' || isUptoPayload(body.paymentPayload)) {
      const upto = uptoTermsOf(body, seller, { caip2: chain.caip2, usdc: chain.usdc.address });
      return 'reason' in upto ? { scheme: 'upto' as const, network, refused: upto } : { scheme: 'upto' as const, network, seller, upto, refused: undefined };
    }
    const terms = termsOf(body, seller, { network: chain.network, caip2: chain.caip2, usdc: chain.usdc.address });
    return 'reason' in terms ? { scheme: 'exact' as const, network, refused: terms } : { scheme: 'exact' as const, network, seller, terms, refused: undefined };
  };

  router.post('/verify', ...sellerOnly, async (ctx) => {
    const prepared = await prepare(ctx);
    if (prepared.scheme === 'upto') {
      if (prepared.refused) {
        ctx.body = { isValid: false, invalidReason: uptoSpecReason(prepared.refused.reason), invalidMessage: prepared.refused.message };
        return;
      }
      const { seller, upto } = prepared;
      const verified = await app.payments.verifyUpto(seller, upto.payload, { maxAmount: upto.amountAtomic, payTo: upto.payTo });
      ctx.status = verified.ok ? 200 : statusOfUpto(verified.reason);
      ctx.body = verified.ok
        ? { isValid: true, payer: verified.payer }
        : { isValid: false, invalidReason: uptoSpecReason(verified.reason), invalidMessage: verified.message, payer: upto.payload.payload.permit2Authorization.from };
      return;
    }
    if (prepared.refused) {
      ctx.body = { isValid: false, invalidReason: specReason(prepared.refused.reason), invalidMessage: prepared.refused.message };
      return;
    }
    const verified = await app.payments.verify(prepared.seller, prepared.terms.decoded, prepared.terms);
    ctx.body = verified.ok
      ? { isValid: true, payer: verified.payer }
      : { isValid: false, invalidReason: specReason(verified.reason), invalidMessage: verified.message };
  });

  router.post('/settle', ...sellerOnly, async (ctx) => {
    const prepared = await prepare(ctx);
    const failed = (refusal: Refusal & { payer?: string; txHash?: string }) => ({
      success: false, errorReason: specReason(refusal.reason), errorMessage: refusal.message,
      transaction: refusal.txHash ?? '', network: prepared.network, ...(refusal.payer ? { payer: refusal.payer } : {}),
    });
    if (prepared.scheme === 'upto') {
      if (prepared.refused) {
        ctx.body = { ...failed(prepared.refused), errorReason: uptoSpecReason(prepared.refused.reason) };
        return;
      }
      const { seller, upto } = prepared;
      const payer = upto.payload.payload.permit2Authorization.from;
      // The seller names the charge; more than the buyer allowed is refused before anything is claimed.
      if (upto.amountAtomic > upto.maxAmount) {
        ctx.body = { ...failed({ reason: 'settlement_exceeds_amount', message: `the amount to settle ${upto.amountAtomic} is above the permit's maximum ${upto.maxAmount}; nothing was charged`, payer }), errorReason: uptoSpecReason('settlement_exceeds_amount') };
        return;
      }
      const endpoint = await app.payments.endpointFor(seller._id, upto.resource);
      const outcome = await app.payments.settleUpto(seller, upto.payload, { resource: upto.resource, maxAmount: upto.maxAmount, charge: upto.amountAtomic, endpoint, door: 'facilitator', payTo: upto.payTo });
      if (!outcome.ok) {
        ctx.status = outcome.reason === 'payment_identifier_conflict' ? 409 : statusOfUpto(outcome.reason);
        ctx.body = { ...failed(outcome), errorReason: uptoSpecReason(outcome.reason) };
        return;
      }
      ctx.body = {
        success: true, transaction: outcome.txHash, network: prepared.network, payer: outcome.payer, amount: outcome.amount ?? upto.amountAtomic.toString(),
        ...(outcome.offerReceipt ? { extensions: offerReceiptExtension(outcome.offerReceipt) } : {}),
      };
      return;
    }
    if (prepared.refused) {
      ctx.body = failed(prepared.refused);
      return;
    }
    const { seller, terms } = prepared;
    const endpoint = await app.payments.endpointFor(seller._id, terms.resource);
    const outcome = await app.payments.settle(seller, terms.decoded, { ...terms, endpoint, door: 'facilitator' });
    if (!outcome.ok && outcome.reason === 'payment_identifier_conflict') ctx.status = 409;
    ctx.body = outcome.ok
      ? {
        success: true, transaction: outcome.txHash, network: prepared.network, payer: outcome.payer, amount: terms.amountAtomic.toString(),
        // The official resource servers pass `extensions` through to the buyer's PAYMENT-RESPONSE header.
        ...(outcome.offerReceipt ? { extensions: offerReceiptExtension(outcome.offerReceipt) } : {}),
      }
      : failed(outcome);
  });

  return router;
}
