import { z } from 'zod';
import { wholeNumberParam } from '../platform/pagination.js';
import type { ChainService } from '../chain/chain-service.js';
import type { EndpointDoc, SellerAccountDoc } from './models.js';
import type { BazaarEntryDoc } from './bazaar.js';

/**
 * Bazaar discovery (x402 v2 spec 8, specs/extensions/bazaar.md): the list (`GET /discovery/resources`,
 * offset pages) and the search (`GET /discovery/search`, a query, cursor pages) over one catalog: the
 * endpoints sellers registered with `discoverable: true`, and the resources cataloged from the bazaar
 * declarations of payments settled here (bazaar.ts). Only sellers that accept payments now are listed.
 */

const filters = {
  type: z.enum(['http', 'mcp']).optional(),
  payTo: z.string().min(1).max(100).optional(),
  scheme: z.string().min(1).max(50).optional(),
  network: z.string().min(1).max(100).optional(),
  extensions: z.string().min(1).max(100).optional(),
};

export const discoveryQuery = z.object({
  ...filters,
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: wholeNumberParam(0, 1_000_000).default(0),
});

/** A search cursor: where the next page starts, opaque to the client. */
const cursorOf = (offset: number) => Buffer.from(JSON.stringify({ o: offset })).toString('base64url');
const cursor = z.string().max(200).transform((value, ctx) => {
  try {
    const parsed = z.object({ o: z.number().int().min(0).max(1_000_000) }).strict().parse(JSON.parse(Buffer.from(value, 'base64url').toString('utf8')));
    return parsed.o;
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be a cursor from a previous search answer' });
    return z.NEVER;
  }
});

export const searchQuery = z.object({
  query: z.string().trim().min(1, 'must not be empty').max(500),
  ...filters,
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: cursor.optional(),
});

export interface DiscoveryItem {
  resource: string;
  type: 'http' | 'mcp';
  x402Version: 2;
  accepts: Array<Record<string, unknown>>;
  /** ISO 8601, as the official client's DiscoveryResource has it. */
  lastUpdated: string;
  description?: string;
  mimeType?: string;
  serviceName?: string;
  tags?: string[];
  iconUrl?: string;
  extensions?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

/** An MCP tool is registered as mcp://tool/<name>; everything else is an HTTP resource. */
const resourceType = (url: string) => (url.startsWith('mcp://') ? 'mcp' : 'http');

export function endpointItem(chain: ChainService, endpoint: EndpointDoc, seller: SellerAccountDoc): DiscoveryItem {
  return {
    resource: endpoint.url,
    type: resourceType(endpoint.url),
    x402Version: 2,
    accepts: [{
      scheme: 'exact', network: chain.caip2, amount: endpoint.priceAtomic, asset: chain.usdc.address, payTo: seller.payTo,
      maxTimeoutSeconds: 60, extra: { name: chain.usdc.name, version: chain.usdc.version },
    }],
    lastUpdated: endpoint.updatedAt.toISOString(),
    ...(endpoint.description ? { description: endpoint.description } : {}),
    metadata: {
      description: endpoint.description,
      priceUsdc: endpoint.priceUsdc,
      // dynamic: each request is priced by the seller (its 402 says how much), at most priceUsdc.
      pricing: endpoint.pricing ?? 'fixed',
      ...(endpoint.inputSchemaJson ? { inputSchema: JSON.parse(endpoint.inputSchemaJson) as unknown } : {}),
      ...(endpoint.outputSchemaJson ? { outputSchema: JSON.parse(endpoint.outputSchemaJson) as unknown } : {}),
    },
  };
}

export function catalogItem(entry: BazaarEntryDoc): DiscoveryItem {
  return {
    resource: entry.resource,
    type: entry.type,
    x402Version: 2,
    accepts: JSON.parse(entry.acceptsJson) as Array<Record<string, unknown>>,
    lastUpdated: entry.lastUpdated.toISOString(),
    ...(entry.description ? { description: entry.description } : {}),
    ...(entry.mimeType ? { mimeType: entry.mimeType } : {}),
    ...(entry.serviceName ? { serviceName: entry.serviceName } : {}),
    ...(entry.tags?.length ? { tags: entry.tags } : {}),
    ...(entry.iconUrl ? { iconUrl: entry.iconUrl } : {}),
    extensions: { bazaar: JSON.parse(entry.declarationJson) as unknown },
  };
}

type Filters = { type?: string; payTo?: string; scheme?: string; network?: string; extensions?: string };

/** The spec's filters: every one given must hold (payTo and scheme and network of one of the accepts). */
export function matchesFilters(item: DiscoveryItem, f: Filters): boolean {
  if (f.type && item.type !== f.type) return false;
  if (f.extensions && !(item.extensions && f.extensions in item.extensions)) return false;
  if (!f.payTo && !f.scheme && !f.network) return true;
  return item.accepts.some((a) => (!f.payTo || String(a.payTo).toLowerCase() === f.payTo.toLowerCase())
    && (!f.scheme || a.scheme === f.scheme) && (!f.network || a.network === f.network));
}

/** The words of a query or a text, lower-case, a plural's trailing s dropped ("APIs" finds "api"). */
function words(text: string): string[] {
  return text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((w) => w.length >= 2).map((w) => (w.length > 3 && w.endsWith('s') ? w.slice(0, -1) : w));
}

/** What a search reads of an item: its URL, description, service name, tags, and its bazaar declaration's tool. */
function searchableText(item: DiscoveryItem): string {
  const bazaar = item.extensions?.bazaar as { info?: { input?: Record<string, unknown> } } | undefined;
  const input = bazaar?.info?.input ?? {};
  return [item.resource, item.description, item.serviceName, ...(item.tags ?? []), item.metadata?.description, input.tool, input.description]
    .filter((v) => typeof v === 'string').join(' ');
}

/**
 * A keyword search: an item matches when it contains at least one of the query's words (whole words or
 * their prefixes), ranked by how many it contains, then in list order. No embeddings, no index: the
 * catalog is read whole, which suits the catalogs one deployment has.
 */
export function search(items: readonly DiscoveryItem[], query: string): DiscoveryItem[] {
  const terms = [...new Set(words(query))];
  if (!terms.length) return [];
  return items
    .map((item, order) => {
      const text = words(searchableText(item));
      const score = terms.filter((term) => text.some((w) => w.startsWith(term))).length;
      return { item, order, score };
    })
    .filter((r) => r.score > 0)
    .sort((a, b) => b.score - a.score || a.order - b.order)
    .map((r) => r.item);
}

/** A page of search results and the cursor of the next one (null at the end). */
export function searchPage(matches: readonly DiscoveryItem[], offset: number, limit: number) {
  const resources = matches.slice(offset, offset + limit);
  const next = offset + limit < matches.length ? cursorOf(offset + limit) : null;
  return { x402Version: 2 as const, resources, pagination: { limit, cursor: next } };
}
