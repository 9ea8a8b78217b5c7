// NUL in a request is refused with a 400 naming where: PostgreSQL under the dev and test engine cannot
// hold it (found by hostile-routes.test.ts with FUZZ_SEED=130576608: GET /v0/messages/%00 answered 500).
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';

let server: TestServer;
let key: string;

beforeAll(async () => {
  server = await startTestServer();
  key = (await signUp(server)).identity.rawKey;
});
afterAll(async () => { await server?.close(); });

describe('NUL in a request', () => {
  it.each([
    ['a path segment', 'GET', '/v0/messages/%00', undefined, 'path: must not contain NUL (%00)'],
    ['a path segment of a POST', 'POST', '/v0/messages/a%00b/reply', { text: 'hi' }, 'path: must not contain NUL (%00)'],
    ['the query', 'GET', '/v0/messages?labels=%00', undefined, 'query: must not contain NUL (%00)'],
    ['a body string', 'POST', '/v0/messages/send', { to: ['a@example.org'], subject: 'x', text: 'a\u0000b' }, 'body.text: must not contain NUL (\\u0000)'],
    ['a nested body string', 'PUT', '/v0/vault/note', { type: 'CUSTOM', data: { lines: ['ok', '\u0000'] } }, 'body.data.lines.1: must not contain NUL (\\u0000)'],
    ['a body key', 'PUT', '/v0/vault/note', { type: 'CUSTOM', data: { 'a\u0000': 'x' } }, 'body.data (a key): must not contain NUL (\\u0000)'],
  ])('is refused in %s', async (_where, method, path, body, message) => {
    const res = await server.request(method, path, { key, body });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'validation_error', message, status: 400 });
  });

  it('is not confused with the text "%00" or "\\u0000"', async () => {
    const res = await server.request('POST', '/v0/messages/send', { key, body: { to: ['a@example.org'], subject: '%00', text: '\\u0000 is not NUL' } });
    expect(res.status).toBe(201);
  });
});
