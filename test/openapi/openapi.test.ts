// The OpenAPI document at /openapi.json: generated from the routes' own zod schemas, it names every route
// the app mounts and nothing else, with the key tiers and scopes each one really enforces; /docs renders it
// from files the backend serves itself.
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { faucetConfig } from '../support/chain.js';
import { mountedRoutes, routesMountedTwice } from '../support/routes.js';
import { OPERATIONS, openApiPath } from '../../server/openapi/operations.js';
import { DEV_EXTENSION } from '../../server/dev/routes.js';
import { ALL_SCOPES } from '../../server/platform/auth/scopes.js';

let server: TestServer;
let doc: any;
const keys: Record<'identity' | 'platform' | 'seller' | 'noScopes', string> = {} as never;

beforeAll(async () => {
  server = await startTestServer(await faucetConfig('1'));
  const agent = await signUp(server);
  keys.identity = agent.identity.rawKey;
  keys.platform = agent.platform_key;
  keys.seller = (await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} })).body.apiKey;
  const bare = await server.request('POST', '/v0/platform/identities', { key: agent.platform_key, body: { name: `bare${Date.now().toString(36)}` } });
  expect(bare.status).toBe(201);
  const stripped = await server.request('PATCH', `/v0/platform/identities/${bare.body.id ?? bare.body.identityId}`, { key: agent.platform_key, body: { removeScopes: [...ALL_SCOPES] } });
  expect(stripped.status).toBe(200);
  keys.noScopes = bare.body.rawKey;
  const res = await server.request('GET', '/openapi.json');
  expect(res.status).toBe(200);
  doc = res.body;
});
afterAll(async () => { await server?.close(); });

/** `GET /v0/payments/{id}` for every operation in the document. */
const documented = () => Object.entries(doc.paths as Record<string, Record<string, unknown>>)
  .flatMap(([path, ops]) => Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`)).sort();

describe('/openapi.json', () => {
  it('is OpenAPI 3.1 with the three key tiers as bearer security schemes and the error shape as a component', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([{ url: server.url }]);
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['identityKey', 'platformKey', 'sellerKey']);
    for (const scheme of Object.values(doc.components.securitySchemes) as any[]) expect(scheme).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.components.schemas.Error).toMatchObject({ type: 'object', required: ['error', 'message', 'status'] });
  });

  it('gives no success status the error shape (a route answering 201 or 200 besides its main status)', () => {
    const wrong = Object.entries(doc.paths as Record<string, Record<string, { responses: Record<string, any> }>>).flatMap(([path, ops]) =>
      Object.entries(ops).flatMap(([method, op]) => Object.entries(op.responses)
        .filter(([status, response]) => status.startsWith('2') && JSON.stringify(response.content ?? {}).includes('#/components/schemas/Error'))
        .map(([status]) => `${method.toUpperCase()} ${path} ${status}`)));
    expect(wrong).toEqual([]);
  });

  it('names every route the app mounts, and nothing the app does not mount', () => {
    const mounted = mountedRoutes(server.app).map((route) => { const [method, path] = route.split(' '); return `${method} ${openApiPath(path!)}`; }).sort();
    expect(documented()).toEqual(mounted);
  });

  it('mounts each route once, and documents each operation once (two areas taking one path: one of them never answers)', () => {
    expect(routesMountedTwice(server.app)).toEqual([]);
    const operations = OPERATIONS.map((op) => `${op.method.toUpperCase()} ${op.path}`);
    expect(operations.filter((op, i) => operations.indexOf(op) !== i)).toEqual([]);
  });

  it('describes bodies and parameters with the schemas the routes validate with', () => {
    const create = doc.paths['/v0/payments/endpoints'].post;
    const body = create.requestBody.content['application/json'].schema;
    // A fixed price or a dynamic one's cap: one of the two (the route refuses both or neither).
    expect(body).toMatchObject({ type: 'object', additionalProperties: false, required: ['url'] });
    expect(Object.keys(body.properties)).toEqual(expect.arrayContaining(['priceUsdc', 'maxPriceUsdc']));
    expect(body.properties.webhookUrl).toMatchObject({ type: 'string', format: 'uri' });
    const get = doc.paths['/v0/payments/{id}'].get;
    expect(get.parameters).toEqual([expect.objectContaining({ name: 'id', in: 'path', required: true, schema: expect.objectContaining({ type: 'string', pattern: expect.any(String) }) })]);
    // A payment, or a call paid through a channel (`chc_…`), each with its signed receipt.
    const [paymentDetail, channelCall] = get.responses['200'].content['application/json'].schema.anyOf;
    expect(paymentDetail.properties.offerReceipt).toBeDefined();
    expect([channelCall.properties.scheme, channelCall.properties.signedReceipt]).toEqual([expect.objectContaining({ const: 'batch-settlement' }), expect.anything()]);
    expect(get.responses['404'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
    const list = doc.paths['/v0/messages'].get;
    expect(list.parameters.map((p: any) => p.name)).toEqual(expect.arrayContaining(['limit', 'pageToken']));
    expect(list.parameters.every((p: any) => p.in === 'query')).toBe(true);
  });

  it('documents the tiers and the scope of every operation as the routes enforce them', async () => {
    const tierKey = { identity: keys.identity, platform: keys.platform, seller: keys.seller } as const;
    for (const op of [...OPERATIONS, ...DEV_EXTENSION.operations]) {
      const described = doc.paths[openApiPath(op.path)][op.method];
      if (op.auth === 'none') {
        expect(described.security).toEqual([]);
        continue;
      }
      const path = op.path.replace(/:(\w+)/g, 'x');
      const body = op.method === 'get' || op.method === 'delete' ? undefined : {};
      expect(described.security).toEqual(op.auth.map((tier) => ({ [`${tier}Key`]: [] })));
      // No key at all: 401.
      expect([op.method, path, (await server.request(op.method.toUpperCase(), path)).status]).toEqual([op.method, path, 401]);
      // A key of a tier the route does not take: 403.
      for (const tier of (['identity', 'platform', 'seller'] as const).filter((t) => !op.auth.includes(t))) {
        const res = await server.request(op.method.toUpperCase(), path, { key: tierKey[tier], body });
        expect([op.method, path, tier, res.status]).toEqual([op.method, path, tier, 403]);
      }
      // An identity key without the documented scope: 403 naming exactly that scope.
      if (op.scopes) {
        expect(described['x-required-scopes']).toEqual(op.scopes);
        const res = await server.request(op.method.toUpperCase(), path, { key: keys.noScopes, body });
        expect([op.method, path, res.status, res.body?.requiredScope]).toEqual([op.method, path, 403, op.scopes[0]]);
      }
    }
  });
});

describe('/docs', () => {
  it('renders every operation of the document on the server: one stylesheet of ours, no script, nothing from elsewhere', async () => {
    const page = await fetch(`${server.url}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toBe("default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    const html = await page.text();
    expect(html).not.toMatch(/<script/i);
    const assets = [...html.matchAll(/(?:src|href)="([^"#]+)"/g)].map((m) => m[1]!);
    expect(assets).toEqual(['/docs/reference.css', '/openapi.json']);
    const css = await fetch(`${server.url}/docs/reference.css`);
    expect([css.status, css.headers.get('content-type')]).toEqual([200, 'text/css; charset=utf-8']);

    // Every operation has its section, with its summary, its scope and its request body's fields.
    const document = await (await fetch(`${server.url}/openapi.json`)).json() as { paths: Record<string, Record<string, any>> };
    const operations = Object.entries(document.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ method, path, op })));
    expect(html.match(/<section class="operation"/g)).toHaveLength(operations.length);
    const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
    for (const { method, path } of operations) expect(html).toContain(`<span class="method method-${method}">${method.toUpperCase()}</span> <code>${escape(path)}</code>`);
    const signup = document.paths['/v0/agent-signup']!.post;
    expect(html).toContain(escape(signup.summary).replace(/`([^`]+)`/g, '<code>$1</code>'));
    const scoped = operations.find((o) => o.op['x-required-scopes'])!;
    expect(html).toContain(`Scope: <code>${scoped.op['x-required-scopes'][0]}</code>`);
    expect(html).toContain('<code>priceUsdc</code>'); // POST /v0/payments/endpoints' body, field by field

    expect((await fetch(`${server.url}/docs/constructor`)).status).toBe(404);
    expect((await fetch(`${server.url}/docs/..%2Fpackage.json`)).status).toBe(404);
  });
});
