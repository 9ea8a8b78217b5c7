import { randomBytes } from 'node:crypto';
import { AppError } from '../platform/errors.js';
import type { Mode } from '../platform/config.js';
import type { SecretBox } from '../platform/secret-box.js';
import { parsePrice } from '../../middleware/price.js';
import { assertAllowedUrl, guardedFetch, type GuardedResponse } from '../platform/ssrf.js';
import { decodeBase64Json } from '../../middleware/protocol/base64-json.js';
import { webhookSecretContext, type EndpointDoc } from './models.js';
import { isMcpResource, normalizeResource } from './resource-url.js';
import { newId } from '../platform/ids.js';
import type { Endpoints } from './endpoints.js';
import { acceptsPayee, type SellerAcceptance } from './acceptance.js';

// What a seller's endpoint must pass before it is stored (endpoints.ts stores it): its URL answers our
// middleware's 402 for this seller at this price, its webhook URL is a public target, and a webhook gets
// a fresh signing secret, sealed at rest and shown once. The same for the API and the console.

const newWebhookSecret = () => `whsec_${randomBytes(32).toString('base64url')}`;

export type NewEndpointInput = { url: string; priceUsdc?: string; maxPriceUsdc?: string; description?: string; webhookUrl?: string; skipUrlCheck?: boolean } & DiscoveryInput;
export type EndpointChangeInput = { priceUsdc?: string; maxPriceUsdc?: string; description?: string; webhookUrl?: string | null } & DiscoveryInput;

export class EndpointRegistration {
  constructor(private readonly endpoints: Endpoints, private readonly acceptance: SellerAcceptance, private readonly secrets: SecretBox, private readonly mode: Mode) {}

  /**
   * Registers an endpoint. Its URL is fetched through the SSRF guard and must answer 402 with our
   * middleware's challenge for this seller at this price, so a typo or someone else's URL cannot be
   * registered (`skipUrlCheck` exists for dev mode only; `mcp://tool/<name>` resources cannot be fetched).
   * A webhook URL gets a fresh `whsec_` secret, returned this once.
   */
  async register(orgId: string, input: NewEndpointInput): Promise<{ endpoint: EndpointDoc; webhookSecret?: string }> {
    const allowLoopback = this.mode === 'dev';
    if (input.webhookUrl) await assertPublicTarget(input.webhookUrl, allowLoopback, 'webhookUrl');
    const url = normalizeResource(input.url);
    if (!input.skipUrlCheck && !isMcpResource(url)) await this.checkChallenge(orgId, url, input.maxPriceUsdc !== undefined ? { upTo: input.maxPriceUsdc } : { exactly: input.priceUsdc! }, allowLoopback);
    const id = newId('ep');
    const webhookSecret = input.webhookUrl ? newWebhookSecret() : undefined;
    const endpoint = await this.endpoints.create(orgId, {
      id, url, priceUsdc: input.priceUsdc, maxPriceUsdc: input.maxPriceUsdc, description: input.description, webhookUrl: input.webhookUrl,
      webhookSecret: webhookSecret ? this.secrets.seal(webhookSecret, webhookSecretContext(id)) : undefined,
      ...discoveryFields(input),
    });
    return { endpoint, webhookSecret };
  }

  /**
   * Changes price, description or webhook URL. The URL is not fetched again: a seller changes the price in
   * its middleware and here in either order. A new webhook URL gets a new secret, returned this once.
   */
  async update(orgId: string, id: string, change: EndpointChangeInput): Promise<{ endpoint: EndpointDoc; webhookSecret?: string }> {
    if (change.webhookUrl) await assertPublicTarget(change.webhookUrl, this.mode === 'dev', 'webhookUrl');
    const current = await this.endpoints.get(orgId, id);
    const webhookSecret = change.webhookUrl && change.webhookUrl !== current.webhookUrl ? newWebhookSecret() : undefined;
    const { discoverable: _d, inputSchema: _i, outputSchema: _o, ...rest } = change;
    const endpoint = await this.endpoints.update(orgId, id, {
      ...rest,
      ...discoveryFields(change),
      webhookSecret: webhookSecret ? this.secrets.seal(webhookSecret, webhookSecretContext(id)) : undefined,
    });
    return { endpoint, webhookSecret };
  }

  async rotateWebhookSecret(orgId: string, id: string): Promise<{ id: string; webhookSecret: string }> {
    const endpoint = await this.endpoints.get(orgId, id);
    if (!endpoint.webhookUrl) throw new AppError(409, 'no_webhook', 'This endpoint has no webhookUrl');
    const webhookSecret = newWebhookSecret();
    await this.endpoints.update(orgId, id, { webhookSecret: this.secrets.seal(webhookSecret, webhookSecretContext(id)) });
    return { id, webhookSecret };
  }

  private async checkChallenge(orgId: string, url: string, price: { exactly: string } | { upTo: string }, allowLoopback: boolean): Promise<void> {
    const refuse = (why: string) => new AppError(400, 'endpoint_check_failed', `body.url: ${url} ${why}`);
    let response: GuardedResponse;
    try {
      response = await guardedFetch(url, { allowLoopback, timeoutMs: 5_000, maxBytes: 64 * 1024, maxRedirects: 3 });
    } catch (err) {
      throw refuse(`could not be fetched: ${(err as Error).message}`);
    }
    if (response.status !== 402) throw refuse(`answered ${response.status}, not 402 from the agentgate middleware`);
    const offers = challengeOffers(response);
    if (!offers) throw refuse('answered 402 without an x402 challenge (a v1 JSON body or a PAYMENT-REQUIRED header)');
    const settings = await this.acceptance.settingsFor(orgId);
    const seller = (await this.acceptance.get(orgId))!;
    const offer = offers.find((o) => acceptsPayee(seller, o.payTo));
    if (!offer) throw refuse(`does not ask for payment to this seller's address ${settings.payTo} (or one of its payees)`);
    const asked = /^\d{1,30}$/.test(offer.amount) ? BigInt(offer.amount) : 0n;
    if ('exactly' in price && asked !== parsePrice(price.exactly)) throw refuse(`asks for ${offer.amount} atomic units, not the price ${price.exactly}`);
    if ('upTo' in price && (asked <= 0n || asked > parsePrice(price.upTo))) throw refuse(`asks for ${offer.amount} atomic units, not a dynamic price of at most ${price.upTo}`);
  }
}

/**
 * What a 402 offers: the v1 body's `accepts` (maxAmountRequired) and the v2 PAYMENT-REQUIRED header's
 * (amount). A route sold only over v2 (auth-capture, upto, exact through Permit2, batch-settlement) offers
 * nothing in its v1 body. Undefined when the 402 carries neither.
 */
function challengeOffers(response: GuardedResponse): Array<{ payTo: string; amount: string }> | undefined {
  const offers: Array<{ payTo: string; amount: string }> = [];
  let challenged = false;
  const add = (accepts: unknown, amountField: 'maxAmountRequired' | 'amount') => {
    if (!Array.isArray(accepts)) return;
    challenged = true;
    for (const a of accepts as Array<Record<string, unknown>>) {
      if (typeof a?.payTo === 'string') offers.push({ payTo: a.payTo, amount: String(a[amountField] ?? '0') });
    }
  };
  try {
    const body = JSON.parse(response.bodyText) as { x402Version?: number; accepts?: unknown };
    if (body.x402Version === 1) add(body.accepts, 'maxAmountRequired');
  } catch {
    // no v1 body: the header may still carry the challenge
  }
  const header = response.headers['payment-required'];
  const decoded = typeof header === 'string' ? decodeBase64Json(header) : undefined;
  if (decoded?.ok) {
    const v2 = decoded.value as { x402Version?: number; accepts?: unknown } | null;
    if (v2?.x402Version === 2) add(v2.accepts, 'amount');
  }
  return challenged ? offers : undefined;
}

export interface DiscoveryInput { discoverable?: boolean; inputSchema?: Record<string, unknown> | null; outputSchema?: Record<string, unknown> | null }

/** What an endpoint stores of a seller's discovery settings (null clears a schema). */
function discoveryFields(input: DiscoveryInput) {
  const json = (schema: Record<string, unknown> | null | undefined) => (schema === undefined ? undefined : schema === null ? null : JSON.stringify(schema));
  return {
    ...(input.discoverable !== undefined ? { discoverable: input.discoverable } : {}),
    ...(input.inputSchema !== undefined ? { inputSchemaJson: json(input.inputSchema) } : {}),
    ...(input.outputSchema !== undefined ? { outputSchemaJson: json(input.outputSchema) } : {}),
  };
}

async function assertPublicTarget(url: string, allowLoopback: boolean, field: string): Promise<void> {
  try {
    await assertAllowedUrl(url, { allowLoopback });
  } catch (err) {
    throw new AppError(400, 'url_not_allowed', `body.${field}: ${(err as Error).message}`);
  }
}
