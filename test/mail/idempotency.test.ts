// One send per intent: Idempotency-Key on send, reply, forward and every creating POST, within one
// server and across two servers (each its own connections and memory) on one database, by unique insert.
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { eventually, smtpClient } from './mail-support.js';

let server: TestServer;
let other: TestServer;
beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  other = await startTestServer({ TRUST_PROXY: 'true', MONGODB_DB: server.config.MONGODB_DB, MASTER_KEY: server.config.MASTER_KEY.toString('hex') });
});
afterAll(async () => {
  await other?.stop();
  await server?.close();
});

const enc = encodeURIComponent;
const withKey = (key: string) => ({ 'idempotency-key': key });

async function sentCount(key: string) {
  const res = await server.request('GET', '/v0/messages?labels=sent', { key });
  return res.body.count as number;
}

describe('Idempotency-Key', () => {
  it('on send: the same key and body answer the first answer and send nothing more; another body is 409 idempotency_key_reused', async () => {
    const agent = await signUp(server);
    const peer = await signUp(server);
    const key = agent.identity.rawKey;
    const body = { to: [peer.identity.emailAddress], subject: 'Pay the invoice', text: 'Once.' };
    const first = await server.request('POST', '/v0/messages/send', { key, body, headers: withKey('intent-1') });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    // The same body with its keys in another order is the same request.
    const again = await server.request('POST', '/v0/messages/send', { key, body: { text: 'Once.', subject: 'Pay the invoice', to: [peer.identity.emailAddress] }, headers: withKey('intent-1') });
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    const reused = await server.request('POST', '/v0/messages/send', { key, body: { ...body, text: 'Twice?' }, headers: withKey('intent-1') });
    expect(reused.status).toBe(409);
    expect(reused.body).toEqual({ error: 'idempotency_key_reused', message: expect.any(String), status: 409 });

    expect(await sentCount(key)).toBe(1);
    await eventually(async () => expect((await server.request('GET', '/v0/messages?labels=received', { key: peer.identity.rawKey })).body.count).toBe(1));
    // Another API key has its own keys: the same key name is a new intent there.
    const theirs = await server.request('POST', '/v0/messages/send', { key: peer.identity.rawKey, body: { ...body, to: [agent.identity.emailAddress] }, headers: withKey('intent-1') });
    expect(theirs.status).toBe(201);
    expect(theirs.body.messageId).not.toBe(first.body.messageId);
  });

  it('on reply, forward and a creating POST of another area; a failed request leaves the key free for its retry', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const human = smtpClient(server);
    const incoming = await human.sendMail({ from: 'ada@example.org', to: agent.identity.emailAddress, subject: 'Question', text: 'Yes or no?' });
    human.close();
    const id = enc(incoming.messageId);

    const reply = () => server.request('POST', `/v0/messages/${id}/reply`, { key, body: { text: 'Yes.' }, headers: withKey('reply-1') });
    const [r1, r2] = [await reply(), await reply()];
    expect([r1.status, r2.status]).toEqual([201, 201]);
    expect(r2.body.messageId).toBe(r1.body.messageId);

    const forward = () => server.request('POST', `/v0/messages/${id}/forward`, { key, body: { to: ['bob@example.org'] }, headers: withKey('forward-1') });
    const [f1, f2] = [await forward(), await forward()];
    expect(f2.body.messageId).toBe(f1.body.messageId);
    expect(await sentCount(key)).toBe(2);

    const entry = () => server.request('POST', '/v0/mail/lists/receive-block', { key, body: { entry: 'spam.example' }, headers: withKey('block-1') });
    const [e1, e2] = [await entry(), await entry()];
    expect(e1.status).toBe(201);
    expect(e2.status).toBe(201); // the first answer, not "it was there already" (200)
    expect(e2.body).toEqual(e1.body);

    const invalid = await server.request('POST', '/v0/messages/send', { key, body: { to: ['not an address'], subject: 's', text: 't' }, headers: withKey('fixed-1') });
    expect(invalid.status).toBe(400);
    const fixed = await server.request('POST', '/v0/messages/send', { key, body: { to: ['bob@example.org'], subject: 's', text: 't' }, headers: withKey('fixed-1') });
    expect(fixed.status).toBe(201);

    const bad = await server.request('POST', '/v0/messages/send', { key, body: { to: ['bob@example.org'], subject: 's', text: 't' }, headers: withKey('has space') });
    expect(bad.body).toMatchObject({ error: 'invalid_idempotency_key', status: 400 });
  });

  it('two servers on one database racing on one key: one message, every answer the same', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const body = { to: ['bob@example.org'], subject: 'Raced', text: 'Only once.' };
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      (i % 2 ? other : server).request('POST', '/v0/messages/send', { key, body, headers: withKey('raced-1') })));
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(201));
    expect(new Set(answers.map((a) => a.body.messageId)).size).toBe(1);
    expect(answers.filter((a) => a.headers.get('idempotent-replayed') === 'true')).toHaveLength(7);
    expect(await sentCount(key)).toBe(1);
  });
});

describe('an answer kept for replay', () => {
  it('is sealed at rest: a new key it returns once is not in the database in the clear, and is replayed whole', async () => {
    const agent = await signUp(server);
    const created = await server.request('POST', '/v0/platform/identities', { key: agent.platform_key, body: {}, headers: withKey('new-identity-1') });
    expect(created.status).toBe(201);
    const rawKey = created.body.rawKey as string;
    expect(rawKey).toMatch(/^ag/);
    const records = await server.app.db.collection('idempotency_keys').find({}).toArray();
    expect(records.length).toBeGreaterThan(0);
    expect(JSON.stringify(records)).not.toContain(rawKey);
    // The other process, with the same master key, replays it.
    const replayed = await other.request('POST', '/v0/platform/identities', { key: agent.platform_key, body: {}, headers: withKey('new-identity-1') });
    expect([replayed.status, replayed.headers.get('idempotent-replayed'), replayed.body.rawKey]).toEqual([201, 'true', rawKey]);
  });
});
