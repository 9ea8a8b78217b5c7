import { z } from 'zod';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { TOOLS } from '../../server/tools.js';
import type { ToolDefinition } from '../../server/platform/mcp-tool.js';
import type { AppError } from '../../server/platform/errors.js';

// The identity-services tools as the MCP server runs them: input parsed by the tool's schema, then run()
// with the caller's principal. Listing by scope is the MCP server's job; here each tool's scope is checked.
let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

const EXPECTED_SCOPES: Record<string, string> = {
  vault_list: 'vault:read', vault_get: 'vault:read', vault_store: 'vault:write', vault_delete: 'vault:write', vault_totp: 'vault:read',
  calendar_list: 'calendar:read', calendar_create: 'calendar:write', calendar_update: 'calendar:write', calendar_delete: 'calendar:write',
  identity_sign: 'identity:sign', identity_verify: 'identity:verify', identity_whoami: 'identity:read',
};
const tool = (name: string) => TOOLS.find((t) => t.name === name) as ToolDefinition;

function caller(agent: Awaited<ReturnType<typeof signUp>>) {
  const principal = { tier: 'identity' as const, keyId: 'test', orgId: agent.org_id, identityId: agent.identity.identityId, scopes: new Set(agent.identity.scopes) };
  return (name: string, args: Record<string, unknown> = {}) => tool(name).run(server.app, principal, tool(name).input.parse(args)) as Promise<any>;
}

describe('identity-services MCP tools', () => {
  it('are registered with their scopes and JSON-schema-able inputs', () => {
    for (const [name, scope] of Object.entries(EXPECTED_SCOPES)) {
      expect(`${name}:${tool(name)?.scope}`).toBe(`${name}:${scope}`);
      expect(() => z.toJSONSchema(tool(name).input, { io: 'input' })).not.toThrow();
      expect(tool(name).description.length).toBeGreaterThan(20);
    }
  });

  it('run the vault round trip without exposing the TOTP seed', async () => {
    const call = caller(await signUp(server));
    const secret = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
    expect(await call('vault_store', { name: 'gh', type: 'TOTP', data: { secret, backupCodes: ['one-1111'] } })).toMatchObject({ name: 'gh', type: 'TOTP', created: true });
    expect(await call('vault_store', { name: 'api', type: 'API_KEY', data: { apiKey: 'k-123' }, expiresAt: '2099-01-01T00:00:00Z' })).toMatchObject({ expiresAt: '2099-01-01T00:00:00.000Z' });
    expect((await call('vault_list')).credentials.map((c: any) => c.name)).toEqual(['api', 'gh']);
    expect((await call('vault_get', { name: 'api' })).data).toEqual({ apiKey: 'k-123' });
    const totp = await call('vault_totp', { name: 'gh' });
    expect(totp).toEqual({ code: expect.stringMatching(/^\d{6}$/), remaining: expect.any(Number), backupCodesRemaining: 1 });
    expect(JSON.stringify(await call('vault_get', { name: 'gh' }))).not.toContain(secret);
    expect(await call('vault_delete', { name: 'api' })).toEqual({ name: 'api', deleted: true });
    const missing = await call('vault_get', { name: 'api' }).catch((e: AppError) => e);
    expect(missing).toMatchObject({ status: 404, code: 'not_found' });
    expect(() => tool('vault_get').input.parse({ name: '../x' })).toThrow();
  });

  it('run the calendar round trip', async () => {
    const call = caller(await signUp(server));
    const event = await call('calendar_create', { title: 'Standup', startAt: '2031-02-02T09:00:00Z', endAt: '2031-02-02T09:15:00Z' });
    expect(event).toMatchObject({ eventId: expect.stringMatching(/^evt_/), title: 'Standup' });
    expect((await call('calendar_list', { from: '2031-02-02', to: '2031-02-03' })).events.map((e: any) => e.eventId)).toEqual([event.eventId]);
    expect((await call('calendar_list', { from: '2031-02-03' })).count).toBe(0);
    expect(await call('calendar_update', { eventId: event.eventId, location: 'Zoom' })).toMatchObject({ location: 'Zoom', title: 'Standup' });
    const bad = await call('calendar_update', { eventId: event.eventId, endAt: '2031-02-02T08:00:00Z' }).catch((e: AppError) => e);
    expect(bad).toMatchObject({ status: 400, message: 'body.endAt: must be after startAt' });
    expect(await call('calendar_delete', { eventId: event.eventId })).toEqual({ eventId: event.eventId, deleted: true });
    expect((await call('calendar_list')).count).toBe(0);
  });

  it('sign, verify and whoami with the DID; other identities’ things stay 404', async () => {
    const agent = await signUp(server);
    const call = caller(agent);
    const data = Buffer.from('hello from mcp').toString('base64');
    const signed = await call('identity_sign', { data });
    const did = `did:web:${server.config.DID_DOMAIN}:identities:${agent.identity.identityId}`;
    expect(signed).toMatchObject({ did, verificationMethod: `${did}#key-1` });
    expect(await call('identity_verify', { data, signature: signed.signature, did })).toMatchObject({ valid: true });
    expect(await call('identity_verify', { data: Buffer.from('other').toString('base64'), signature: signed.signature, did })).toMatchObject({ valid: false });
    expect(await call('identity_whoami')).toMatchObject({ identityId: agent.identity.identityId, did, didDocumentUrl: `${server.config.BASE_URL}/identities/${agent.identity.identityId}/did.json` });

    const other = caller(await signUp(server));
    await call('vault_store', { name: 'mine', type: 'API_KEY', data: { apiKey: 'x' } });
    const event = await call('calendar_create', { title: 'mine', startAt: '2031-01-01', isAllDay: true });
    expect(await other('vault_get', { name: 'mine' }).catch((e: AppError) => e.status)).toBe(404);
    expect(await other('calendar_update', { eventId: event.eventId, title: 'theirs' }).catch((e: AppError) => e.status)).toBe(404);
    expect(await other('calendar_delete', { eventId: event.eventId }).catch((e: AppError) => e.status)).toBe(404);
  });
});
