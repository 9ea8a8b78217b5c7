import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

describe('GET /v0/whoami', () => {
  it('answers a platform key with user, org and identities', async () => {
    const agent = await signUp(server);
    const res = await server.request('GET', '/v0/whoami', { key: agent.platform_key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      user: { id: agent.user_id, userType: 'AGENT', name: agent.identity.name, email: agent.user_email },
      org: { id: agent.org_id, plan: 'FREE', admin: false },
      identities: [{ identityId: agent.identity.identityId, name: agent.identity.name, email: agent.identity.emailAddress }],
    });
  });

  it('answers an identity key with that identity’s detail', async () => {
    const agent = await signUp(server);
    const res = await server.request('GET', '/v0/whoami', { key: agent.identity.rawKey });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      identityId: agent.identity.identityId,
      name: agent.identity.name,
      email: agent.identity.emailAddress,
      scopes: agent.identity.scopes,
      inbox: { address: agent.identity.emailAddress },
      did: `did:web:${server.config.DID_DOMAIN}:identities:${agent.identity.identityId}`,
      org: { id: agent.org_id, plan: 'FREE' },
    });
    expect(res.body).toHaveProperty('wallet');
  });

  it('refuses missing, malformed and unknown keys with 401', async () => {
    for (const key of [undefined, 'nonsense', 'agp_' + 'A'.repeat(43), 'agi_' + 'B'.repeat(43)]) {
      const res = await server.request('GET', '/v0/whoami', key ? { key } : {});
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ error: 'unauthorized', status: 401 });
    }
  });
});

describe('/v0/platform/identities', () => {
  it('creates an identity with a new inbox and key that works at once', async () => {
    const agent = await signUp(server);
    const created = await server.request('POST', '/v0/platform/identities', { key: agent.platform_key, body: {} });
    expect(created.status).toBe(201);
    expect(created.body.identityId).toMatch(/^id-[0-9a-f]{16}$/);
    expect(created.body.email).toMatch(/^[a-z]+-[a-z]+-[a-z]+-[a-z0-9]{5}@agents\.test$/);
    expect(created.body.email).not.toBe(agent.identity.emailAddress);
    expect(created.body.rawKey).toMatch(/^agi_/);
    const me = await server.request('GET', '/v0/whoami', { key: created.body.rawKey });
    expect(me.body.identityId).toBe(created.body.identityId);
    const org = await server.request('GET', '/v0/whoami', { key: agent.platform_key });
    expect(org.body.identities).toHaveLength(2);
  });

  it('lists identities newest first across pages without repeats', async () => {
    const agent = await signUp(server);
    for (let i = 0; i < 6; i++) await server.request('POST', '/v0/platform/identities', { key: agent.platform_key, body: {} });
    const seen: string[] = [];
    let pageToken: string | undefined;
    let pages = 0;
    do {
      const res = await server.request('GET', `/v0/platform/identities?limit=3${pageToken ? `&pageToken=${pageToken}` : ''}`, { key: agent.platform_key });
      expect(res.status).toBe(200);
      expect(res.body.count).toBe(res.body.identities.length);
      seen.push(...res.body.identities.map((i: any) => i.identityId));
      pageToken = res.body.nextPageToken;
      pages++;
    } while (pageToken);
    expect(pages).toBe(3);
    expect(seen).toHaveLength(7);
    expect(new Set(seen).size).toBe(7);
    expect(seen[6]).toBe(agent.identity.identityId); // the first identity is the oldest
    const bad = await server.request('GET', '/v0/platform/identities?pageToken=garbage!', { key: agent.platform_key });
    expect(bad.status).toBe(400);
    const tooMany = await server.request('GET', '/v0/platform/identities?limit=101', { key: agent.platform_key });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.message).toContain('query.limit');
  });

  it('renames an identity without changing its inbox, and edits scopes', async () => {
    const agent = await signUp(server);
    const id = agent.identity.identityId;
    const renamed = await server.request('PATCH', `/v0/platform/identities/${id}`, { key: agent.platform_key, body: { name: 'support-bot', removeScopes: ['vault:read'] } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ identityId: id, name: 'support-bot', displayName: 'support-bot', email: agent.identity.emailAddress });
    expect(renamed.body.scopes).not.toContain('vault:read');
    const got = await server.request('GET', `/v0/platform/identities/${id}`, { key: agent.platform_key });
    expect(got.body.name).toBe('support-bot');
    expect(got.body.email).toBe(agent.identity.emailAddress);
    const bad = await server.request('PATCH', `/v0/platform/identities/${id}`, { key: agent.platform_key, body: { addScopes: ['root:all'] } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('body.addScopes.0');
    const empty = await server.request('PATCH', `/v0/platform/identities/${id}`, { key: agent.platform_key, body: {} });
    expect(empty.status).toBe(400);
    const email = await server.request('PATCH', `/v0/platform/identities/${id}`, { key: agent.platform_key, body: { email: 'x@y.z' } });
    expect(email.status).toBe(400);
  });

  it('rotates a key: the new key works and the old one is refused', async () => {
    const agent = await signUp(server);
    const rotated = await server.request('POST', `/v0/platform/identities/${agent.identity.identityId}/rotate-key`, { key: agent.platform_key });
    expect(rotated.status).toBe(200);
    expect(rotated.body.rawKey).toMatch(/^agi_/);
    expect(rotated.body.rawKey.startsWith(rotated.body.apiKeyPrefix)).toBe(true);
    expect((await server.request('GET', '/v0/whoami', { key: agent.identity.rawKey })).status).toBe(401);
    expect((await server.request('GET', '/v0/whoami', { key: rotated.body.rawKey })).status).toBe(200);
  });

  it('revokes an identity: its key stops working at once and it disappears from lists', async () => {
    const agent = await signUp(server);
    const second = await server.request('POST', '/v0/platform/identities', { key: agent.platform_key, body: {} });
    const id = second.body.identityId;
    expect((await server.request('GET', '/v0/whoami', { key: second.body.rawKey })).status).toBe(200);
    const revoked = await server.request('DELETE', `/v0/platform/identities/${id}`, { key: agent.platform_key });
    expect(revoked.status).toBe(200);
    expect((await server.request('GET', '/v0/whoami', { key: second.body.rawKey })).status).toBe(401);
    expect((await server.request('GET', `/v0/platform/identities/${id}`, { key: agent.platform_key })).status).toBe(404);
    expect((await server.request('DELETE', `/v0/platform/identities/${id}`, { key: agent.platform_key })).status).toBe(404);
    const list = await server.request('GET', '/v0/platform/identities', { key: agent.platform_key });
    expect(list.body.identities.map((i: any) => i.identityId)).toEqual([agent.identity.identityId]);
  });

  it('hides another org’s identities behind 404, never 403', async () => {
    const alice = await signUp(server);
    const mallory = await signUp(server);
    const target = `/v0/platform/identities/${alice.identity.identityId}`;
    for (const [method, path, body] of [
      ['GET', target, undefined], ['PATCH', target, { name: 'pwned' }], ['DELETE', target, undefined], ['POST', `${target}/rotate-key`, undefined],
    ] as const) {
      const res = await server.request(method, path, { key: mallory.platform_key, body });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'not_found', message: 'Identity not found', status: 404 });
    }
    expect((await server.request('GET', '/v0/whoami', { key: alice.identity.rawKey })).status).toBe(200);
    const own = await server.request('GET', target, { key: alice.platform_key });
    expect(own.body.name).toBe(alice.identity.name);
  });

  it('refuses identity keys on platform routes with 403', async () => {
    const agent = await signUp(server);
    const res = await server.request('POST', '/v0/platform/identities', { key: agent.identity.rawKey, body: {} });
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('forbidden');
  });
});

describe('scopes and logs', () => {
  it('gives 403 naming the scope when an identity key lacks it', async () => {
    const agent = await signUp(server);
    expect((await server.request('GET', '/v0/logs', { key: agent.identity.rawKey })).status).toBe(200);
    await server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['logs:read'] } });
    const res = await server.request('GET', '/v0/logs', { key: agent.identity.rawKey });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: 'forbidden', status: 403, requiredScope: 'logs:read' });
    expect(res.body.message).toContain('logs:read');
  });

  it('records signup and identity changes in the activity log, newest first', async () => {
    const agent = await signUp(server);
    const created = await server.request('POST', '/v0/platform/identities', { key: agent.platform_key, body: {} });
    await server.request('PATCH', `/v0/platform/identities/${created.body.identityId}`, { key: agent.platform_key, body: { name: 'renamed' } });
    await server.request('POST', `/v0/platform/identities/${created.body.identityId}/rotate-key`, { key: agent.platform_key });
    await server.request('DELETE', `/v0/platform/identities/${created.body.identityId}`, { key: agent.platform_key });
    const res = await server.request('GET', '/v0/logs', { key: agent.platform_key });
    expect(res.status).toBe(200);
    // Other areas log too (the wallet is created lazily when an identity is first shown): keep ours.
    const actions = res.body.logs.filter((l: any) => ['identity', 'account'].includes(l.category)).map((l: any) => l.action);
    expect(actions).toEqual(['identity.revoked', 'identity.key_rotated', 'identity.updated', 'identity.created', 'agent.signup', 'identity.created']);
    expect(res.body.logs[0]).toMatchObject({ category: 'identity', targetType: 'identity', targetId: created.body.identityId });
    expect(JSON.stringify(res.body)).not.toContain(created.body.rawKey);
    const limited = await server.request('GET', '/v0/logs?limit=2', { key: agent.platform_key });
    expect(limited.body.logs).toHaveLength(2);
    // An identity key sees only its own identity's entries.
    const own = await server.request('GET', '/v0/logs', { key: agent.identity.rawKey });
    expect(own.body.logs.every((l: any) => l.identityId === agent.identity.identityId)).toBe(true);
  });
});

describe('agent card and error shapes', () => {
  it('serves an A2A agent card for an org and 404 for an unknown one (the A2A checks: test/agent-card)', async () => {
    const agent = await signUp(server);
    const card = await fetch(agent.agent_card_url).then((r) => r.json()) as any;
    expect(card).toMatchObject({
      name: agent.identity.name,
      provider: { organization: agent.identity.name },
      securitySchemes: { identityKey: { httpAuthSecurityScheme: { scheme: 'Bearer' } } },
    });
    expect(card.skills.map((s: any) => s.id)).toEqual(expect.arrayContaining([`${agent.identity.identityId}:mail`, `${agent.identity.identityId}:payments`]));
    const missing = await server.request('GET', '/.well-known/agents/org_doesnotexist');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ error: 'not_found', status: 404 });
  });

  it('answers unknown routes and wrong methods with JSON errors', async () => {
    const agent = await signUp(server);
    const unknown = await server.request('GET', '/v0/nope', { key: agent.platform_key });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ error: 'not_found', status: 404 });
    const method = await server.request('PUT', '/v0/whoami', { key: agent.platform_key, body: {} });
    expect(method.status).toBe(405);
    expect(method.body).toMatchObject({ error: 'method_not_allowed', status: 405 });
  });
});

describe('concurrent key rotation', () => {
  it('leaves exactly one live key however several concurrent rotations interleave', async () => {
    const agent = await signUp(server);
    const path = `/v0/platform/identities/${agent.identity.identityId}/rotate-key`;
    const results = await Promise.all(Array.from({ length: 5 }, () => server.request('POST', path, { key: agent.platform_key })));
    // A rotation that starts after another finished rotates the newer key: both win, in order.
    // Rotations that race for the same key: one wins, the others get 409.
    const winners = results.filter((r) => r.status === 200);
    expect(winners.length).toBeGreaterThanOrEqual(1);
    expect(winners.length + results.filter((r) => r.status === 409).length).toBe(5);
    const working = [];
    for (const w of winners) if ((await server.request('GET', '/v0/whoami', { key: w.body.rawKey })).status === 200) working.push(w);
    expect(working).toHaveLength(1);
    expect((await server.request('GET', '/v0/whoami', { key: agent.identity.rawKey })).status).toBe(401);
    const live = await server.app.db.collection('api_keys').countDocuments({ identityId: agent.identity.identityId, revokedAt: null });
    expect(live).toBe(1);
    // The new key can be rotated again.
    expect((await server.request('POST', path, { key: agent.platform_key })).status).toBe(200);
  });
});

describe('usage bookkeeping never undoes a security change', () => {
  it('keeps a scope removal and a revocation while the key is in use', async () => {
    for (let round = 0; round < 5; round++) {
      const agent = await signUp(server);
      const busy = Array.from({ length: 15 }, () => server.request('GET', '/v0/whoami', { key: agent.identity.rawKey }));
      const patch = server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['logs:read'] } });
      await Promise.all([...busy, patch]);
      await server.app.usage.flush(); // the usage writes land (they must not undo the scope removal)
      expect((await server.request('GET', '/v0/logs', { key: agent.identity.rawKey })).status).toBe(403);

      const moreUse = Array.from({ length: 15 }, () => server.request('GET', '/v0/whoami', { key: agent.identity.rawKey }));
      const revoke = server.request('DELETE', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key });
      await Promise.all([...moreUse, revoke]);
      await server.app.usage.flush();
      expect((await server.request('GET', '/v0/whoami', { key: agent.identity.rawKey })).status).toBe(401);
    }
  });

  it('counts uses of an identity key', async () => {
    const agent = await signUp(server);
    for (let i = 0; i < 3; i++) await server.request('GET', '/v0/whoami', { key: agent.identity.rawKey });
    // No wait: each use is counted before its request is answered, and a read includes what is not
    // written yet, also while the background writer is writing it.
    const got = await server.request('GET', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key });
    expect(got.body.usageCount).toBe(3);
    expect(got.body.lastUsedAt).not.toBeNull();
  });
});
