import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

async function connect(key: string): Promise<Client> {
  const client = new Client({ name: 'catalogue-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

const json = (result: Awaited<ReturnType<Client['callTool']>>) => JSON.parse((result.content as Array<{ text: string }>)[0]!.text);

describe('the backend MCP server, every area', () => {
  it('lists every area’s tools to a full-scope identity key, and they work over Streamable HTTP', async () => {
    const agent = await signUp(server);
    const mcp = await connect(agent.identity.rawKey);
    const names = (await mcp.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining([
      'mail.list_messages', 'vault_list', 'vault_get', 'vault_store', 'vault_delete', 'vault_totp',
      'calendar_list', 'calendar_create', 'calendar_update', 'calendar_delete',
      'identity_sign', 'identity_verify', 'identity_whoami', 'payments_pay',
      'chat_list_channels', 'chat_list_messages', 'chat_send_message',
    ]));

    const stored = await mcp.callTool({ name: 'vault_store', arguments: { name: 'stripe', type: 'API_KEY', data: { apiKey: 'sk_test_123' } } });
    expect(stored.isError ?? false).toBe(false);
    const read = json(await mcp.callTool({ name: 'vault_get', arguments: { name: 'stripe' } }));
    expect(read.data).toEqual({ apiKey: 'sk_test_123' });

    const me = json(await mcp.callTool({ name: 'identity_whoami', arguments: {} }));
    expect(me).toMatchObject({ identityId: agent.identity.identityId, did: `did:web:${server.config.DID_DOMAIN}:identities:${agent.identity.identityId}` });

    const signed = json(await mcp.callTool({ name: 'identity_sign', arguments: { data: Buffer.from('hello').toString('base64') } }));
    const verified = json(await mcp.callTool({ name: 'identity_verify', arguments: { data: Buffer.from('hello').toString('base64'), signature: signed.signature, did: signed.did } }));
    expect(verified).toMatchObject({ valid: true });

    // Paying without a mandate is refused as a normal result, and no money moves.
    const pay = json(await mcp.callTool({ name: 'payments_pay', arguments: { url: `${server.url}/v0/identity-types`, dryRun: true } }));
    expect(pay).toMatchObject({ ok: true, paid: false, status: 200 });
  });

  it('hides and refuses the tools of scopes the key does not hold', async () => {
    const agent = await signUp(server);
    await server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, {
      key: agent.platform_key, body: { removeScopes: ['vault:read', 'vault:write', 'payments:spend'] },
    });
    const mcp = await connect(agent.identity.rawKey);
    const names = (await mcp.listTools()).tools.map((t) => t.name);
    expect(names).toContain('calendar_list');
    expect(names.filter((n) => n.startsWith('vault_') || n === 'payments_pay')).toEqual([]);
    const refused = await mcp.callTool({ name: 'vault_list', arguments: {} }).catch((err: Error) => ({ isError: true, error: err.message }));
    expect(refused.isError).toBe(true);
  });

  it('refuses platform keys and missing keys', async () => {
    const agent = await signUp(server);
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${agent.platform_key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(res.status).toBe(403);
    const anonymous = await fetch(`${server.url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(anonymous.status).toBe(401);
  });
});
