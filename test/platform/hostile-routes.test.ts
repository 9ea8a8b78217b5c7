// Property tests over every route the backend mounts: requests shaped by each route's zod schema, with
// hostile values at every level (control characters, bad unicode, `$` and `.` keys, deep nesting, huge
// numbers, path tricks), must be answered with a 2xx or a clear 4xx, never a 5xx, and the backend must
// still answer afterwards. A route missing from the catalog below fails the coverage test, so a new
// route cannot escape the fuzzing.
import fc from 'fast-check';
import type { z } from 'zod';
import { NO_REQUEST_LIMITS, startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { faucetConfig } from '../support/chain.js';
import { arbitraryOf, hostileString, jsonSchemaOf } from '../support/hostile.js';
import { DevChatPlatform } from '../../server/dev/chat-platform.js';
import { mountedRoutes } from '../support/routes.js';
import { TOOLS } from '../../server/tools.js';
import { ALL_SCOPES } from '../../server/platform/auth/scopes.js';
import { OPERATIONS, routeKey } from '../../server/openapi/operations.js';
import { DEV_EXTENSION } from '../../server/dev/routes.js';

type Auth = 'identity' | 'platform' | 'seller' | 'none';
interface RouteInputs {
  auth: Auth;
  /** The route answers an endless stream when it accepts the request (server-sent events). */
  endless?: true;
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType | 'mcp';
  /** Generators for named body fields that must not send traffic off this machine. */
  bodyOverrides?: Record<string, fc.Arbitrary<unknown>>;
  /**
   * The route fetches a URL the caller chose: when that URL cannot be reached it answers 502 or 504 with
   * a clear error (the upstream failed, not us). 500 and 503 stay forbidden.
   */
  fetchesCallerUrl?: true;
}

/** Targets that never leave the machine: closed loopback ports, and addresses the SSRF guard refuses before connecting. */
const localUrl = fc.constantFrom('http://127.0.0.1:9/x', 'http://localhost:9/weather?a=1', 'http://[::1]:9/', 'http://0.0.0.0:9/', 'http://169.254.169.254/latest', 'https://127.0.0.1:9/a/../b');
const localDid = fc.constantFrom('did:web:127.0.0.1%3A9', 'did:web:localhost%3A9:identities:id-0000000000000000', 'did:web:169.254.169.254');
const noEgress = { url: localUrl, webhookUrl: localUrl, did: localDid };

/** Values that keep this fuzzer's traffic on this machine. */
const FUZZING: Record<string, Pick<RouteInputs, 'bodyOverrides'>> = {
  'POST /v0/identity/verify': { bodyOverrides: noEgress },
  // Small amounts, so the test faucet is not drained (a drained faucet answers 503 faucet_empty, as it should).
  'POST /v0/dev/faucet': { bodyOverrides: { amountUsdc: fc.oneof(fc.constantFrom('0.01', '1', '5'), hostileString) } },
  'POST /v0/payments/pay': { bodyOverrides: noEgress },
  'POST /v0/payments/endpoints': { bodyOverrides: noEgress },
  'PATCH /v0/payments/endpoints/:id': { bodyOverrides: noEgress },
};

/** The catalog is the API's own operation list (server/openapi/operations.ts), which /openapi.json is made from. */
const CATALOG: Record<string, RouteInputs> = Object.fromEntries([...OPERATIONS, ...DEV_EXTENSION.operations].map((op) => [routeKey(op), {
  auth: op.auth === 'none' ? 'none' : op.auth[0]!,
  params: op.params, query: op.query, body: op.body === 'any' ? undefined : op.body,
  ...(op.fetchesCallerUrl ? { fetchesCallerUrl: true as const } : {}),
  ...(op.ok.type === 'text/event-stream' ? { endless: true as const } : {}),
  ...FUZZING[routeKey(op)],
}]));

/** Generated requests per route; with ~80 routes this is about 1,900 requests, a minute or two here. */
const RUNS_PER_ROUTE = 24;

let platform: DevChatPlatform;
let server: TestServer;
let keys: Record<Auth, string | undefined>;
let sent = 0;

beforeAll(async () => {
  platform = await new DevChatPlatform().start();
  // Thousands of requests from one key in seconds: request limits off, or they would answer most of them
  // 429 before any reached the route under test (test/platform/request-limits.test.ts tests the limits).
  server = await startTestServer({ TRUST_PROXY: 'true', ...NO_REQUEST_LIMITS, ...platform.backendConfig(), ...(await faucetConfig('1000')) });
  platform.setEventsUrl(`${server.url}/v0/chat/events`);
  const agent = await signUp(server);
  // Every scope, so requests reach each route's validation rather than stopping at the scope check.
  const patched = await server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { addScopes: [...ALL_SCOPES] } });
  expect(patched.status).toBe(200);
  await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8' } });
  const seller = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: { name: 'fuzz' } });
  expect(seller.status).toBe(201);
  keys = { identity: agent.identity.rawKey, platform: agent.platform_key, seller: seller.body.rawKey, none: undefined };
}, 120_000);

afterAll(async () => {
  await server?.close();
  await platform?.stop();
  console.log(`[hostile-routes] ${sent} generated requests sent`);
});

test('every mounted route is in the operation list, and the list names no route that is not mounted', () => {
  const mounted = mountedRoutes(server.app);
  expect(mounted.filter((r) => !(r in CATALOG))).toEqual([]);
  expect(Object.keys(CATALOG).filter((r) => !mounted.includes(r))).toEqual([]);
});

/** Every tool a dev server serves (the dev extension's faucet included). */
const SERVED_TOOLS = [...TOOLS, ...DEV_EXTENSION.tools];

/** A `tools/call` of one tool, by its listed name or an alias, with arguments shaped by its input schema. */
const toolCall = (tool: (typeof SERVED_TOOLS)[number]) => fc.tuple(
  arbitraryOf(jsonSchemaOf(tool.input), { ...noEgress, ...FUZZING['POST /v0/dev/faucet']!.bodyOverrides }),
  fc.constantFrom(tool.name, ...(tool.aliases ?? [])),
).map(([args, name]) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }));

const mcpCall = fc.constantFrom(...SERVED_TOOLS).chain(toolCall);

/** Percent-encodes the UTF-8 bytes of any string, lone surrogates included (encodeURIComponent throws on those). */
const percentEncode = (text: string) => [...Buffer.from(text, 'utf8')]
  .map((b) => (/[A-Za-z0-9_.~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0').toUpperCase()}`)).join('');

/** Path segments no decoder accepts: a lone `%`, bad hex, a truncated UTF-8 sequence, an encoded NUL or slash. */
const malformedEscape = fc.constantFrom('%', '%zz', '%E0%A4%A', '%C0%AF', '%00', '%2F..%2F', '%FF%FE', '%25%32%65');

function pathArbitrary(pattern: string, params?: z.ZodType): fc.Arbitrary<string> {
  const names = [...pattern.matchAll(/:(\w+)/g)].map((m) => m[1]!);
  if (names.length === 0) return fc.constant(pattern);
  const shaped = params ? arbitraryOf(jsonSchemaOf(params)) : fc.constant({});
  const segment = fc.oneof({ weight: 4, arbitrary: hostileString.map(percentEncode) }, { weight: 1, arbitrary: malformedEscape });
  return fc.tuple(shaped, fc.array(segment, { minLength: names.length, maxLength: names.length })).map(([values, hostile]) => {
    let path = pattern;
    names.forEach((name, i) => {
      const value = (values as Record<string, unknown>)?.[name];
      const text = typeof value === 'string' && value.length > 0 ? percentEncode(value) : hostile[i] || 'x';
      path = path.replace(`:${name}`, text);
    });
    return path;
  });
}

function queryArbitrary(query?: z.ZodType): fc.Arbitrary<string> {
  if (!query) return fc.constant('');
  return arbitraryOf(jsonSchemaOf(query)).map((value) => {
    if (!value || typeof value !== 'object' || Array.isArray(value)) return `?q=${percentEncode(String(value))}`;
    const pairs: string[] = [];
    for (const [k, v] of Object.entries(value)) {
      for (const item of Array.isArray(v) ? v : [v]) pairs.push(`${percentEncode(k)}=${percentEncode(typeof item === 'string' ? item : JSON.stringify(item) ?? '')}`);
    }
    return pairs.length ? `?${pairs.join('&')}` : '';
  });
}

function bodyArbitrary(inputs: RouteInputs): fc.Arbitrary<unknown> {
  if (inputs.body === 'mcp') return mcpCall;
  if (!inputs.body) return fc.oneof(fc.constant(undefined), fc.jsonValue({ maxDepth: 3 }));
  return arbitraryOf(jsonSchemaOf(inputs.body), inputs.bodyOverrides);
}

/** A GET of an endless stream (GET /v0/events): its status and, for a refusal, the error body; an open stream is left at once. */
async function streamHead(path: string, key: string | undefined, headers: Record<string, string>) {
  const controller = new AbortController();
  const response = await fetch(server.url + path, { headers: { ...headers, ...(key ? { authorization: `Bearer ${key}` } : {}) }, signal: controller.signal });
  if (response.status === 200) {
    controller.abort();
    return { status: 200, body: undefined, text: '' };
  }
  const text = await response.text();
  let body: any;
  try { body = JSON.parse(text); } catch { body = undefined; }
  return { status: response.status, body, text };
}

describe.each(Object.entries(CATALOG))('%s', (route, inputs) => {
  const [method, pattern] = route.split(' ') as [string, string];
  test('answers generated hostile requests with a 2xx or a clear 4xx, never a 5xx', async () => {
    const request = fc.record({
      path: pathArbitrary(pattern, inputs.params),
      query: queryArbitrary(inputs.query),
      body: method === 'GET' || method === 'DELETE' ? fc.constant(undefined) : bodyArbitrary(inputs),
      // now and then a key of another tier, or none
      auth: fc.oneof({ weight: 6, arbitrary: fc.constant(inputs.auth) }, { weight: 1, arbitrary: fc.constantFrom<Auth>('identity', 'platform', 'seller', 'none') }),
    });
    await fc.assert(fc.asyncProperty(request, async ({ path, query, body, auth }) => {
      sent++;
      const headers: Record<string, string> = { 'x-forwarded-for': `10.9.${sent % 250}.${Math.floor(sent / 250) % 250}` };
      if (inputs.body === 'mcp') headers.accept = 'application/json, text/event-stream';
      const res = inputs.endless ? await streamHead(path + query, keys[auth], headers) : await server.request(method, path + query, { key: keys[auth], body, headers });
      const upstreamFailure = inputs.fetchesCallerUrl && (res.status === 502 || res.status === 504) && typeof res.body?.error === 'string';
      if (res.status >= 500 && !upstreamFailure) throw new Error(`${method} ${path}${query} answered ${res.status}: ${res.text.slice(0, 300)} (body ${JSON.stringify(body)?.slice(0, 300)})`);
      if (res.status >= 400 && !upstreamFailure && res.body) {
        // a clear error: the {error, message, status} shape with the status it was sent with
        const error = res.body as { error?: unknown; message?: unknown; status?: unknown };
        if (typeof error.error !== 'string' || typeof error.message !== 'string' || error.status !== res.status) {
          if (!('jsonrpc' in (res.body as object))) throw new Error(`${method} ${path} answered ${res.status} without {error, message, status}: ${res.text.slice(0, 300)}`);
        }
      }
      if (inputs.body === 'mcp' && res.status === 200) {
        expect(res.text).not.toContain('internal_error');
      }
    }), { numRuns: RUNS_PER_ROUTE, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31), verbose: 1 });
  }, 120_000);
});

/** POST /mcp above picks tools at random; this gives each tool its own runs, so none goes unfuzzed. */
const RUNS_PER_TOOL = 8;

describe.each(SERVED_TOOLS.map((tool) => [tool.name, tool] as const))('MCP tool %s', (_name, tool) => {
  test('answers generated arguments with a result or a clear tool error, never an internal error', async () => {
    await fc.assert(fc.asyncProperty(toolCall(tool), async (body) => {
      sent++;
      const res = await server.request('POST', '/mcp', { key: keys.identity, body, headers: { accept: 'application/json, text/event-stream', 'x-forwarded-for': `10.8.${sent % 250}.${Math.floor(sent / 250) % 250}` } });
      const shown = `${tool.name} answered HTTP ${res.status}: ${res.text.slice(0, 300)} (body ${JSON.stringify(body)?.slice(0, 300)})`;
      if (res.status >= 500) throw new Error(shown);
      // A body the HTTP layer refuses (too deep, too big) is a clear 4xx before any tool runs.
      if (res.status >= 400 && !(typeof res.body?.error === 'string' && res.body?.status === res.status) && !('jsonrpc' in (res.body ?? {}))) throw new Error(shown);
      expect(res.text).not.toContain('internal_error');
    }), { numRuns: RUNS_PER_TOOL, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31), verbose: 1 });
  }, 120_000);
});

test('the backend still answers after every hostile request', async () => {
  const res = await server.request('GET', '/v0/whoami', { key: keys.identity });
  expect(res.status).toBe(200);
});
