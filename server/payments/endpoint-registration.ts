import { randomBytes } from 'node:crypto';
import { AppError } from '../platform/errors.js';
import type { Mode } from '../platform/config.js';
import type { SecretBox } from '../platform/secret-box.js';
import { parsePrice, toCaip2Network } from 'agentgate-x402-wire';
import { assertAllowedUrl, guardedFetch, type AddressPolicy, type GuardedResponse } from '../platform/ssrf.js';
import { offersOf402, type OfferedPayment } from './offers-of-402.js';
import { webhookSecretContext, type EndpointDoc } from './models.js';
import { isMcpResource, normalizeResource } from './resource-url.js';
import { newId } from '../platform/ids.js';
import { priceOf, type Endpoints } from './endpoints.js';
import { acceptsPayee, type SellerAcceptance } from './acceptance.js';

// What a seller's endpoint must pass before it is stored (endpoints.ts stores it): its URL answers our
// middleware's 402 for this seller at this price, its webhook URL is a public target, and a webhook gets
// a fresh signing secret, sealed at rest and shown once. The same for the API and the console.

const newWebhookSecret = () => `whsec_${randomBytes(32).toString('base64url')}`;

export type NewEndpointInput = { url: string; priceUsdc?: string; maxPriceUsdc?: string; description?: string; webhookUrl?: string; method?: string; skipUrlCheck?: boolean } & DiscoveryInput;
export type EndpointChangeInput = { priceUsdc?: string; maxPriceUsdc?: string; description?: string; webhookUrl?: string | null } & DiscoveryInput;

export class EndpointRegistration {
  constructor(
    private readonly endpoints: Endpoints, private readonly acceptance: SellerAcceptance, private readonly secrets: SecretBox, private readonly mode: Mode, private readonly policy: AddressPolicy,
    /** Why a scheme is refused on this backend's network (its contracts have no code there); undefined: offered. */
    private readonly schemeRefusal: (scheme: string) => string | undefined = () => undefined,
  ) {}

  /**
   * Registers an endpoint. Its URL is fetched through the SSRF guard and must answer 402 with our
   * middleware's challenge for this seller at this price, so a typo or someone else's URL cannot be
   * registered (`skipUrlCheck` exists for dev mode only; `mcp://tool/<name>` resources cannot be fetched).
   * A webhook URL gets a fresh `whsec_` secret, returned this once.
   */
  async register(orgId: string, input: NewEndpointInput): Promise<{ endpoint: EndpointDoc; webhookSecret?: string }> {
    if (input.webhookUrl) await assertPublicTarget(input.webhookUrl, this.policy, 'webhookUrl');
    const url = normalizeResource(input.url);
    // A price that is no price is refused before the URL is fetched, as an invalid URL is.
    if (input.maxPriceUsdc !== undefined) priceOf(input.maxPriceUsdc, 'maxPriceUsdc');
    else priceOf(input.priceUsdc!);
    // skipUrlCheck is refused outside dev mode by the route's schema; this is the second lock on that door.
    const skip = input.skipUrlCheck === true && this.mode === 'dev';
    if (!skip && !isMcpResource(url)) await this.checkChallenge(orgId, url, input.maxPriceUsdc !== undefined ? { upTo: input.maxPriceUsdc } : { exactly: input.priceUsdc! }, input.method ?? 'GET');
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
    if (change.webhookUrl) await assertPublicTarget(change.webhookUrl, this.policy, 'webhookUrl');
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

  /**
   * The URL must answer 402 with an offer to this seller (its payTo or one of its payees), on the network
   * and in the asset this backend settles, at the registered price: the exact price, or for a dynamic or
   * usage price a maximum within the registered one. Offers of both x402 generations count (a v2-only
   * scheme offers in PAYMENT-REQUIRED alone), in any scheme, among any number of other offers.
   */
  private async checkChallenge(orgId: string, url: string, price: { exactly: string } | { upTo: string }, method: string): Promise<void> {
    const refuse = (why: string) => new AppError(400, 'endpoint_check_failed', `body.url: ${url} ${why}`);
    let response: GuardedResponse;
    try {
      response = await guardedFetch(url, { ...this.policy, method, ...(method === 'GET' ? {} : { body: '' }), timeoutMs: 5_000, maxBytes: 64 * 1024, maxRedirects: 3 });
    } catch (err) {
      throw refuse(`could not be fetched: ${(err as Error).message}`);
    }
    if (response.status !== 402) {
      const hint = method === 'GET' && (response.status === 404 || response.status === 405) ? ' (a route that answers only another method: give it as body.method)' : '';
      throw refuse(`answered ${response.status} to ${method}, not 402 from the agentgate middleware${hint}`);
    }
    const { offers, spoken } = offersOf402(response);
    if (spoken.length === 0) throw refuse('answered 402 with neither an x402 v1 JSON body nor an x402 v2 PAYMENT-REQUIRED header');
    const settings = await this.acceptance.settingsFor(orgId);
    const seller = (await this.acceptance.get(orgId))!;
    const network = toCaip2Network(settings.network);
    const ours = offers.filter((o) => acceptsPayee(seller, o.payTo));
    if (ours.length === 0) throw refuse(`does not ask for payment to this seller's address ${settings.payTo} (or one of its payees)`);
    const served = ours.filter((o) => o.network === network && o.asset.toLowerCase() === settings.asset.toLowerCase());
    if (served.length === 0) throw refuse(`asks for payment on ${describe(ours)}, none of it on ${network} in ${settings.asset}, the network and asset this backend settles`);
    // A route whose every payment would be refused is not registered: the seller hears it now, not its buyers.
    const refusedScheme = served.map((o) => this.schemeRefusal(o.scheme)).find(Boolean);
    if (refusedScheme) throw refuse(`offers a scheme this backend cannot settle: ${refusedScheme}`);
    const fits = (amount: bigint) => ('exactly' in price ? amount === parsePrice(price.exactly) : amount > 0n && amount <= parsePrice(price.upTo));
    const misfit = served.find((o) => !fits(o.amount));
    if (misfit) {
      throw refuse('exactly' in price
        ? `asks for ${misfit.amount} atomic units, not the price ${price.exactly} (${misfit.scheme})`
        : `asks for ${misfit.amount} atomic units, not a dynamic price of at most ${price.upTo} (${misfit.scheme})`);
    }
  }
}

/** `exact on eip155:1 in 0x…, upto on …`: what a 402 offered, for a refusal. */
function describe(offers: OfferedPayment[]): string {
  return [...new Set(offers.map((o) => `${o.scheme} on ${o.network} in ${o.asset}`))].join(', ');
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

async function assertPublicTarget(url: string, policy: AddressPolicy, field: string): Promise<void> {
  try {
    await assertAllowedUrl(url, policy);
  } catch (err) {
    throw new AppError(400, 'url_not_allowed', `body.${field}: ${(err as Error).message}`);
  }
}
