import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { TOOLS } from '../../server/tools.js';
import { DEV_EXTENSION } from '../../server/dev/routes.js';

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
      'mail_list_messages', 'mail_get_message', 'mail_send', 'mail_reply', 'mail_update_labels', 'mail_list_threads', 'mail_get_thread',
      'vault_list', 'vault_get', 'vault_store', 'vault_delete', 'vault_totp',
      'calendar_list', 'calendar_create', 'calendar_update', 'calendar_delete',
      'identity_sign', 'identity_verify', 'identity_whoami',
      'payments_pay', 'payments_create_mandate', 'payments_list_mandates', 'payments_get_mandate', 'payments_revoke_mandate', 'payments_list_activity', 'payments_list_channels', 'payments_refund_channel', 'payments_withdraw_channel',
      'wallet_get', 'wallet_faucet',
      'chat_list_channels', 'chat_list_messages', 'chat_send_message',
    ]));
    // Each tool once: SPEC's dotted mail names are aliases, not listed.
    expect(new Set(names).size).toBe(names.length);
    expect(names.filter((n) => n.includes('.'))).toEqual([]);

    const stored = await mcp.callTool({ name: 'vault_store', arguments: { name: 'stripe', type: 'API_KEY', data: { apiKey: 'sk_test_123' } } });
    expect(stored.isError ?? false).toBe(false);
    const read = json(await mcp.callTool({ name: 'vault_get', arguments: { name: 'stripe' } }));
    expect(read.data).toEqual({ apiKey: 'sk_test_123' });

    const me = json(await mcp.callTool({ name: 'identity_whoami', arguments: {} }));
    expect(me).toMatchObject({ identityId: agent.identity.identityId, did: `did:web:${server.config.DID_DOMAIN}:identities:${agent.identity.identityId}` });

    const signed = json(await mcp.callTool({ name: 'identity_sign', arguments: { data: Buffer.from('hello').toString('base64') } }));
    const verified = json(await mcp.callTool({ name: 'identity_verify', arguments: { data: Buffer.from('hello').toString('base64'), signature: signed.signature, did: signed.did } }));
    expect(verified).toMatchObject({ valid: true });

    // A URL that does not ask for payment comes back as it is, unpaid (no mandate needed).
    const pay = json(await mcp.callTool({ name: 'payments_pay', arguments: { url: `${server.url}/v0/identity-types`, dryRun: true } }));
    expect(pay).toMatchObject({ ok: true, paid: false, status: 200 });
  });

  it('lists only names every LLM client accepts, and every alias calls the same tool', async () => {
    const agent = await signUp(server);
    const mcp = await connect(agent.identity.rawKey);
    const listed = (await mcp.listTools()).tools.map((t) => t.name);
    for (const name of listed) expect(name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    // Every tool a dev server serves is listed to a full-scope key (the faucet only because this is a dev server).
    const served = [...TOOLS, ...DEV_EXTENSION.tools];
    expect([...listed].sort()).toEqual(served.map((t) => t.name).sort());

    // SPEC names the mail tools `mail.*` (SPEC.md, section 4): each must still be callable.
    const aliased = served.filter((t) => t.aliases?.length);
    expect(aliased.flatMap((t) => t.aliases)).toEqual(expect.arrayContaining([
      'mail.list_messages', 'mail.get_message', 'mail.send', 'mail.reply', 'mail.update_labels', 'mail.list_threads', 'mail.get_thread',
    ]));
    const outcome = (name: string, args: Record<string, unknown>) =>
      mcp.callTool({ name, arguments: args }).then((r) => ({ isError: r.isError ?? false, content: r.content }), (err: Error) => ({ thrown: err.message }));
    for (const tool of aliased) {
      for (const alias of tool.aliases!) {
        expect(listed).not.toContain(alias);
        // Empty arguments: a list tool answers its (empty) page, any other tool its validation error, which
        // names the tool; alias and listed name must give the identical answer.
        const [viaAlias, viaName] = [await outcome(alias, {}), await outcome(tool.name, {})];
        expect(viaAlias).toEqual(viaName);
        expect(JSON.stringify(viaAlias)).not.toMatch(/not found/i);
      }
    }
    // A name that is neither listed nor an alias is unknown.
    const unknown = await outcome('mail.no_such_tool', {});
    expect(JSON.stringify(unknown)).toMatch(/not found/i);
    await mcp.close();
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
