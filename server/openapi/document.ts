import { z } from 'zod';
import { ALL_SCOPES } from '../platform/auth/scopes.js';
import { OPERATIONS, openApiPath, type Operation } from './operations.js';
import { errorBody } from './responses.js';

/**
 * The OpenAPI 3.1 document, generated from OPERATIONS and the zod schemas the routes validate with.
 * zod 4's own `toJSONSchema` writes JSON Schema 2020-12, which is OpenAPI 3.1's schema dialect, so the
 * schemas go in as they are: no translation layer and no second library to keep in step with zod.
 */

type JsonSchema = Record<string, unknown>;

const SECURITY_SCHEMES = {
  identityKey: { type: 'http', scheme: 'bearer', description: 'An identity key (`agi_…`): acts as one agent identity, limited to its scopes.' },
  platformKey: { type: 'http', scheme: 'bearer', description: 'A platform key (`agp_…`): the org admin. Manages identities, payment set-up, endpoints, seller keys; reads payments and logs.' },
  sellerKey: { type: 'http', scheme: 'bearer', description: 'A seller key (`loid-…`): used by seller middleware and facilitator clients; reads payments.' },
} as const;
const SCHEME_OF = { identity: 'identityKey', platform: 'platformKey', seller: 'sellerKey' } as const;

/** JSON Schema of what a client sends (inputs: defaults are optional, coercions take their input type). */
const inputSchema = (schema: z.ZodType): JsonSchema => strip(z.toJSONSchema(schema, { io: 'input', target: 'draft-2020-12', unrepresentable: 'any' }) as JsonSchema);
/** JSON Schema of what the server answers. */
const outputSchema = (schema: z.ZodType): JsonSchema => strip(z.toJSONSchema(schema, { io: 'output', target: 'draft-2020-12', unrepresentable: 'any' }) as JsonSchema);
const strip = ({ $schema: _ignored, ...rest }: JsonSchema) => rest;

/** Path or query parameters from a zod object schema: one parameter per property. */
function parameters(schema: z.ZodType | undefined, where: 'path' | 'query'): JsonSchema[] {
  if (!schema) return [];
  const json = inputSchema(schema) as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, property]) => ({
    name, in: where, required: where === 'path' || (json.required ?? []).includes(name), schema: property,
    ...(typeof property.description === 'string' ? { description: property.description } : {}),
  }));
}

/** A path pattern's parameters that no schema describes (e.g. `:orgId`) still need declaring. */
function undeclaredPathParameters(op: Operation, declared: JsonSchema[]): JsonSchema[] {
  const names = [...op.path.matchAll(/:(\w+)/g)].map((m) => m[1]!);
  return names.filter((name) => !declared.some((p) => p.name === name)).map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
}

function requestBody(op: Operation): JsonSchema | undefined {
  if (!op.body) return undefined;
  if (op.body === 'mcp') {
    return { required: true, content: { 'application/json': { schema: { type: 'object', description: 'A JSON-RPC 2.0 request, notification or response (MCP Streamable HTTP)', properties: { jsonrpc: { const: '2.0' }, method: { type: 'string' } }, required: ['jsonrpc'] } } } };
  }
  if (op.body === 'any') return { required: true, content: { 'application/json': { schema: { type: 'object' } } } };
  // A route whose schema takes `{}` also takes no body at all (the body parser reads none as `{}`).
  return { required: !op.body.safeParse({}).success, content: { 'application/json': { schema: inputSchema(op.body) } } };
}

const ERROR_REF = { $ref: '#/components/schemas/Error' };

function responses(op: Operation): Record<string, JsonSchema> {
  const errorSchema = op.errors ? outputSchema(op.errors) : ERROR_REF;
  const errorContent = op.html
    ? { 'application/json': { schema: errorSchema }, 'text/html': { schema: { type: 'string' } } }
    : { 'application/json': { schema: errorSchema } };
  const error = (description: string) => ({ description, content: errorContent });
  const okTypes = typeof op.ok.type === 'string' ? [op.ok.type] : op.ok.type ?? ['application/json'];
  const okSchema = (type: string) => (op.ok.schema ? outputSchema(op.ok.schema) : type === 'application/json' ? { type: 'object' } : { type: 'string' });
  const out: Record<string, JsonSchema> = {
    [op.ok.status]: op.ok.status === 302
      ? { description: op.ok.description }
      : { description: op.ok.description, content: Object.fromEntries(okTypes.map((type) => [type, { schema: okSchema(type) }])) },
  };
  // Every route refuses a malformed request (NUL, deep JSON, bad parameters) and may be rate-limited.
  out[400] = error('The request is invalid: `validation_error` names the field');
  if (op.auth !== 'none') {
    out[401] = error('No key, or an unknown or revoked one');
    out[403] = error(op.scopes ? `The key is of another tier, or lacks the scope ${op.scopes.join(' or ')}` : 'The key is of another tier');
  }
  out[404] = error('Not found (another org\'s records are not found either)');
  if (op.body) out[413] = error('The body is too large');
  out[429] = error('Too many requests');
  for (const [status, also] of Object.entries(op.also ?? {})) {
    if (typeof also === 'string') out[status] = error(also);
    else out[status] = also.schema instanceof z.ZodNever ? { description: also.description } : { description: also.description, content: { 'application/json': { schema: outputSchema(also.schema) } } };
  }
  if (takesIdempotencyKey(op) && !out[409]) out[409] = error('`idempotency_key_reused`: the Idempotency-Key was used with another request in the last 24 hours; `idempotency_key_in_progress`: a request with it is still running');
  out.default = error('Any other error, in the same shape');
  return out;
}

/** Every POST with an API key takes `Idempotency-Key` (server/platform/idempotency.ts); MCP's JSON-RPC and the standard x402 API do not (app.ts). */
const takesIdempotencyKey = (op: Operation) => op.method === 'post' && op.auth !== 'none' && !op.path.startsWith('/mcp') && !op.path.startsWith('/v0/x402/');

const IDEMPOTENCY_KEY_PARAMETER: JsonSchema = {
  name: 'Idempotency-Key', in: 'header', required: false,
  description: 'One intent, one effect: the same key and request within 24 hours answer the first answer again (with `Idempotent-Replayed: true`) and do nothing; the same key with another request is 409 `idempotency_key_reused`. Scoped to the API key.',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]{1,255}$' },
};

function operationObject(op: Operation): JsonSchema {
  const params = [...parameters(op.params, 'path'), ...parameters(op.query, 'query'), ...(takesIdempotencyKey(op) ? [IDEMPOTENCY_KEY_PARAMETER] : [])];
  const tiers = op.auth === 'none' ? [] : op.auth;
  return {
    operationId: `${op.method}${openApiPath(op.path).replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
    summary: op.summary,
    tags: [op.tag],
    ...(tiers.length ? { security: tiers.map((tier) => ({ [SCHEME_OF[tier]]: [] })) } : { security: [] }),
    ...(op.scopes ? { 'x-required-scopes': op.scopes } : {}),
    ...(tiers.length ? { 'x-key-tiers': tiers } : {}),
    description: [
      tiers.length ? `Keys: ${tiers.join(' or ')}${op.scopes ? ` (an identity key needs the scope ${op.scopes.map((s) => `\`${s}\``).join(' and ')})` : ''}.` : 'Public: no key.',
    ].join(' '),
    parameters: [...params, ...undeclaredPathParameters(op, params)],
    ...(requestBody(op) ? { requestBody: requestBody(op) } : {}),
    responses: responses(op),
  };
}

export function openApiDocument(options: { baseUrl: string; version: string; operations?: readonly Operation[] }): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const op of options.operations ?? OPERATIONS) {
    const path = openApiPath(op.path);
    (paths[path] ??= {})[op.method] = operationObject(op);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'agentgate API',
      version: options.version,
      description: 'The agentgate backend: an x402 facilitator (our middleware\'s redeem and the standard /v0/x402 API), payment records with signed receipts, webhooks, and an identity service for software agents (mail, vault, calendar, did:web, wallet, chat, MCP). Every error is `{error, message, status}`.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: options.baseUrl }],
    tags: [...new Set((options.operations ?? OPERATIONS).map((op) => op.tag))].map((name) => ({ name })),
    paths,
    components: {
      schemas: { Error: outputSchema(errorBody) },
      securitySchemes: SECURITY_SCHEMES,
    },
    'x-scopes': ALL_SCOPES,
  };
}
