import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { SAMPLES, TOTP_SEED } from './fixtures.js';
import { nameParams } from '../../server/vault/schemas.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

const put = (key: string, name: string, body: unknown) => server.request('PUT', `/v0/vault/${name}`, { key, body });
const get = (key: string, name: string) => server.request('GET', `/v0/vault/${name}`, { key });

describe('vault round trips', () => {
  it('stores and reads back every credential type; TOTP never shows its seed or backup codes', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    for (const [type, sample] of Object.entries(SAMPLES)) {
      const name = `my-${type.toLowerCase()}`;
      const created = await put(key, name, { type, data: sample.data, metadata: { label: `the ${type}` } });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({ name, type, metadata: { label: `the ${type}` }, expiresAt: null, lastUsedAt: null, lastRotatedAt: null });
      expect(created.body.credentialId).toMatch(/^cred_/);
      expect(created.body).not.toHaveProperty('data');

      const read = await get(key, name);
      expect(read.status).toBe(200);
      expect(read.body.credentialId).toBe(created.body.credentialId);
      if (type === 'TOTP') {
        expect(read.body.data).toEqual({ issuer: 'Example', accountName: 'agent@example.com', algorithm: 'SHA1', digits: 6, period: 30, backupCodesRemaining: 2 });
        expect(read.text).not.toContain(TOTP_SEED);
        expect(read.text).not.toContain('backup-aaaa');
      } else if (type === 'CARD') {
        expect(read.body.data).toEqual({ ...sample.data, number: '4242424242424242' });
      } else {
        expect(read.body.data).toEqual(sample.data);
      }
    }
    const list = await server.request('GET', '/v0/vault', { key });
    expect(list.status).toBe(200);
    expect(list.body.count).toBe(Object.keys(SAMPLES).length);
    expect(list.body.credentials.map((c: any) => c.type).sort()).toEqual(Object.keys(SAMPLES).sort());
    for (const credential of list.body.credentials) {
      expect(Object.keys(credential).sort()).toEqual(['createdAt', 'credentialId', 'expiresAt', 'lastRotatedAt', 'lastUsedAt', 'metadata', 'name', 'type', 'updatedAt']);
      expect(credential.lastUsedAt).not.toBeNull(); // every one was read above
    }
    for (const sample of Object.values(SAMPLES)) for (const secret of sample.secrets) expect(list.text).not.toContain(secret);
  });

  it('keeps no plaintext secret anywhere in the database, including the activity log', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    for (const [type, sample] of Object.entries(SAMPLES)) {
      expect((await put(key, `raw-${type.toLowerCase()}`, { type, data: sample.data })).status).toBe(201);
      expect((await get(key, `raw-${type.toLowerCase()}`)).status).toBe(200);
    }
    expect((await server.request('GET', '/v0/vault/raw-totp/totp', { key })).status).toBe(200);
    expect((await server.request('POST', '/v0/vault/raw-totp/totp/backup', { key })).status).toBe(200);

    const raw = await server.app.db.collection('vault_credentials').find({ identityId: agent.identity.identityId }).toArray();
    expect(raw).toHaveLength(Object.keys(SAMPLES).length);
    for (const doc of raw) {
      expect(Object.keys(doc.sealed).sort()).toEqual(['ciphertext', 'iv', 'keyVersion', 'tag', 'v', 'wrappedKey']);
      expect(doc).not.toHaveProperty('data');
    }
    const everything: string[] = [];
    for (const { name } of await server.app.db.db!.listCollections().toArray()) {
      everything.push(JSON.stringify(await server.app.db.collection(name).find({}).toArray()));
    }
    const dump = everything.join('\n');
    // The seed would also show up base32-decoded or in a lower-case variant if something normalised it.
    const seedBytes = Buffer.from('48656c6c6f21deadbeef48656c6c6f21deadbeef', 'hex').toString('base64');
    for (const sample of Object.values(SAMPLES)) for (const secret of sample.secrets) expect(dump).not.toContain(secret);
    expect(dump.toLowerCase()).not.toContain(TOTP_SEED.toLowerCase());
    expect(dump).not.toContain(seedBytes);
  });

  it('replacing data stamps lastRotatedAt; a metadata-only write does not; reads stamp lastUsedAt', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    await put(key, 'github', { type: 'API_KEY', data: { apiKey: 'first' } });
    const meta = await put(key, 'github', { type: 'API_KEY', metadata: { team: 'infra' } });
    expect(meta.status).toBe(200);
    expect(meta.body).toMatchObject({ metadata: { team: 'infra' }, lastRotatedAt: null, lastUsedAt: null });
    expect((await get(key, 'github')).body.data).toEqual({ apiKey: 'first' });

    const replaced = await put(key, 'github', { type: 'API_KEY', data: { apiKey: 'second' } });
    expect(replaced.status).toBe(200);
    expect(replaced.body.lastRotatedAt).not.toBeNull();
    expect(replaced.body.metadata).toEqual({ team: 'infra' });
    const read = await get(key, 'github');
    expect(read.body.data).toEqual({ apiKey: 'second' });
    expect(read.body.lastUsedAt).not.toBeNull();
    expect(new Date(read.body.lastUsedAt).getTime()).toBeGreaterThanOrEqual(new Date(replaced.body.lastRotatedAt).getTime());

    const retyped = await put(key, 'github', { type: 'LOGIN', metadata: {} });
    expect(retyped.status).toBe(400);
    expect(retyped.body.message).toMatch(/^body\.data/);
  });

  it('validates data per type and names the field', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const cases: Array<[unknown, RegExp]> = [
      [{ type: 'CARD', data: { number: '4242424242424242', expiry: '12/30' } }, /^body\.data\.cvc/],
      [{ type: 'CARD', data: { number: '4242424242424241', expiry: '12/30', cvc: '123' } }, /^body\.data\.number: .*Luhn/],
      [{ type: 'CARD', data: { number: '4242424242424242', expiry: '13/30', cvc: '123' } }, /^body\.data\.expiry/],
      [{ type: 'TOTP', data: {} }, /^body\.data\.secret: give exactly one/],
      [{ type: 'TOTP', data: { secret: 'not base32 at all!' } }, /^body\.data\.secret: secret must be base32/],
      [{ type: 'TOTP', data: { uri: 'otpauth://hotp/x?secret=JBSWY3DPEHPK3PXP&counter=1' } }, /^body\.data\.uri: only otpauth:\/\/totp/],
      [{ type: 'LOGIN', data: { username: 'a', password: 'b', pasword: 'typo' } }, /^body\.data/],
      [{ type: 'NOPE', data: {} }, /^body\.type/],
      [{ type: 'LOGIN' }, /^body\.data: is required/],
      [{ type: 'API_KEY', data: { apiKey: 'x' }, expiresAt: 'tomorrow' }, /^body\.expiresAt/],
    ];
    for (const [body, message] of cases) {
      const res = await put(key, 'bad', body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: 'validation_error', status: 400 });
      expect(res.body.message).toMatch(message);
    }
    expect((await get(key, 'bad')).status).toBe(404);
  });

  it('refuses unsafe names in the path', async () => {
    // A client's URL parser already folds "." and ".." (even %2E%2E) away, so check the schema directly.
    for (const name of ['.', '..', 'a/b', '']) expect(nameParams.safeParse({ name }).success).toBe(false);
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    for (const name of ['a%2Fb', 'a%252Fb', 'sp%20ace', 'x'.repeat(129)]) {
      const res = await put(key, name, { type: 'API_KEY', data: { apiKey: 'x' } });
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/^params\.name/);
    }
    expect((await put(key, 'ok.name_with-dashes.1', { type: 'API_KEY', data: { apiKey: 'x' } })).status).toBe(201);
  });

  it('answers 410 for an expired credential and does not open it', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const past = new Date(Date.now() - 60_000).toISOString();
    await put(key, 'old', { type: 'API_KEY', data: { apiKey: 'stale' }, expiresAt: past });
    await put(key, 'old-totp', { type: 'TOTP', data: { secret: TOTP_SEED, backupCodes: ['bbbbbbbb'] }, expiresAt: past });
    for (const path of ['/v0/vault/old', '/v0/vault/old-totp/totp']) {
      const res = await server.request('GET', path, { key });
      expect(res.status).toBe(410);
      expect(res.body).toMatchObject({ error: 'credential_expired', status: 410, expiresAt: past });
      expect(res.text).not.toContain('stale');
    }
    expect((await server.request('POST', '/v0/vault/old-totp/totp/backup', { key })).status).toBe(410);
    const listed = await server.request('GET', '/v0/vault', { key });
    expect(listed.body.credentials.find((c: any) => c.name === 'old')).toMatchObject({ expiresAt: past, lastUsedAt: null });
    // Storing new data with a later expiry brings it back.
    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect((await put(key, 'old', { type: 'API_KEY', data: { apiKey: 'fresh' }, expiresAt: future })).status).toBe(200);
    expect((await get(key, 'old')).body.data).toEqual({ apiKey: 'fresh' });
  });

  it('deletes', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    await put(key, 'gone', { type: 'API_KEY', data: { apiKey: 'x' } });
    const del = await server.request('DELETE', '/v0/vault/gone', { key });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ name: 'gone', deleted: true });
    expect((await get(key, 'gone')).status).toBe(404);
    expect((await server.request('DELETE', '/v0/vault/gone', { key })).status).toBe(404);
  });

  it('logs every access without secrets', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    await put(key, 'login', { type: 'LOGIN', data: SAMPLES.LOGIN!.data });
    await get(key, 'login');
    await server.request('GET', '/v0/vault', { key });
    await server.request('DELETE', '/v0/vault/login', { key });
    const logs = await server.request('GET', '/v0/logs?limit=20', { key });
    expect(logs.status).toBe(200);
    const actions = logs.body.logs.filter((l: any) => l.category === 'vault').map((l: any) => l.action);
    expect(actions).toEqual(['vault.deleted', 'vault.listed', 'vault.read', 'vault.created']);
    expect(logs.text).not.toContain('hunter2');
  });
});

describe('vault access control', () => {
  it('needs vault:read / vault:write and an identity key', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    await put(key, 'x', { type: 'API_KEY', data: { apiKey: 'x' } });
    const platform = await server.request('GET', '/v0/vault', { key: agent.platform_key });
    expect(platform.status).toBe(403);

    await server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['vault:write'] } });
    const write = await put(key, 'y', { type: 'API_KEY', data: { apiKey: 'y' } });
    expect(write.status).toBe(403);
    expect(write.body).toMatchObject({ error: 'forbidden', requiredScope: 'vault:write' });
    expect((await server.request('DELETE', '/v0/vault/x', { key })).status).toBe(403);
    expect((await get(key, 'x')).status).toBe(200);

    await server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['vault:read'] } });
    for (const path of ['/v0/vault', '/v0/vault/x', '/v0/vault/x/totp']) {
      const res = await server.request('GET', path, { key });
      expect(res.status).toBe(403);
      expect(res.body.requiredScope).toBe('vault:read');
    }
  });

  it('hides another identity’s credentials behind 404', async () => {
    const a = await signUp(server);
    const b = await signUp(server);
    await put(a.identity.rawKey, 'mine', { type: 'TOTP', data: { secret: TOTP_SEED, backupCodes: ['cccccccc'] } });
    for (const [method, path] of [['GET', '/v0/vault/mine'], ['GET', '/v0/vault/mine/totp'], ['POST', '/v0/vault/mine/totp/backup'], ['DELETE', '/v0/vault/mine']] as const) {
      const res = await server.request(method, path, { key: b.identity.rawKey });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'not_found', message: 'Credential not found', status: 404 });
    }
    expect((await server.request('GET', '/v0/vault', { key: b.identity.rawKey })).body.count).toBe(0);
    // b writing the same name creates b's own credential, a's is untouched
    expect((await put(b.identity.rawKey, 'mine', { type: 'API_KEY', data: { apiKey: 'b' } })).status).toBe(201);
    expect((await get(a.identity.rawKey, 'mine')).body.type).toBe('TOTP');
  });
});
