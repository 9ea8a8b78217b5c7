// The A2A v1.0 agent cards: the service's at /.well-known/agent-card.json and each org's at
// /.well-known/agents/<orgId>. Checked against the A2A project's own artefacts (fixtures/README.md): the
// JSON Schema generated from a2a.proto, and the REQUIRED fields read from a2a.proto itself (the schema does
// not carry them). Signatures are verified with jose and the RFC 8785 author's canonicalize, not our code.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import Ajv2020 from 'ajv/dist/2020.js';
import canonicalizeModule from 'canonicalize';
import { base64url, decodeProtectedHeader, flattenedVerify, importJWK, type JWK } from 'jose';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { openStorefront } from '../support/storefront.js';
import { parseEd25519PublicKey } from 'agentgate-x402-wire';

// canonicalize is CommonJS whose typings claim an ES default export: at run time the import is the function.
const canonicalize = canonicalizeModule as unknown as (input: unknown) => string | undefined;
const fixture = (name: string) => readFileSync(fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url)), 'utf8');
const schema = JSON.parse(fixture('a2a.json'));
const ajv = new (Ajv2020 as unknown as typeof Ajv2020.default)({ strict: false, allErrors: true });
ajv.addSchema(schema, 'a2a.json');
const validateCard = ajv.getSchema('a2a.json#/$defs/AgentCard')!;

/** a2a.proto's messages: each field's JSON name, type, and whether it is `[(google.api.field_behavior) = REQUIRED]`. */
type ProtoField = { json: string; type: string; repeated: boolean; map: boolean; required: boolean };
function protoMessages(proto: string): Map<string, ProtoField[]> {
  const messages = new Map<string, ProtoField[]>();
  const lines = proto.split('\n').map((l) => l.replace(/\/\/.*$/, '').trim());
  let current: string | undefined;
  let depth = 0;
  for (const line of lines) {
    const open = /^message (\w+) \{$/.exec(line);
    if (open && depth === 0) { current = open[1]!; messages.set(current, []); depth = 1; continue; }
    if (!current) continue;
    depth += (line.match(/\{/g) ?? []).length - (line.match(/\}/g) ?? []).length;
    if (depth === 0) { current = undefined; continue; }
    const field = /^(optional |repeated )?(map<\s*\w+\s*,\s*([\w.]+)\s*>|[\w.]+) (\w+) = \d+(.*);$/.exec(line);
    if (!field) continue;
    const [, label, type, mapValue, name, options] = field;
    messages.get(current)!.push({
      json: name!.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase()),
      type: mapValue ?? type!, repeated: label === 'repeated ', map: Boolean(mapValue), required: /field_behavior\)\s*=\s*REQUIRED/.test(options!),
    });
  }
  return messages;
}
const MESSAGES = protoMessages(fixture('a2a.proto'));

/** Every REQUIRED field present, every REQUIRED list non-empty (A2A 5.7), all the way down the card. */
function missingRequired(message: string, value: Record<string, unknown>, path = message): string[] {
  const fields = MESSAGES.get(message);
  if (!fields) return [];
  const missing: string[] = [];
  for (const field of fields) {
    const v = value[field.json];
    if (field.required && (v === undefined || (Array.isArray(v) && v.length === 0))) missing.push(`${path}.${field.json}`);
    if (v === undefined || !MESSAGES.has(field.type)) continue;
    const children = field.map ? Object.entries(v as object) : field.repeated ? (v as unknown[]).map((c, i) => [String(i), c] as const) : [['', v] as const];
    for (const [key, child] of children) missing.push(...missingRequired(field.type, child as Record<string, unknown>, `${path}.${field.json}${key ? `[${key}]` : ''}`));
  }
  return missing;
}

/** A2A 8.4.1: a signed card carries no default values (empty strings or lists), or its verifier would sign other bytes. */
function defaultValues(value: unknown, path = '$'): string[] {
  if (value === '' || (Array.isArray(value) && value.length === 0)) return [path];
  if (Array.isArray(value)) return value.flatMap((v, i) => defaultValues(v, `${path}[${i}]`));
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => defaultValues(v, `${path}.${k}`));
  return [];
}

const A2A_BINDINGS = ['JSONRPC', 'GRPC', 'HTTP+JSON'];

/** Verifies each signature as A2A 8.4.3 says, with jose: the key from the header's jku, the payload rebuilt from the card. */
async function verifySignatures(card: any, didDocument: any): Promise<Array<{ kid: string; valid: boolean }>> {
  const { signatures, ...content } = card;
  const payload = base64url.encode(canonicalize(content)!);
  const results = [];
  for (const signature of signatures) {
    const header = decodeProtectedHeader({ protected: signature.protected, payload, signature: signature.signature } as never);
    const jwks = await (await fetch(header.jku!)).json() as { keys: JWK[] };
    const jwk = jwks.keys.find((k) => k.kid === header.kid)!;
    // The JWK is the DID document's key: same id, same bytes.
    const method = didDocument.verificationMethod.find((m: any) => m.id === header.kid);
    expect(Buffer.from(base64url.decode(jwk.x!))).toEqual(Buffer.from(parseEd25519PublicKey(method.publicKeyMultibase)!));
    const key = await importJWK(jwk, 'EdDSA');
    const valid = await flattenedVerify({ protected: signature.protected, payload, signature: signature.signature }, key).then(() => true, () => false);
    results.push({ kid: header.kid!, valid });
  }
  return results;
}

let server: TestServer;
let didDocument: any;
beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  didDocument = (await server.request('GET', '/.well-known/did.json')).body;
});
afterAll(async () => { await server.close(); });

describe("the service's card at /.well-known/agent-card.json", () => {
  let res: Awaited<ReturnType<TestServer['request']>>;
  beforeAll(async () => { res = await server.request('GET', '/.well-known/agent-card.json'); });

  it('validates against the A2A v1 JSON Schema and has every field a2a.proto marks REQUIRED', () => {
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(validateCard(res.body) ? [] : validateCard.errors).toEqual([]);
    expect(missingRequired('AgentCard', res.body)).toEqual([]);
    expect(defaultValues(res.body)).toEqual([]);
    // The check can fail: a card without a required field, or with a field A2A does not define, does.
    const { supportedInterfaces: _gone, ...incomplete } = res.body;
    expect(missingRequired('AgentCard', incomplete)).toEqual(['AgentCard.supportedInterfaces']);
    expect(validateCard({ ...res.body, url: server.url })).toBe(false);
  });

  it('says how the agent is reached (MCP, x402, the REST API) and promises no A2A binding', async () => {
    const interfaces = res.body.supportedInterfaces as Array<{ url: string; protocolBinding: string; protocolVersion: string }>;
    expect(interfaces.map((i) => i.url)).toEqual([`${server.url}/mcp`, `${server.url}/v0/x402`, `${server.url}/v0`]);
    expect(interfaces.filter((i) => A2A_BINDINGS.includes(i.protocolBinding))).toEqual([]);
    expect(interfaces.every((i) => /^(https?:|urn:)/.test(i.protocolBinding))).toBe(true);
    expect(res.body.description).toMatch(/no A2A task endpoint/);
    // Each interface is there: MCP initialises with an identity key, the facilitator answers /supported.
    const agent = await signUp(server);
    const mcp = await fetch(interfaces[0]!.url, {
      method: 'POST',
      headers: { authorization: `Bearer ${agent.identity.rawKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: interfaces[0]!.protocolVersion, capabilities: {}, clientInfo: { name: 'card-test', version: '1' } } }),
    });
    expect(mcp.status).toBe(200);
    expect(JSON.stringify(await mcp.json())).toContain(`"protocolVersion":"${interfaces[0]!.protocolVersion}"`);
    expect((await fetch(`${interfaces[1]!.url}/supported`)).status).toBe(200);
  });

  it('has securitySchemes for the three key tiers and a skill per area, its MCP tools named', () => {
    expect(Object.keys(res.body.securitySchemes).sort()).toEqual(['identityKey', 'platformKey', 'sellerKey']);
    for (const scheme of Object.values(res.body.securitySchemes) as any[]) expect(scheme.httpAuthSecurityScheme.scheme).toBe('Bearer');
    const skills = new Map((res.body.skills as any[]).map((s) => [s.id, s]));
    expect([...skills.keys()]).toEqual(['mail', 'vault', 'calendar', 'payments', 'wallet', 'did', 'chat', 'x402-facilitator', 'x402-discovery', 'agent-signup']);
    expect(skills.get('mail').tags).toEqual(expect.arrayContaining(['mcp', 'mail_send', 'mail_list_messages']));
    expect(skills.get('payments').tags).toContain('payments_pay');
    expect(skills.get('did').securityRequirements).toEqual([{ schemes: { identityKey: { list: ['identity:read', 'identity:sign', 'identity:verify'] } } }]);
    expect(skills.get('x402-facilitator').securityRequirements).toEqual([{ schemes: { sellerKey: {} } }]);
  });

  it('is signed with the service did:web key as A2A 8.4 says: JWS over RFC 8785 JSON, verified by jose', async () => {
    const [signature] = res.body.signatures;
    expect(JSON.parse(Buffer.from(signature.protected, 'base64url').toString())).toEqual({
      alg: 'EdDSA', typ: 'JOSE', kid: `did:web:${server.config.DID_DOMAIN}#key-1`, jku: `${server.url}/.well-known/jwks.json`,
    });
    expect(await verifySignatures(res.body, didDocument)).toEqual([{ kid: `did:web:${server.config.DID_DOMAIN}#key-1`, valid: true }]);
    // A card changed after signing does not verify.
    expect(await verifySignatures({ ...res.body, description: `${res.body.description} (edited)` }, didDocument)).toEqual([{ kid: expect.any(String), valid: false }]);
  });

  it('is served with Cache-Control and an ETag; If-None-Match with it answers 304', async () => {
    const etag = res.headers.get('etag')!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
    expect(res.headers.get('cache-control')).toBe('public, max-age=300');
    for (const match of [etag, `W/${etag}`, `"other", ${etag}`]) {
      const again = await fetch(`${server.url}/.well-known/agent-card.json`, { headers: { 'if-none-match': match } });
      expect(again.status).toBe(304);
      expect(again.headers.get('etag')).toBe(etag);
      expect(await again.text()).toBe('');
    }
    expect((await fetch(`${server.url}/.well-known/agent-card.json`, { headers: { 'if-none-match': '"stale"' } })).status).toBe(200);
  });
});

describe("an org's card at /.well-known/agents/<orgId>", () => {
  it('has the same A2A shape: identities reached by mail, listed paid resources by x402, signed, cached', async () => {
    const agent = await signUp(server);
    const url = `/.well-known/agents/${agent.org_id}`;
    const first = await server.request('GET', url);
    expect(first.status).toBe(200);
    expect(validateCard(first.body) ? [] : validateCard.errors).toEqual([]);
    expect(missingRequired('AgentCard', first.body)).toEqual([]);
    expect(first.body.supportedInterfaces).toEqual([
      { url: `mailto:${agent.identity.emailAddress}`, protocolBinding: 'urn:ietf:rfc:5321', protocolVersion: 'RFC 5321' },
      { url: `${server.url}/mcp`, protocolBinding: expect.stringMatching(/^https:\/\/modelcontextprotocol\.io\//), protocolVersion: expect.any(String) },
    ]);
    expect(first.body.skills.map((s: any) => s.id)).toEqual(expect.arrayContaining([`${agent.identity.identityId}:mail`, `${agent.identity.identityId}:payments`]));
    expect(first.body.skills[0].description).toContain(`did:web:${server.config.DID_DOMAIN}:identities:${agent.identity.identityId}`);

    // A second identity and a paid endpoint listed in discovery; one not listed stays off the card.
    const second = await server.request('POST', '/v0/platform/identities', { key: agent.platform_key, body: {} });
    expect(second.status).toBe(201);
    const payTo = privateKeyToAccount(generatePrivateKey()).address;
    expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
    const shop = await openStorefront(server, { platformKey: agent.platform_key }, {
      'GET /forecast': { price: '$0.05', endpoint: { description: 'Forecast', discoverable: true } },
      'GET /private': { price: '$0.05' },
    });
    const listed = shop.resource('/forecast');

    const card = await server.request('GET', url);
    expect(validateCard(card.body) ? [] : validateCard.errors).toEqual([]);
    expect(missingRequired('AgentCard', card.body)).toEqual([]);
    expect(defaultValues(card.body)).toEqual([]);
    expect(card.body.supportedInterfaces.map((i: any) => i.url)).toEqual([
      `mailto:${agent.identity.emailAddress}`, `mailto:${second.body.emailAddress}`, listed, `${server.url}/mcp`,
    ]);
    expect(card.body.supportedInterfaces.filter((i: any) => A2A_BINDINGS.includes(i.protocolBinding))).toEqual([]);
    const paid = card.body.skills.filter((s: any) => s.tags.includes('x402'));
    expect(paid).toEqual([expect.objectContaining({ name: 'Forecast', examples: [listed] })]);
    expect(JSON.stringify(card.body)).not.toContain(shop.resource('/private'));
    expect(await verifySignatures(card.body, didDocument)).toEqual([{ kid: `did:web:${server.config.DID_DOMAIN}#key-1`, valid: true }]);

    // The card changed, so did its ETag: the old one no longer gets a 304, the new one does.
    expect(card.headers.get('etag')).not.toBe(first.headers.get('etag'));
    expect((await fetch(`${server.url}${url}`, { headers: { 'if-none-match': first.headers.get('etag')! } })).status).toBe(200);
    expect((await fetch(`${server.url}${url}`, { headers: { 'if-none-match': card.headers.get('etag')! } })).status).toBe(304);
  });

  it('is the same card, signature and ETag from a second process on the same database', async () => {
    const agent = await signUp(server);
    const other = await startTestServer({ MONGODB_DB: server.config.MONGODB_DB, MASTER_KEY: Buffer.from(server.config.MASTER_KEY as unknown as Uint8Array).toString('hex'), BASE_URL: server.config.BASE_URL, DID_DOMAIN: server.config.DID_DOMAIN });
    try {
      const here = await fetch(`${server.url}/.well-known/agents/${agent.org_id}`);
      const there = await fetch(`${other.url}/.well-known/agents/${agent.org_id}`);
      expect(there.headers.get('etag')).toBe(here.headers.get('etag'));
      expect(await there.json()).toEqual(await here.json());
      const service = await fetch(`${other.url}/.well-known/agent-card.json`, { headers: { 'if-none-match': (await server.request('GET', '/.well-known/agent-card.json')).headers.get('etag')! } });
      expect(service.status).toBe(304);
    } finally {
      await other.stop();
    }
  });

  it('answers 404 {error, message, status} for an unknown or malformed org id', async () => {
    for (const orgId of ['org_doesnotexist', 'nope', 'org_UPPER']) {
      const res = await server.request('GET', `/.well-known/agents/${orgId}`);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'not_found', message: 'Agent card not found', status: 404 });
    }
  });
});

describe('the JWK Set at /.well-known/jwks.json', () => {
  it('publishes the service key that is in the DID document', async () => {
    const res = await server.request('GET', '/.well-known/jwks.json');
    expect(res.status).toBe(200);
    const [key] = res.body.keys;
    expect(key).toMatchObject({ kty: 'OKP', crv: 'Ed25519', kid: didDocument.verificationMethod[0].id, use: 'sig', alg: 'EdDSA' });
    expect(Buffer.from(base64url.decode(key.x))).toEqual(Buffer.from(parseEd25519PublicKey(didDocument.verificationMethod[0].publicKeyMultibase)!));
  });
});
