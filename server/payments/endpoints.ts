import type { Connection, Model } from 'mongoose';
import { formatUsdc, parsePrice } from 'agentgate-x402-wire';
import { AppError, notFound } from '../platform/errors.js';
import { TtlCache } from '../platform/ttl-cache.js';
import type { ChangeFeed } from '../platform/change-feed.js';
import type { Mode } from '../platform/config.js';
import type { ActivityLog } from '../platform/activity-log.js';
import { endpointSchema, type EndpointDoc, type SellerAccountDoc } from './models.js';
import { endpointUrlsFor, normalizeResource } from './resource-url.js';

// The seller's registered endpoints (a resource URL at a price): stored here, looked up on every paid
// request (from memory), and listed for the bazaar. Registration's checks before storing one (its URL
// answers our 402, its webhook secret) are endpoint-registration.ts.

export interface NewEndpoint {
  id: string; url: string; priceUsdc?: string; maxPriceUsdc?: string; description?: string; webhookUrl?: string; webhookSecret?: EndpointDoc['webhookSecret'];
  discoverable?: boolean; inputSchemaJson?: string | null; outputSchemaJson?: string | null;
}

export interface EndpointChange {
  priceUsdc?: string; maxPriceUsdc?: string; description?: string; webhookUrl?: string | null; webhookSecret?: EndpointDoc['webhookSecret'] | null;
  discoverable?: boolean; inputSchemaJson?: string | null; outputSchemaJson?: string | null;
}

export class Endpoints {
  readonly endpoints: Model<EndpointDoc>;
  /** `${orgId} ${url}` -> the live endpoint and `${orgId} #${id}` -> the endpoint by id; null caches "none". */
  private readonly cache: TtlCache<EndpointDoc | null>;

  constructor(conn: Connection, private readonly mode: Mode, private readonly changes: ChangeFeed, private readonly logs: ActivityLog, cacheTtlMs: number) {
    this.endpoints = conn.models.Endpoint ?? conn.model<EndpointDoc>('Endpoint', endpointSchema, 'endpoints');
    this.cache = new TtlCache(cacheTtlMs);
    changes.on('seller', (orgId) => this.cache.deletePrefix(`${orgId} `));
    changes.onReset(() => this.cache.deleteWhere(() => true));
  }

  async create(orgId: string, input: NewEndpoint): Promise<EndpointDoc> {
    const url = normalizeResource(input.url);
    const pricing = input.maxPriceUsdc !== undefined ? 'dynamic' : 'fixed';
    const priceAtomic = priceOf(input.maxPriceUsdc ?? input.priceUsdc!, pricing === 'dynamic' ? 'maxPriceUsdc' : 'priceUsdc');
    // In dev, another loopback spelling of the same URL is the same endpoint (resource-url.ts).
    const existing = await this.endpoints.findOne({ orgId, url: { $in: endpointUrlsFor(url, this.mode) }, deletedAt: null }).lean();
    if (existing) throw new AppError(409, 'endpoint_exists', `An endpoint for ${url} is already registered (${existing._id})`);
    const now = new Date();
    const doc = await this.endpoints.create({
      _id: input.id, orgId, url, priceUsdc: formatUsdc(priceAtomic), priceAtomic: priceAtomic.toString(), pricing,
      description: input.description ?? '', webhookUrl: input.webhookUrl, webhookSecret: input.webhookSecret, createdAt: now, updatedAt: now,
      discoverable: input.discoverable ?? false, inputSchemaJson: input.inputSchemaJson ?? undefined, outputSchemaJson: input.outputSchemaJson ?? undefined,
    });
    await this.changes.publish('seller', orgId);
    await this.logs.record({ orgId, action: 'payments.endpoint_registered', category: 'payments', description: `Endpoint ${url} registered at ${pricing === 'dynamic' ? 'up to ' : ''}${formatUsdc(priceAtomic)} USDC`, targetType: 'endpoint', targetId: doc._id });
    return doc.toObject();
  }

  async list(orgId: string): Promise<EndpointDoc[]> {
    return this.endpoints.find({ orgId, deletedAt: null }).sort({ createdAt: -1 }).lean();
  }

  async get(orgId: string, id: string): Promise<EndpointDoc> {
    const doc = await this.endpoints.findOne({ _id: id, orgId, deletedAt: null }).lean();
    if (!doc) throw notFound('Endpoint not found');
    return doc;
  }

  async update(orgId: string, id: string, change: EndpointChange): Promise<EndpointDoc> {
    const set: Record<string, unknown> = { updatedAt: new Date() };
    const unset: Record<string, 1> = {};
    // A fixed price, or the cap of a dynamic one: either one also sets how the endpoint is priced.
    const newPrice = change.maxPriceUsdc ?? change.priceUsdc;
    if (newPrice !== undefined) {
      const atomic = priceOf(newPrice, change.maxPriceUsdc !== undefined ? 'maxPriceUsdc' : 'priceUsdc');
      set.priceAtomic = atomic.toString();
      set.priceUsdc = formatUsdc(atomic);
      set.pricing = change.maxPriceUsdc !== undefined ? 'dynamic' : 'fixed';
    }
    if (change.description !== undefined) set.description = change.description;
    if (change.webhookUrl === null) { unset.webhookUrl = 1; unset.webhookSecret = 1; }
    else if (change.webhookUrl !== undefined) set.webhookUrl = change.webhookUrl;
    if (change.webhookSecret) set.webhookSecret = change.webhookSecret;
    if (change.discoverable !== undefined) set.discoverable = change.discoverable;
    for (const field of ['inputSchemaJson', 'outputSchemaJson'] as const) {
      if (change[field] === null) unset[field] = 1;
      else if (change[field] !== undefined) set[field] = change[field];
    }
    const doc = await this.endpoints.findOneAndUpdate({ _id: id, orgId, deletedAt: null }, { $set: set, ...(Object.keys(unset).length ? { $unset: unset } : {}) }, { returnDocument: 'after' }).lean();
    if (!doc) throw notFound('Endpoint not found');
    await this.changes.publish('seller', orgId);
    await this.logs.record({ orgId, action: 'payments.endpoint_updated', category: 'payments', description: `Endpoint ${doc.url} updated`, targetType: 'endpoint', targetId: id, metadata: { priceUsdc: doc.priceUsdc, webhookUrl: doc.webhookUrl ?? null } });
    return doc;
  }

  async delete(orgId: string, id: string): Promise<void> {
    const doc = await this.endpoints.findOneAndUpdate({ _id: id, orgId, deletedAt: null }, { $set: { deletedAt: new Date() } }).lean();
    if (!doc) throw notFound('Endpoint not found');
    await this.changes.publish('seller', orgId);
    await this.logs.record({ orgId, action: 'payments.endpoint_deleted', category: 'payments', description: `Endpoint ${doc.url} deleted`, targetType: 'endpoint', targetId: id });
  }

  /** The org's live endpoint for a resource URL, if registered (served from memory). */
  async forResource(orgId: string, resource: string): Promise<EndpointDoc | null> {
    return this.cache.through(`${orgId} ${resource}`, async () => {
      const urls = endpointUrlsFor(resource, this.mode);
      if (urls.length === 1) return this.endpoints.findOne({ orgId, url: resource, deletedAt: null }).lean();
      // Dev loopback aliases: registration allows one per URL, but a database from before that rule may
      // hold two spellings; the one the buyer paid for wins then.
      const found = await this.endpoints.find({ orgId, url: { $in: urls }, deletedAt: null }).lean();
      return found.find((e) => e.url === resource) ?? found[0] ?? null;
    });
  }

  /** The org's endpoint by id, deleted ones included (a payment records which endpoint it was for); served from memory. */
  async byId(orgId: string, id: string): Promise<EndpointDoc | null> {
    return this.cache.through(`${orgId} #${id}`, () => this.endpoints.findOne({ _id: id, orgId }).lean());
  }

  /** One org's endpoints that opted into discovery, oldest first (whether its seller accepts payments now is the caller's to ask). */
  async discoverableOf(orgId: string): Promise<EndpointDoc[]> {
    const endpoints = await this.endpoints.find({ orgId, discoverable: true, deletedAt: null }).lean();
    return endpoints.sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a._id < b._id ? -1 : 1));
  }

  /** Endpoints that opted into discovery, of sellers that accept payments now, oldest first. */
  async discoverable(accepting: (orgId: string) => Promise<SellerAccountDoc | null>): Promise<Array<{ endpoint: EndpointDoc; seller: SellerAccountDoc }>> {
    const endpoints = await this.endpoints.find({ discoverable: true, deletedAt: null }).lean();
    const listed: Array<{ endpoint: EndpointDoc; seller: SellerAccountDoc }> = [];
    for (const endpoint of endpoints.sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a._id < b._id ? -1 : 1))) {
      const seller = await accepting(endpoint.orgId);
      if (seller) listed.push({ endpoint, seller });
    }
    return listed;
  }
}

/** A price an endpoint is registered at, in atomic units; anything else is a 400 naming the field. */
export function priceOf(priceUsdc: string, field: 'priceUsdc' | 'maxPriceUsdc' = 'priceUsdc'): bigint {
  try {
    const atomic = parsePrice(priceUsdc);
    if (atomic <= 0n) throw new Error('must be greater than zero');
    return atomic;
  } catch (err) {
    throw new AppError(400, 'validation_error', `body.${field}: ${(err as Error).message}`);
  }
}
