import * as ed from '@noble/ed25519';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { parseEd25519PublicKey } from 'agentgate-x402-wire';

let a: TestServer;
let b: TestServer;
beforeAll(async () => {
  [a, b] = await Promise.all([startTestServer({ TRUST_PROXY: 'true' }), startTestServer({ TRUST_PROXY: 'true' })]);
});
afterAll(async () => { await Promise.all([a.close(), b.close()]); });

const b64 = (text: string | Uint8Array) => Buffer.from(text).toString('base64');
const keyOf = (doc: any) => parseEd25519PublicKey(doc.verificationMethod[0].publicKeyMultibase)!;

describe('DID documents', () => {
  it('publishes a Multikey did:web document per identity, with an agent-card service', async () => {
    const agent = await signUp(a);
    const id = agent.identity.identityId;
    const did = `did:web:${a.config.DID_DOMAIN}:identities:${id}`;
    const res = await a.request('GET', `/identities/${id}/did.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.body).toEqual({
      '@context': ['https://www.w3.org/ns/did/v1', 'https://w3id.org/security/multikey/v1'],
      id: did,
      verificationMethod: [{ id: `${did}#key-1`, type: 'Multikey', controller: did, publicKeyMultibase: expect.stringMatching(/^z6Mk[1-9A-HJ-NP-Za-km-z]{44}$/) }],
      authentication: [`${did}#key-1`],
      assertionMethod: [`${did}#key-1`],
      service: [{ id: `${did}#agent-card`, type: 'AgentCard', serviceEndpoint: `${a.config.BASE_URL}/.well-known/agents/${agent.org_id}` }],
    });
    // Stable: the same key on every read.
    expect((await a.request('GET', `/identities/${id}/did.json`)).body).toEqual(res.body);
    const card = await a.request('GET', `/.well-known/agents/${agent.org_id}`);
    expect(card.status).toBe(200);
  });

  it('publishes the service DID whose key is the receipt-signing key', async () => {
    const res = await a.request('GET', '/.well-known/did.json');
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(`did:web:${a.config.DID_DOMAIN}`);
    expect(res.body.verificationMethod[0]).toMatchObject({ id: a.app.serviceKey.keyId, type: 'Multikey', publicKeyMultibase: a.app.serviceKey.publicKeyMultibase });
    expect(res.body.assertionMethod).toEqual([a.app.serviceKey.keyId]);
    const message = new TextEncoder().encode('receipt body');
    expect(await ed.verifyAsync(await a.app.serviceKey.sign(message), message, keyOf(res.body))).toBe(true);
  });

  it('answers 404 for unknown, malformed and revoked identities', async () => {
    const agent = await signUp(a);
    const created = await a.request('POST', '/v0/platform/identities', { key: agent.platform_key, body: {} });
    expect((await a.request('GET', `/identities/${created.body.identityId}/did.json`)).status).toBe(200);
    await a.request('DELETE', `/v0/platform/identities/${created.body.identityId}`, { key: agent.platform_key });
    for (const id of [created.body.identityId, 'id-0000000000000000', 'nope']) {
      const res = await a.request('GET', `/identities/${id}/did.json`);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'not_found', message: 'DID not found', status: 404 });
    }
  });

  it('whoami shows the DID and its document URL', async () => {
    const agent = await signUp(a);
    const me = await a.request('GET', '/v0/whoami', { key: agent.identity.rawKey });
    expect(me.body).toMatchObject({
      did: `did:web:${a.config.DID_DOMAIN}:identities:${agent.identity.identityId}`,
      didDocumentUrl: `${a.config.BASE_URL}/identities/${agent.identity.identityId}/did.json`,
    });
  });
});

describe('sign and verify', () => {
  it('signs with the identity key; any Ed25519 library verifies it against the DID document', async () => {
    const agent = await signUp(a);
    const payload = 'pay 1 USDC to bob, nonce 42';
    const signed = await a.request('POST', '/v0/identity/sign', { key: agent.identity.rawKey, body: { data: b64(payload) } });
    expect(signed.status).toBe(200);
    const did = `did:web:${a.config.DID_DOMAIN}:identities:${agent.identity.identityId}`;
    expect(signed.body).toEqual({ signature: expect.any(String), did, verificationMethod: `${did}#key-1` });
    const signature = Buffer.from(signed.body.signature, 'base64');
    expect(signature).toHaveLength(64);
    const doc = (await a.request('GET', `/identities/${agent.identity.identityId}/did.json`)).body;
    expect(await ed.verifyAsync(signature, Buffer.from(payload), keyOf(doc))).toBe(true);
    expect(await ed.verifyAsync(signature, Buffer.from(payload + '!'), keyOf(doc))).toBe(false);

    const verify = (data: string, sig = signed.body.signature, whose = did) =>
      a.request('POST', '/v0/identity/verify', { key: agent.identity.rawKey, body: { data: b64(data), signature: sig, did: whose } });
    expect((await verify(payload)).body).toEqual({ valid: true, did, verificationMethod: `${did}#key-1` });
    expect((await verify(payload + '!')).body).toEqual({ valid: false, did });
    const other = await signUp(a);
    expect((await verify(payload, signed.body.signature, `did:web:${a.config.DID_DOMAIN}:identities:${other.identity.identityId}`)).body.valid).toBe(false);
  });

  it('signs data up to its limit (750 KB); past it, a 400 that names the field, never a 413', async () => {
    const key = (await signUp(a)).identity.rawKey;
    const largest = Buffer.alloc(750_000, 7).toString('base64');
    expect(largest).toHaveLength(1_000_000);
    const signed = await a.request('POST', '/v0/identity/sign', { key, body: { data: largest } });
    expect(signed.status).toBe(200);
    const tooLarge = await a.request('POST', '/v0/identity/sign', { key, body: { data: Buffer.alloc(750_003, 7).toString('base64') } });
    expect(tooLarge.status).toBe(400);
    expect(tooLarge.body).toMatchObject({ error: 'validation_error' });
    expect(tooLarge.body.message).toMatch(/data/);
  });

  it('verifies a signature made by an outside Ed25519 key published as a did:web on this service', async () => {
    // The service DID: sign locally with the receipt key, verify through the API.
    const agent = await signUp(a);
    const message = new TextEncoder().encode('a receipt');
    const signature = b64(await a.app.serviceKey.sign(message));
    const res = await a.request('POST', '/v0/identity/verify', { key: agent.identity.rawKey, body: { data: b64(message), signature, did: a.app.serviceKey.did } });
    expect(res.body).toMatchObject({ valid: true, verificationMethod: a.app.serviceKey.keyId });
  });

  it('verifies signatures from an agent on another instance (another domain) by resolving its did:web', async () => {
    expect(a.config.DID_DOMAIN).not.toBe(b.config.DID_DOMAIN);
    const alice = await signUp(a);
    const bob = await signUp(b);
    const payload = b64(JSON.stringify({ offer: 'translate 10 pages', priceUsdc: '2.50' }));
    const signed = await b.request('POST', '/v0/identity/sign', { key: bob.identity.rawKey, body: { data: payload } });
    expect(signed.body.did).toBe(`did:web:${b.config.DID_DOMAIN}:identities:${bob.identity.identityId}`);

    const check = (data: string, did = signed.body.did) =>
      a.request('POST', '/v0/identity/verify', { key: alice.identity.rawKey, body: { data, signature: signed.body.signature, did } });
    expect((await check(payload)).body).toMatchObject({ valid: true, did: signed.body.did });
    expect((await check(b64('tampered'))).body.valid).toBe(false);

    // And the other way round.
    const fromAlice = await a.request('POST', '/v0/identity/sign', { key: alice.identity.rawKey, body: { data: payload } });
    const atB = await b.request('POST', '/v0/identity/verify', { key: bob.identity.rawKey, body: { data: payload, signature: fromAlice.body.signature, did: fromAlice.body.did } });
    expect(atB.body.valid).toBe(true);

    // Once bob's identity is revoked his DID stops resolving.
    await b.request('DELETE', `/v0/platform/identities/${bob.identity.identityId}`, { key: bob.platform_key });
    const gone = await check(payload);
    expect(gone.status).toBe(422);
    expect(gone.body).toMatchObject({ error: 'did_resolution_failed', status: 422 });
    expect(gone.body.message).toContain('404');
  });

  it('refuses DIDs whose host is private or metadata, and malformed input', async () => {
    const agent = await signUp(a);
    const key = agent.identity.rawKey;
    const signature = b64(new Uint8Array(64));
    for (const did of ['did:web:169.254.169.254', 'did:web:10.0.0.7:identities:x', 'did:web:metadata.google.internal', 'did:web:%5B%3A%3Affff%3A7f00%3A1%5D']) {
      const res = await a.request('POST', '/v0/identity/verify', { key, body: { data: b64('x'), signature, did } });
      expect(`${did} ${res.status}`).toBe(`${did} ${res.body.error === 'validation_error' ? 400 : 422}`);
      expect(res.body.message).toMatch(/did|private|metadata|resolve/i);
    }
    const blocked = await a.request('POST', '/v0/identity/verify', { key, body: { data: b64('x'), signature, did: 'did:web:169.254.169.254' } });
    expect(blocked.status).toBe(422);
    expect(blocked.body.message).toContain('link-local');
    const cases: Array<[string, unknown, RegExp]> = [
      ['/v0/identity/sign', { data: 'not base64!' }, /^body\.data/],
      ['/v0/identity/sign', {}, /^body\.data/],
      ['/v0/identity/verify', { data: b64('x'), signature, did: 'did:key:z6Mk' }, /^body\.did/],
      ['/v0/identity/verify', { data: b64('x'), signature, did: 'did:web:exa mple.com' }, /^body\.did/],
    ];
    for (const [path, body, message] of cases) {
      const res = await a.request('POST', path, { key, body });
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(message);
    }
  });

  it('needs identity:sign / identity:verify and an identity key', async () => {
    const agent = await signUp(a);
    const body = { data: b64('x') };
    expect((await a.request('POST', '/v0/identity/sign', { key: agent.platform_key, body })).status).toBe(403);
    await a.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['identity:sign', 'identity:verify'] } });
    const sign = await a.request('POST', '/v0/identity/sign', { key: agent.identity.rawKey, body });
    expect(sign.status).toBe(403);
    expect(sign.body.requiredScope).toBe('identity:sign');
    const verify = await a.request('POST', '/v0/identity/verify', { key: agent.identity.rawKey, body: { ...body, signature: b64(new Uint8Array(64)), did: a.app.serviceKey.did } });
    expect(verify.status).toBe(403);
    expect(verify.body.requiredScope).toBe('identity:verify');
  });
});
