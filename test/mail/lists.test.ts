// Allow and block lists as an unattended agent relies on them: blocked senders' mail is kept but out of
// sight (labelled, not unread, out of default lists and threads), org lists apply to every identity of the
// org, and a send to a blocked recipient is refused before anything leaves.
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { eventually, smtpClient } from './mail-support.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

const enc = encodeURIComponent;

async function mailFrom(from: string, to: string, subject: string) {
  const human = smtpClient(server);
  const sent = await human.sendMail({ from, to, subject, text: `${subject} body` });
  human.close();
  return sent;
}

async function messages(key: string, query = '') {
  return (await server.request('GET', `/v0/messages${query}`, { key })).body.messages as any[];
}

test('a blocked sender (address or domain) is stored labelled blocked, never unread, out of default lists and threads', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const add = (kind: string, entry: string) => server.request('POST', `/v0/mail/lists/${kind}`, { key, body: { entry } });
  expect((await add('receive-block', '*@Spam.Example')).body).toMatchObject({ kind: 'receive-block', entry: 'spam.example', type: 'domain', scope: 'identity' });
  const added = await add('receive-block', 'pest@example.org');
  expect(added.status).toBe(201);
  expect((await add('receive-block', 'pest@example.org')).status).toBe(200); // there already

  await mailFrom('offers@news.spam.example', agent.identity.emailAddress, 'Cheap stuff');
  await mailFrom('pest@example.org', agent.identity.emailAddress, 'Me again');
  await mailFrom('friend@example.org', agent.identity.emailAddress, 'Lunch');

  await eventually(async () => expect((await messages(key, '?labels=blocked')).map((m) => m.subject).sort()).toEqual(['Cheap stuff', 'Me again']));
  const blocked = await messages(key, '?labels=blocked');
  expect(blocked.every((m) => JSON.stringify(m.labels) === '["received","blocked"]')).toBe(true);
  expect((await messages(key)).map((m) => m.subject)).toEqual(['Lunch']);
  expect((await messages(key, '?labels=unread')).map((m) => m.subject)).toEqual(['Lunch']);
  const threads = (await server.request('GET', '/v0/threads', { key })).body.threads;
  expect(threads.map((t: any) => t.subject)).toEqual(['Lunch']);
  // Still readable by id: the agent can look at what was held back.
  expect((await server.request('GET', `/v0/messages/${enc(blocked[0].messageId)}`, { key })).status).toBe(200);

  const logs = (await server.request('GET', '/v0/logs', { key: agent.platform_key })).body.logs.map((l: any) => l.action);
  expect(logs).toEqual(expect.arrayContaining(['mail.list_entry_added', 'mail.received_blocked', 'mail.received']));

  // Unblocked again, the sender's next mail arrives normally.
  expect((await server.request('DELETE', `/v0/mail/lists/receive-block/${enc('pest@example.org')}`, { key })).status).toBe(200);
  expect((await server.request('DELETE', `/v0/mail/lists/receive-block/${enc('pest@example.org')}`, { key })).status).toBe(404);
  await mailFrom('pest@example.org', agent.identity.emailAddress, 'Third try');
  await eventually(async () => expect((await messages(key, '?labels=unread')).map((m) => m.subject)).toContain('Third try'));
});

test("org lists (platform key) apply to every identity of the org; an identity sees them but cannot remove them", async () => {
  const org = await signUp(server);
  const second = await server.request('POST', '/v0/platform/identities', { key: org.platform_key, body: { name: 'second-agent' } });
  expect(second.status).toBe(201);
  const orgAllow = await server.request('POST', '/v0/mail/lists/receive-allow', { key: org.platform_key, body: { entry: 'example.org' } });
  expect(orgAllow.status).toBe(201);
  expect(orgAllow.body).toMatchObject({ scope: 'org', entry: 'example.org' });

  for (const inbox of [org.identity, second.body]) {
    await mailFrom('boss@sales.example.org', inbox.emailAddress, 'From inside');
    await mailFrom('someone@elsewhere.net', inbox.emailAddress, 'From outside');
    await eventually(async () => expect((await messages(inbox.rawKey, '?labels=blocked')).map((m) => m.subject)).toEqual(['From outside']));
    expect((await messages(inbox.rawKey)).map((m) => m.subject)).toEqual(['From inside']);
  }

  const seen = await server.request('GET', '/v0/mail/lists', { key: org.identity.rawKey });
  expect(seen.body.entries).toEqual([{ kind: 'receive-allow', entry: 'example.org', type: 'domain', scope: 'org', createdAt: expect.any(String) }]);
  expect((await server.request('DELETE', '/v0/mail/lists/receive-allow/example.org', { key: org.identity.rawKey })).status).toBe(404);
  // Another org never sees it.
  const other = await signUp(server);
  expect((await server.request('GET', '/v0/mail/lists', { key: other.platform_key })).body.entries).toEqual([]);
});

test('a send, reply or forward to a blocked or non-allowed recipient is refused with 403 recipient_blocked, and nothing leaves', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  await server.request('POST', '/v0/mail/lists/send-block', { key, body: { entry: 'competitor.example' } });
  const refused = await server.request('POST', '/v0/messages/send', { key, body: { to: ['ok@partner.example'], cc: ['ceo@competitor.example'], subject: 'Prices', text: 'our prices' } });
  expect(refused.status).toBe(403);
  expect(refused.body).toMatchObject({ error: 'recipient_blocked', status: 403 });
  expect(refused.body.message).toContain('ceo@competitor.example');
  expect(refused.body.message).not.toContain('ok@partner.example');
  expect(await messages(key, '?labels=sent')).toEqual([]);

  // With a send-allow list, only listed recipients may be mailed.
  await server.request('POST', '/v0/mail/lists/send-allow', { key, body: { entry: 'partner.example' } });
  const outside = await server.request('POST', '/v0/messages/send', { key, body: { to: ['x@random.example'], subject: 's', text: 't' } });
  expect(outside.status).toBe(403);
  expect(outside.body.message).toContain("x@random.example is not on the identity's send-allow list");

  // Replies and forwards are held to the same lists.
  const incoming = await mailFrom('ceo@competitor.example', agent.identity.emailAddress, 'Let us talk');
  await eventually(async () => expect((await messages(key)).length).toBe(1));
  const reply = await server.request('POST', `/v0/messages/${enc(incoming.messageId)}/reply`, { key, body: { text: 'no' } });
  expect(reply.status).toBe(403);
  expect(reply.body.error).toBe('recipient_blocked');
  const forward = await server.request('POST', `/v0/messages/${enc(incoming.messageId)}/forward`, { key, body: { to: ['friend@random.example'] } });
  expect(forward.status).toBe(403);
  const allowed = await server.request('POST', '/v0/messages/send', { key, body: { to: [agent.identity.emailAddress.replace(/@.*/, '@partner.example')], subject: 'ok', text: 'ok' } });
  expect(allowed.status).toBe(201);
  const logs = (await server.request('GET', '/v0/logs', { key: agent.platform_key })).body.logs.map((l: any) => l.action);
  expect(logs).toContain('mail.send_blocked');
});

test("an identity's own allow entries cannot widen its org's allow list: both must let an address through", async () => {
  const org = await signUp(server);
  const key = org.identity.rawKey;
  expect((await server.request('POST', '/v0/mail/lists/send-allow', { key: org.platform_key, body: { entry: 'partner.example' } })).status).toBe(201);
  // The identity (mail:manage) adds a domain of its own choosing to its send-allow list.
  expect((await server.request('POST', '/v0/mail/lists/send-allow', { key, body: { entry: 'anything.example' } })).status).toBe(201);
  const outside = await server.request('POST', '/v0/messages/send', { key, body: { to: ['x@anything.example'], subject: 's', text: 't' } });
  expect(outside.status).toBe(403);
  expect(outside.body.message).toContain("x@anything.example is not on the org's send-allow list");
  // The org's partner is not on the identity's own list: refused as well, each list applies on its own.
  const partner = await server.request('POST', '/v0/messages/send', { key, body: { to: ['y@partner.example'], subject: 's', text: 't' } });
  expect(partner.status).toBe(403);
  expect(partner.body.message).toContain("y@partner.example is not on the identity's send-allow list");
  expect((await server.request('POST', '/v0/mail/lists/send-allow', { key, body: { entry: 'partner.example' } })).status).toBe(201);
  expect((await server.request('POST', '/v0/messages/send', { key, body: { to: ['y@partner.example'], subject: 's', text: 't' } })).status).toBe(201);
});

test('bad list input gets a clear 4xx; scopes hold', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const unknownKind = await server.request('POST', '/v0/mail/lists/deny', { key, body: { entry: 'a@b.example' } });
  expect(unknownKind.status).toBe(400);
  expect(unknownKind.body.message).toContain('receive-allow, receive-block, send-allow, send-block');
  expect((await server.request('GET', '/v0/mail/lists/deny', { key })).status).toBe(400);
  const badEntry = await server.request('POST', '/v0/mail/lists/send-block', { key, body: { entry: 'not an address' } });
  expect(badEntry.status).toBe(400);
  expect(badEntry.body.message).toContain('must be an email address');
  await server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['mail:manage'] } });
  const noScope = await server.request('POST', '/v0/mail/lists/send-block', { key, body: { entry: 'a.example' } });
  expect(noScope.status).toBe(403);
  expect((await server.request('GET', '/v0/mail/lists', { key })).status).toBe(200);
});
