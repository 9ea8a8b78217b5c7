import { Schema, type Connection, type Model } from 'mongoose';
import { z } from 'zod';
import Ajv2020 from 'ajv/dist/2020.js';
import { isDuplicateKey } from '../platform/errors.js';

/**
 * The x402 `bazaar` extension on the facilitator side (specs/extensions/bazaar.md): a seller on the
 * official SDKs declares its route's discovery info in the 402, the buyer's client echoes it in the
 * PaymentPayload, and the facilitator validates `info` against `schema` and catalogs the resource when
 * the payment settles. The catalog is one document per (org, resource URL, MCP tool), written by an
 * upsert on that `_id`, so any number of processes catalog the same resource into one entry.
 * The verify and settle answers say what became of it in the `EXTENSION-RESPONSES` header.
 */

export const BAZAAR = 'bazaar';
export const EXTENSION_RESPONSES_HEADER = 'EXTENSION-RESPONSES';

/** The most of a declaration we validate and keep (its info and schema as JSON text). */
const MAX_DECLARATION_BYTES = 32 * 1024;

const httpInput = z.object({ type: z.literal('http'), method: z.enum(['GET', 'HEAD', 'DELETE', 'POST', 'PUT', 'PATCH']) }).loose();
const mcpInput = z.object({ type: z.literal('mcp'), tool: z.string().min(1).max(200), inputSchema: z.record(z.string(), z.unknown()) }).loose();
const declaration = z.object({
  info: z.object({ input: z.discriminatedUnion('type', [httpInput, mcpInput]), output: z.record(z.string(), z.unknown()).optional() }).loose(),
  schema: z.record(z.string(), z.unknown()),
  routeTemplate: z.string().optional(),
}).loose();

export type BazaarStatus = { status: 'success' | 'processing' } | { status: 'rejected'; rejectedReason: string };
export type BazaarDeclaration = z.output<typeof declaration>;

// addUsedSchema: false: a compiled schema is not registered under its $id, or the next schema with that $id
// (a seller's new version of it, another seller's copy of one template) would fail to compile ("already
// exists") for the life of the process. Each declaration's schema stands alone.
const ajv = new (Ajv2020 as unknown as typeof Ajv2020.default)({ strict: false, allErrors: false, validateSchema: true, loadSchema: undefined, addUsedSchema: false });

/**
 * The validator of a declaration's schema. A seller's route sends the same schema with every payment, so
 * validators are kept by the schema's JSON (compiling costs milliseconds of the event loop), at most
 * VALIDATORS of them; the oldest is dropped from the instance too, so nothing accumulates. Per process
 * and derived from the request only: nothing another process must agree with.
 */
const VALIDATORS = 256;
const validators = new Map<string, ReturnType<typeof ajv.compile>>();
function compiled(schema: Record<string, unknown>) {
  const key = JSON.stringify(schema);
  const cached = validators.get(key);
  if (cached) return cached;
  let validate: ReturnType<typeof ajv.compile>;
  try {
    validate = ajv.compile(schema);
  } catch (err) {
    ajv.removeSchema(schema);
    throw err;
  }
  validators.set(key, validate);
  if (validators.size > VALIDATORS) {
    const [oldestKey, oldest] = validators.entries().next().value!;
    validators.delete(oldestKey);
    ajv.removeSchema(oldest.schema as object);
  }
  return validate;
}

/** A payload's bazaar declaration, validated as the spec asks (shape, then `info` against its own `schema`), or why not. */
export function readDeclaration(extension: unknown): { ok: true; declaration: BazaarDeclaration } | { ok: false; reason: string } {
  let size: number;
  try { size = JSON.stringify(extension ?? null).length; } catch { return { ok: false, reason: 'the bazaar extension is not JSON' }; }
  if (size > MAX_DECLARATION_BYTES) return { ok: false, reason: `the bazaar extension is larger than ${MAX_DECLARATION_BYTES} bytes` };
  const parsed = declaration.safeParse(extension);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, reason: `bazaar.${issue?.path.join('.') || 'extension'}: ${issue?.message ?? 'is invalid'}` };
  }
  const { schema } = parsed.data;
  if (schema.$schema !== undefined && schema.$schema !== 'https://json-schema.org/draft/2020-12/schema') return { ok: false, reason: 'bazaar.schema must be JSON Schema draft 2020-12' };
  let valid: boolean;
  let errors: string | undefined;
  try {
    const validate = compiled(schema);
    valid = validate(parsed.data.info) as boolean;
    errors = validate.errors?.[0] ? `${validate.errors[0].instancePath || '/'} ${validate.errors[0].message}` : undefined;
  } catch (err) {
    return { ok: false, reason: `bazaar.schema is not a usable JSON Schema: ${(err as Error).message.slice(0, 200)}` };
  }
  if (!valid) return { ok: false, reason: `info failed schema validation: ${errors ?? 'invalid'}` };
  return { ok: true, declaration: parsed.data };
}

/** `EXTENSION-RESPONSES`: base64 of `{bazaar: {status, rejectedReason?}}`. */
export function extensionResponsesHeader(bazaar: BazaarStatus): string {
  return Buffer.from(JSON.stringify({ [BAZAAR]: bazaar })).toString('base64');
}

// Service metadata on `resource` (bazaar.md, "Validation Rules"): a field that breaks its rule is dropped.
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;
const okName = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= 32 && PRINTABLE_ASCII.test(v);
export function sanitizeServiceMetadata(resource: Record<string, unknown>): { serviceName?: string; tags?: string[]; iconUrl?: string } {
  const out: { serviceName?: string; tags?: string[]; iconUrl?: string } = {};
  if (okName(resource.serviceName)) out.serviceName = resource.serviceName;
  if (Array.isArray(resource.tags)) {
    const seen = new Set<string>();
    const tags = resource.tags.filter((t): t is string => okName(t) && !seen.has(t.toLowerCase()) && Boolean(seen.add(t.toLowerCase()))).slice(0, 5);
    if (tags.length) out.tags = tags;
  }
  if (typeof resource.iconUrl === 'string' && okIconUrl(resource.iconUrl)) out.iconUrl = resource.iconUrl;
  return out;
}

function okIconUrl(value: string): boolean {
  if (value.length > 2048 || /[\x00-\x1f\x7f]/.test(value)) return false;
  let url: URL;
  try { url = new URL(value); } catch { return false; }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  if (url.username || url.password) return false;
  // URL already gives the host IDN-normalized (UTS #46) and percent-decoded where a host may be.
  const host = decodeURIComponent(url.hostname).toLowerCase();
  if (['localhost', 'localhost.localdomain', 'ip6-localhost', 'ip6-loopback'].includes(host)) return false;
  if (host.startsWith('[') || /^\d+(\.\d+){0,3}$/.test(host) || /^0x[0-9a-f]+$/.test(host)) return false;
  return true;
}

/** bazaar.md `routeTemplate` rules: a path of safe characters and `:param`s, no `..` or `://` even percent-decoded. */
export function isValidRouteTemplate(template: unknown): template is string {
  if (typeof template !== 'string' || !/^\/[a-zA-Z0-9_/:.\-~%]+$/.test(template)) return false;
  let decoded: string;
  try { decoded = decodeURIComponent(template); } catch { return false; }
  return !decoded.includes('..') && !decoded.includes('://');
}

/** The catalog URL of a paid request: its origin and route template, else its concrete path; never its query. */
function catalogUrl(raw: unknown, routeTemplate: unknown): string | undefined {
  if (typeof raw !== 'string' || raw.length > 2048) return undefined;
  let url: URL;
  try { url = new URL(raw); } catch { return undefined; }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  return `${url.origin}${isValidRouteTemplate(routeTemplate) ? routeTemplate : url.pathname}`;
}

/** One cataloged resource. JSON text where a seller's keys could be anything (`$schema` is no MongoDB field name). */
export interface BazaarEntryDoc {
  /** `<orgId> <resource URL>`, plus ` <tool>` for an MCP tool (the spec's catalog key). */
  _id: string;
  orgId: string;
  resource: string;
  type: 'http' | 'mcp';
  tool?: string;
  acceptsJson: string;
  declarationJson: string;
  description?: string;
  mimeType?: string;
  serviceName?: string;
  tags?: string[];
  iconUrl?: string;
  firstSeenAt: Date;
  lastUpdated: Date;
}

const entrySchema = new Schema<BazaarEntryDoc>({
  _id: String,
  orgId: { type: String, required: true, index: true },
  resource: { type: String, required: true },
  type: { type: String, required: true },
  tool: String,
  acceptsJson: { type: String, required: true },
  declarationJson: { type: String, required: true },
  description: String,
  mimeType: String,
  serviceName: String,
  tags: [String],
  iconUrl: String,
  firstSeenAt: { type: Date, required: true },
  lastUpdated: { type: Date, required: true },
}, { versionKey: false });

export interface CatalogInput {
  orgId: string;
  declaration: BazaarDeclaration;
  /** The PaymentPayload's `resource` (url, description, mimeType, service metadata). */
  resource: Record<string, unknown>;
  /** The requirements the payment settled against. */
  accepted: Record<string, unknown>;
}

/** The resources cataloged from settled payments' bazaar declarations. */
export class BazaarCatalog {
  private readonly entries: Model<BazaarEntryDoc>;

  constructor(conn: Connection) {
    this.entries = conn.models.BazaarEntry ?? conn.model<BazaarEntryDoc>('BazaarEntry', entrySchema, 'bazaar_catalog');
  }

  /** Catalogs (or refreshes) a resource: one upsert on its key, the same entry whichever process writes it. */
  async record({ orgId, declaration: decl, resource, accepted }: CatalogInput): Promise<BazaarStatus> {
    const url = catalogUrl(resource.url, decl.routeTemplate);
    if (!url) return { status: 'rejected', rejectedReason: 'the payment names no http(s) resource URL to catalog' };
    const tool = decl.info.input.type === 'mcp' ? String(decl.info.input.tool) : undefined;
    const now = new Date();
    const str = (v: unknown, max: number) => (typeof v === 'string' && v.length > 0 ? v.slice(0, max) : undefined);
    const fields = {
      orgId, resource: url, type: decl.info.input.type, ...(tool ? { tool } : {}),
      acceptsJson: JSON.stringify([accepted]), declarationJson: JSON.stringify(decl),
      description: str(resource.description, 1000), mimeType: str(resource.mimeType, 200),
      ...sanitizeServiceMetadata(resource), lastUpdated: now,
    };
    const write = () => this.entries.updateOne({ _id: `${orgId} ${url}${tool ? ` ${tool}` : ''}` }, { $set: fields, $setOnInsert: { firstSeenAt: now } }, { upsert: true });
    // Two processes inserting the same new key at once: one insert wins, the other's upsert fails on the
    // unique _id and, retried, updates the entry the winner wrote.
    await write().catch((err) => { if (isDuplicateKey(err)) return write(); throw err; });
    return { status: 'success' };
  }

  /** Every entry, first cataloged first. */
  async all(): Promise<BazaarEntryDoc[]> {
    const entries = await this.entries.find({}).lean();
    return entries.sort((a, b) => a.firstSeenAt.getTime() - b.firstSeenAt.getTime() || (a._id < b._id ? -1 : 1));
  }
}
