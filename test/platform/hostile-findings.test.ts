// The reproductions of issue 10: hostile requests that used to crash the backend or answer 500.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { readSettlement } from '../../server/buyer/challenge.js';
import { encodeBase64Json } from 'agentgate-x402-wire';

let server: TestServer;
let key: string;

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  key = (await signUp(server)).identity.rawKey;
});
afterAll(async () => { await server?.close(); });

const nested = (depth: number, kind: 'array' | 'object') => {
  let text = '"x"';
  for (let i = 0; i < depth; i++) text = kind === 'array' ? `[${text}]` : `{"a":${text}}`;
  return text;
};

describe('F1: header values payments_pay would send', () => {
  it.each([['CR LF', 'a\r\nb'], ['above U+00FF', 'caf\u0113']])('refuses %s with a 400 naming the header', async (_name, value) => {
    const res = await server.request('POST', '/v0/payments/pay', { key, body: { url: 'http://127.0.0.1:9/x', headers: { 'x-a': value } } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'validation_error', status: 400 });
    expect(res.body.message).toContain('headers');
  });

  it('refuses NUL in a header value with a 400, before the body reaches any handler', async () => {
    const res = await server.request('POST', '/v0/payments/pay', { key, body: { url: 'http://127.0.0.1:9/x', headers: { 'x-a': 'a\u0000b' } } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'validation_error', status: 400 });
    expect(res.body.message).toContain('body.headers.x-a');
  });

  it('refuses the same over MCP as a validation error, not internal_error', async () => {
    const client = new Client({ name: 'hostile', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    try {
      const result = await client.callTool({ name: 'payments_pay', arguments: { url: 'http://127.0.0.1:9/x', headers: { 'x-a': 'a\r\nb' } } });
      expect(result.isError).toBe(true);
      const text = (result.content as Array<{ text: string }>)[0]!.text;
      expect(text).not.toContain('internal_error');
    } finally {
      await client.close();
    }
  });
});

describe('F2: deeply nested JSON', () => {
  it('refuses a pay body nested 5,000 arrays deep with a 400, before any handler', async () => {
    const rawBody = `{"url":"http://127.0.0.1:9/x","method":"POST","body":${nested(5000, 'array')}}`;
    const res = await server.request('POST', '/v0/payments/pay', { key, rawBody });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'json_too_deep', status: 400 });
  });

  it('refuses CUSTOM vault data nested 5,000 objects deep, and takes 30 levels', async () => {
    const deep = await server.request('PUT', '/v0/vault/deep', { key, rawBody: `{"type":"CUSTOM","data":{"x":${nested(5000, 'object')}}}` });
    expect(deep.status).toBe(400);
    expect(deep.body.error).toBe('json_too_deep');
    const fine = await server.request('PUT', '/v0/vault/deep', { key, rawBody: `{"type":"CUSTOM","data":{"x":${nested(28, 'object')}}}` });
    expect(fine.status).toBe(201);
    expect((await server.request('GET', '/v0/vault/deep', { key })).status).toBe(200);
  });

  it('does not count brackets inside strings', async () => {
    const res = await server.request('PUT', '/v0/vault/brackets', { key, body: { type: 'CUSTOM', data: { note: '['.repeat(10_000) + '{"'.repeat(100) } } });
    expect(res.status).toBe(201);
  });
});

describe('F3: keys the database cannot store', () => {
  it.each(['$gt', '$ne', '$where', 'a.b'])('refuses vault metadata key %s with a 400', async (field) => {
    const res = await server.request('PUT', '/v0/vault/x', { key, body: { type: 'LOGIN', data: { username: 'u@example.com', password: 'pw' }, metadata: { [field]: '' } } });
    expect(res.status).toBe(400);
    expect(res.body.message).toContain('metadata');
  });

  it.each(['$ne', '$where', 'a.b'])('refuses calendar metadata key %s with a 400', async (field) => {
    const res = await server.request('POST', '/v0/calendar', { key, body: { title: 'x', startAt: '2027-01-05T09:00:00.000Z', endAt: '2027-01-05T10:00:00.000Z', metadata: { [field]: null } } });
    expect(res.status).toBe(400);
    expect(res.body.message).toContain('metadata');
  });

  it('keeps only the spec fields of a seller settlement header, so a "$set" key never reaches the database', () => {
    const value = encodeBase64Json({ success: true, transaction: '0xabc', network: 'base-sepolia', payer: '0x1', $set: { status: 'x' }, 'a.b': 1, extra: { deep: true } });
    const settlement = readSettlement({ status: 200, headers: { 'payment-response': value }, body: Buffer.alloc(0), bodyText: '', url: 'http://x/' });
    expect(settlement).toEqual({ success: true, transaction: '0xabc', network: 'base-sepolia', payer: '0x1' });
  });
});

it('still answers after all of it', async () => {
  expect((await server.request('GET', '/v0/whoami', { key })).status).toBe(200);
});

describe('NUL, which PostgreSQL cannot store or compare', () => {
  it.each([
    ['path', 'PATCH', '/v0/messages/%00', { addLabels: ['x'] }],
    ['query', 'GET', '/v0/messages?labels=a%00b', undefined],
    ['body.data.username', 'PUT', '/v0/vault/nul', { type: 'LOGIN', data: { username: 'a\u0000b', password: 'p' } }],
    ['body.metadata (a key)', 'POST', '/v0/calendar', { title: 't', startAt: '2027-01-05T09:00:00.000Z', metadata: { 'a\u0000': 'x' } }],
  ])('is refused in %s with a 400 naming where', async (where, method, path, body) => {
    const res = await server.request(method, path, { key, body });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'validation_error', status: 400 });
    expect(res.body.message).toContain(where);
  });
});
