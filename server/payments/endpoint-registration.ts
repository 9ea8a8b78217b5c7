import { randomBytes } from 'node:crypto';
import type { AppContext } from '../context.js';
import { AppError } from '../platform/errors.js';
import { parsePrice } from '../../middleware/price.js';
import { assertAllowedUrl, guardedFetch } from '../platform/ssrf.js';
import { webhookSecretContext, type EndpointDoc } from './models.js';
import { isMcpResource, normalizeResource } from './resource-url.js';
import { newId } from '../platform/ids.js';

const newWebhookSecret = () => `whsec_${randomBytes(32).toString('base64url')}`;

/**
 * Registers an endpoint. Its URL is fetched through the SSRF guard and must answer 402 with our
 * middleware's challenge for this seller at this price, so a typo or someone else's URL cannot be
 * registered (`skipUrlCheck` exists for dev mode only; `mcp://tool/<name>` resources cannot be fetched).
 * A webhook URL gets a fresh `whsec_` secret, returned this once.
 */
export async function registerEndpoint(
  app: AppContext,
  orgId: string,
  input: { url: string; priceUsdc?: string; maxPriceUsdc?: string; description?: string; webhookUrl?: string; skipUrlCheck?: boolean } & DiscoveryInput,
): Promise<{ endpoint: EndpointDoc; webhookSecret?: string }> {
  const allowLoopback = app.config.mode === 'dev';
  if (input.webhookUrl) await assertPublicTarget(input.webhookUrl, allowLoopback, 'webhookUrl');
  const url = normalizeResource(input.url);
  if (!input.skipUrlCheck && !isMcpResource(url)) await checkChallenge(app, orgId, url, input.maxPriceUsdc !== undefined ? { upTo: input.maxPriceUsdc } : { exactly: input.priceUsdc! }, allowLoopback);
  const id = newId('ep');
  const webhookSecret = input.webhookUrl ? newWebhookSecret() : undefined;
  const endpoint = await app.payments.createEndpoint(orgId, {
    id, url, priceUsdc: input.priceUsdc, maxPriceUsdc: input.maxPriceUsdc, description: input.description, webhookUrl: input.webhookUrl,
    webhookSecret: webhookSecret ? app.secrets.seal(webhookSecret, webhookSecretContext(id)) : undefined,
    ...discoveryFields(input),
  });
  return { endpoint, webhookSecret };
}

/**
 * Changes price, description or webhook URL. The URL is not fetched again: a seller changes the price in
 * its middleware and here in either order. A new webhook URL gets a new secret, returned this once.
 */
export async function updateEndpoint(
  app: AppContext,
  orgId: string,
  id: string,
  change: { priceUsdc?: string; maxPriceUsdc?: string; description?: string; webhookUrl?: string | null } & DiscoveryInput,
): Promise<{ endpoint: EndpointDoc; webhookSecret?: string }> {
  if (change.webhookUrl) await assertPublicTarget(change.webhookUrl, app.config.mode === 'dev', 'webhookUrl');
  const current = await app.payments.getEndpoint(orgId, id);
  const webhookSecret = change.webhookUrl && change.webhookUrl !== current.webhookUrl ? newWebhookSecret() : undefined;
  const { discoverable: _d, inputSchema: _i, outputSchema: _o, ...rest } = change;
  const endpoint = await app.payments.updateEndpoint(orgId, id, {
    ...rest,
    ...discoveryFields(change),
    webhookSecret: webhookSecret ? app.secrets.seal(webhookSecret, webhookSecretContext(id)) : undefined,
  });
  return { endpoint, webhookSecret };
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

export async function rotateWebhookSecret(app: AppContext, orgId: string, id: string): Promise<{ id: string; webhookSecret: string }> {
  const endpoint = await app.payments.getEndpoint(orgId, id);
  if (!endpoint.webhookUrl) throw new AppError(409, 'no_webhook', 'This endpoint has no webhookUrl');
  const webhookSecret = newWebhookSecret();
  await app.payments.updateEndpoint(orgId, id, { webhookSecret: app.secrets.seal(webhookSecret, webhookSecretContext(id)) });
  return { id, webhookSecret };
}

async function assertPublicTarget(url: string, allowLoopback: boolean, field: string): Promise<void> {
  try {
    await assertAllowedUrl(url, { allowLoopback });
  } catch (err) {
    throw new AppError(400, 'url_not_allowed', `body.${field}: ${(err as Error).message}`);
  }
}

async function checkChallenge(app: AppContext, orgId: string, url: string, price: { exactly: string } | { upTo: string }, allowLoopback: boolean): Promise<void> {
  const refuse = (why: string) => new AppError(400, 'endpoint_check_failed', `body.url: ${url} ${why}`);
  let response: { status: number; text: string };
  try {
    const res = await guardedFetch(url, { allowLoopback, timeoutMs: 5_000, maxBytes: 64 * 1024, maxRedirects: 3 });
    response = { status: res.status, text: res.bodyText ?? '' };
  } catch (err) {
    throw refuse(`could not be fetched: ${(err as Error).message}`);
  }
  if (response.status !== 402) throw refuse(`answered ${response.status}, not 402 from the agentgate middleware`);
  let body: { x402Version?: number; accepts?: Array<{ payTo?: string; maxAmountRequired?: string }> };
  try { body = JSON.parse(response.text); } catch { throw refuse('answered 402 without an x402 JSON body'); }
  const settings = await app.payments.settingsFor(orgId);
  const seller = (await app.payments.acceptance(orgId))!;
  const offer = body.accepts?.find((a) => a.payTo !== undefined && app.payments.acceptsPayee(seller, a.payTo));
  if (body.x402Version !== 1 || !offer) throw refuse(`does not ask for payment to this seller's address ${settings.payTo} (or one of its payees)`);
  const asked = BigInt(offer.maxAmountRequired ?? '0');
  if ('exactly' in price && asked !== parsePrice(price.exactly)) throw refuse(`asks for ${offer.maxAmountRequired} atomic units, not the price ${price.exactly}`);
  if ('upTo' in price && (asked <= 0n || asked > parsePrice(price.upTo))) throw refuse(`asks for ${offer.maxAmountRequired} atomic units, not a dynamic price of at most ${price.upTo}`);
}
