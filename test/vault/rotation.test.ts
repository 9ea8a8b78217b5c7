import { receiverAuthorizerSealedFields } from '../../server/payments/schemes/batch-settlement/evm/receiver-authorizer.js';
import { randomBytes } from 'node:crypto';
import { startTestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { startServer } from '../../server/server.js';
import { loadConfig } from '../../server/platform/config.js';
import { createContext } from '../../server/context.js';
import { rotateMasterKey } from '../../server/cli/rotate-master-key.js';
import { SAMPLES } from './fixtures.js';

describe('agentgate rotate-master-key', () => {
  it('re-wraps every data key so the data reads back under the new key alone', async () => {
    const v1 = randomBytes(32).toString('hex');
    const v2 = randomBytes(32).toString('hex');
    const first = await startTestServer({ TRUST_PROXY: 'true', MASTER_KEY: v1, MASTER_KEY_VERSION: '1' });
    const base = {
      // SMTP on a free port: dev mode's default 2525 may be taken by an `agentgate dev` running on this machine.
      AGENTGATE_MODE: 'dev', HOST: '127.0.0.1', PORT: '0', SMTP_PORT: '0', BASE_URL: first.config.BASE_URL, MAIL_DOMAIN: first.config.MAIL_DOMAIN,
      DID_DOMAIN: first.config.DID_DOMAIN, MONGODB_URI: first.config.MONGODB_URI, MONGODB_DB: first.config.MONGODB_DB, TRUST_PROXY: 'true',
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent', // as every test server: no request log lines in a green run
    };
    const agents = [await signUp(first), await signUp(first)];
    for (const agent of agents) {
      for (const [type, sample] of Object.entries(SAMPLES)) {
        expect((await first.request('PUT', `/v0/vault/${type}`, { key: agent.identity.rawKey, body: { type, data: sample.data } })).status).toBe(201);
      }
    }
    const before = await first.app.db.collection('vault_credentials').find({}).toArray();
    expect(before.every((d) => d.sealed.keyVersion === 1)).toBe(true);
    const readings = async (request: typeof first.request) => {
      const out: Record<string, unknown> = {};
      for (const agent of agents) for (const type of Object.keys(SAMPLES)) {
        const res = await request('GET', `/v0/vault/${type}`, { key: agent.identity.rawKey });
        expect(res.status).toBe(200);
        out[`${agent.identity.identityId}/${type}`] = res.body.data;
      }
      return out;
    };
    const expected = await readings(first.request);
    const serviceKey = first.app.serviceKey.publicKeyMultibase;
    // Stop the v1 server but keep its database (TestServer.close would drop it).
    first.http.closeAllConnections();
    await new Promise<void>((resolve) => first.http.close(() => resolve()));
    await first.app.close();

    // Rotation runs with v2 current and v1 still loaded.
    const rotation = await createContext(loadConfig({ ...base, MASTER_KEY: v2, MASTER_KEY_VERSION: '2', MASTER_KEYS_PREVIOUS: `1:${v1}` }));
    const report = await rotateMasterKey(rotation);
    // The vault's secrets, the service key's seed, and the batch-settlement receiver authorizer's key
    // (generated once and sealed at start).
    expect(report).toMatchObject({ currentVersion: 2, rewrapped: before.length + 2, remaining: 0 });
    expect(report.byLocation).toEqual(expect.arrayContaining([
      { collection: 'vault_credentials', path: 'sealed', rewrapped: before.length },
      { collection: 'service_keys', path: 'seed', rewrapped: 1 },
      { ...receiverAuthorizerSealedFields[0], rewrapped: 1 },
    ]));
    const after = await rotation.db.collection('vault_credentials').find({}).toArray();
    for (const doc of after) {
      const old = before.find((b) => b._id === doc._id)!;
      expect(doc.sealed.keyVersion).toBe(2);
      expect(doc.sealed.wrappedKey).not.toBe(old.sealed.wrappedKey);
      // The data itself was not re-encrypted: same ciphertext, iv and tag.
      expect([doc.sealed.ciphertext, doc.sealed.iv, doc.sealed.tag]).toEqual([old.sealed.ciphertext, old.sealed.iv, old.sealed.tag]);
    }
    expect((await rotateMasterKey(rotation)).rewrapped).toBe(0); // idempotent
    await rotation.close();

    // The old key is retired: a server with only v2 reads everything back.
    const second = await startServer(loadConfig({ ...base, MASTER_KEY: v2, MASTER_KEY_VERSION: '2' }));
    const request = async (method: string, path: string, options: { key?: string } = {}) => {
      const res = await fetch(second.url + path, { method, headers: options.key ? { authorization: `Bearer ${options.key}` } : {} });
      return { status: res.status, headers: res.headers, body: await res.json() as any, text: '' };
    };
    try {
      expect(await readings(request as typeof first.request)).toEqual(expected);
      expect(second.app.serviceKey.publicKeyMultibase).toBe(serviceKey); // the receipt-signing key survived too
      const totp = await request('GET', '/v0/vault/TOTP/totp', { key: agents[0]!.identity.rawKey });
      expect(totp.status).toBe(200);
      expect(totp.body.code).toMatch(/^\d{6}$/);
    } finally {
      await second.app.db.dropDatabase().catch(() => {});
      await second.close();
    }
  });
});
