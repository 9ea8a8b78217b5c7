import * as OTPAuth from 'otpauth';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { paramsFromUri, totpCode } from '../../server/vault/totp.js';

// RFC 6238 appendix B: the seeds are ASCII "1234567890" repeated to the hash's block-ish size.
const ascii = (length: number) => Buffer.from('1234567890'.repeat(7).slice(0, length), 'ascii');
const SEEDS = { SHA1: ascii(20), SHA256: ascii(32), SHA512: ascii(64) } as const;
const VECTORS: Array<[number, string, keyof typeof SEEDS]> = [
  [59, '94287082', 'SHA1'], [59, '46119246', 'SHA256'], [59, '90693936', 'SHA512'],
  [1111111109, '07081804', 'SHA1'], [1111111109, '68084774', 'SHA256'], [1111111109, '25091201', 'SHA512'],
  [1111111111, '14050471', 'SHA1'], [1111111111, '67062674', 'SHA256'], [1111111111, '99943326', 'SHA512'],
  [1234567890, '89005924', 'SHA1'], [1234567890, '91819424', 'SHA256'], [1234567890, '93441116', 'SHA512'],
  [2000000000, '69279037', 'SHA1'], [2000000000, '90698825', 'SHA256'], [2000000000, '38618901', 'SHA512'],
  [20000000000, '65353130', 'SHA1'], [20000000000, '77737706', 'SHA256'], [20000000000, '47863826', 'SHA512'],
];
const base32 = (bytes: Buffer) => new OTPAuth.Secret({ buffer: new Uint8Array(bytes).buffer }).base32;

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

describe('TOTP codes', () => {
  it('passes the RFC 6238 test vectors, stored through the vault from otpauth URIs', async () => {
    const agent = await signUp(server);
    const owner = { orgId: agent.org_id, identityId: agent.identity.identityId };
    for (const algorithm of ['SHA1', 'SHA256', 'SHA512'] as const) {
      const uri = `otpauth://totp/RFC:vector?secret=${base32(SEEDS[algorithm])}&algorithm=${algorithm}&digits=8&period=30&issuer=RFC`;
      const res = await server.request('PUT', `/v0/vault/rfc-${algorithm}`, { key: agent.identity.rawKey, body: { type: 'TOTP', data: { uri } } });
      expect(res.status).toBe(201);
    }
    for (const [seconds, expected, algorithm] of VECTORS) {
      const { code } = await server.app.vault.totp(owner, `rfc-${algorithm}`, seconds * 1000);
      expect(`${algorithm}@${seconds}:${code}`).toBe(`${algorithm}@${seconds}:${expected}`);
    }
  });

  it('reads algorithm, digits and a custom period from the URI', () => {
    const params = paramsFromUri('otpauth://totp/ACME:bob?secret=JBSWY3DPEHPK3PXP&algorithm=SHA256&digits=8&period=60&issuer=ACME');
    expect(params).toEqual({ secret: 'JBSWY3DPEHPK3PXP', algorithm: 'SHA256', digits: 8, period: 60, issuer: 'ACME', accountName: 'bob' });
    expect(totpCode(params, 119_000)).toEqual({ code: expect.stringMatching(/^\d{8}$/), remaining: 1 });
    expect(totpCode(params, 120_000).remaining).toBe(60);
    expect(totpCode(params, 119_000).code).not.toBe(totpCode(params, 120_000).code);
  });

  it('serves the live code over HTTP without ever returning the seed', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const secret = 'KRSXG5CTMVRXEZLUKN2XAZLSKNSWG4TFOQ';
    await server.request('PUT', '/v0/vault/site', { key, body: { type: 'TOTP', data: { uri: `otpauth://totp/Site:me?secret=${secret}&period=45&issuer=Site` } } });
    const reference = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret), period: 45 });
    const before = reference.generate();
    const res = await server.request('GET', '/v0/vault/site/totp', { key });
    const after = reference.generate();
    expect(res.status).toBe(200);
    expect([before, after]).toContain(res.body.code);
    expect(res.body.remaining).toBeGreaterThanOrEqual(1);
    expect(res.body.remaining).toBeLessThanOrEqual(45);
    expect(res.body).not.toHaveProperty('backupCodesRemaining'); // none were stored
    const credential = await server.request('GET', '/v0/vault/site', { key });
    expect(credential.body.data).toMatchObject({ period: 45, digits: 6, algorithm: 'SHA1', issuer: 'Site', accountName: 'me' });
    for (const text of [res.text, credential.text]) expect(text).not.toContain(secret);

    await server.request('PUT', '/v0/vault/plain', { key, body: { type: 'API_KEY', data: { apiKey: 'x' } } });
    const notTotp = await server.request('GET', '/v0/vault/plain/totp', { key });
    expect(notTotp.status).toBe(400);
    expect(notTotp.body.error).toBe('not_totp');
  });
});

describe('TOTP backup codes', () => {
  it('hands out each code once, even to concurrent callers', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const codes = Array.from({ length: 12 }, (_, i) => `code-${String(i).padStart(4, '0')}`);
    await server.request('PUT', '/v0/vault/bank', { key, body: { type: 'TOTP', data: { secret: 'JBSWY3DPEHPK3PXPJBSWY3DP', backupCodes: codes } } });
    expect((await server.request('GET', '/v0/vault/bank/totp', { key })).body.backupCodesRemaining).toBe(12);

    const results = await Promise.all(Array.from({ length: 16 }, () => server.request('POST', '/v0/vault/bank/totp/backup', { key })));
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status !== 200);
    expect(ok).toHaveLength(12);
    expect(new Set(ok.map((r) => r.body.code))).toEqual(new Set(codes));
    expect(new Set(ok.map((r) => r.body.backupCodesRemaining))).toEqual(new Set(Array.from({ length: 12 }, (_, i) => i)));
    expect(refused.map((r) => r.status)).toEqual([409, 409, 409, 409]);
    expect(refused[0]!.body).toMatchObject({ error: 'no_backup_codes', status: 409 });

    const live = await server.request('GET', '/v0/vault/bank/totp', { key });
    expect(live.body.backupCodesRemaining).toBe(0);
    // New data brings a fresh set.
    await server.request('PUT', '/v0/vault/bank', { key, body: { type: 'TOTP', data: { secret: 'JBSWY3DPEHPK3PXPJBSWY3DP', backupCodes: ['fresh-001'] } } });
    expect((await server.request('POST', '/v0/vault/bank/totp/backup', { key })).body).toEqual({ code: 'fresh-001', backupCodesRemaining: 0 });
  });
});
