import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { eventually, smtpClient } from './mail-support.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

const enc = encodeURIComponent;

async function inbox(key: string, query = '') {
  const res = await server.request('GET', `/v0/messages${query}`, { key });
  expect(res.status).toBe(200);
  return res.body as { messages: any[]; count: number; nextPageToken?: string };
}

describe('mail from any SMTP client to an agent', () => {
  it('is stored as received+unread, read through its thread, answered, labelled; a human reply joins the thread', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const human = smtpClient(server);
    const sent = await human.sendMail({
      from: 'Ada Human <ada@example.org>', to: agent.identity.emailAddress, subject: 'Quarterly numbers',
      text: 'Hi agent,\nplease send me the Q3 numbers.\n\nAda', html: '<p>Hi agent,</p><p>please send me the Q3 numbers.</p>',
    });
    expect(sent.accepted).toEqual([agent.identity.emailAddress]);

    const unread = await inbox(key, '?labels=unread');
    expect(unread.count).toBe(1);
    const message = unread.messages[0];
    expect(message).toMatchObject({
      messageId: sent.messageId, inboxId: agent.identity.emailAddress, from: ['ada@example.org'], to: [agent.identity.emailAddress],
      subject: 'Quarterly numbers', labels: ['received', 'unread'],
    });
    expect(message.threadId).toMatch(/^thd_[0-9a-f]{16}$/);
    expect(message.text).toContain('please send me the Q3 numbers.');
    expect(message.extractedText).toContain('please send me the Q3 numbers.');
    expect(new Date(message.createdAt).toISOString()).toBe(message.createdAt);
    expect(message).not.toHaveProperty('cc');

    const single = await server.request('GET', `/v0/messages/${enc(sent.messageId)}`, { key });
    expect(single.status).toBe(200);
    expect(single.body).toMatchObject({ messageId: sent.messageId, cc: [], html: '<p>Hi agent,</p><p>please send me the Q3 numbers.</p>' });

    const thread = await server.request('GET', `/v0/threads/${message.threadId}`, { key });
    expect(thread.status).toBe(200);
    expect(thread.body).toMatchObject({ threadId: message.threadId, subject: 'Quarterly numbers', messageCount: 1 });
    expect(thread.body.messages.map((m: any) => m.messageId)).toEqual([sent.messageId]);

    const reply = await server.request('POST', `/v0/messages/${enc(sent.messageId)}/reply`, { key, body: { text: 'Here they are: 42.' } });
    expect(reply.status).toBe(201);
    expect(reply.body).toMatchObject({ threadId: message.threadId, subject: 'Re: Quarterly numbers', labels: ['sent'] });
    expect(reply.body.messageId).toMatch(/^<[0-9a-f]{32}@agents\.test>$/);

    const labelled = await server.request('PATCH', `/v0/messages/${enc(sent.messageId)}`, { key, body: { addLabels: ['read'], removeLabels: ['unread'] } });
    expect(labelled.status).toBe(200);
    expect(labelled.body).toEqual({ messageId: sent.messageId, labels: ['received', 'read'], createdAt: message.createdAt });
    expect((await inbox(key, '?labels=unread')).count).toBe(0);

    // The human answers the agent's reply from their mail program, quoting it and signing off.
    const answer = await human.sendMail({
      from: 'ada@example.org', to: agent.identity.emailAddress, subject: 'Re: Quarterly numbers',
      inReplyTo: reply.body.messageId, references: [sent.messageId, reply.body.messageId],
      text: 'Perfect, thanks!\n\nOn Tue, 3 Mar 2026 at 10:00, Agent <agent@agents.test> wrote:\n> Here they are: 42.\n> \n\n--\nAda Human\nHead of Numbers',
    });
    const latest = (await inbox(key)).messages[0];
    expect(latest.messageId).toBe(answer.messageId);
    expect(latest.threadId).toBe(message.threadId);
    expect(latest.extractedText).toBe('Perfect, thanks!');
    expect(latest.text).toContain('> Here they are: 42.');

    const full = await server.request('GET', `/v0/threads/${message.threadId}`, { key });
    expect(full.body.messageCount).toBe(3);
    expect(full.body.messages.map((m: any) => m.messageId)).toEqual([sent.messageId, reply.body.messageId, answer.messageId]);
    expect(full.body.messages[1]).not.toHaveProperty('extractedText'); // only received messages carry it
    human.close();
  });

  it('refuses unknown, revoked and foreign recipients with 550 and over-size messages with 552', async () => {
    const agent = await signUp(server);
    const client = smtpClient(server);
    await expect(client.sendMail({ from: 'x@example.org', to: 'no-such-inbox-zzzzz@agents.test', subject: 's', text: 't' }))
      .rejects.toMatchObject({ responseCode: 550 });
    await expect(client.sendMail({ from: 'x@example.org', to: 'someone@elsewhere.example', subject: 's', text: 't' }))
      .rejects.toMatchObject({ responseCode: 550 });
    // One good recipient among bad ones: only the good one is accepted.
    const mixed = await client.sendMail({ from: 'x@example.org', to: [agent.identity.emailAddress, 'ghost-aaaaa@agents.test'], subject: 's', text: 't' });
    expect(mixed.accepted).toEqual([agent.identity.emailAddress]);
    expect(mixed.rejected).toEqual(['ghost-aaaaa@agents.test']);

    const small = await startTestServer({ TRUST_PROXY: 'true', SMTP_MAX_MESSAGE_BYTES: '4096', SMTP_MAX_RECIPIENTS: '2' });
    try {
      const other = await signUp(small);
      const smallClient = smtpClient(small);
      await expect(smallClient.sendMail({ from: 'x@example.org', to: other.identity.emailAddress, subject: 'big', text: 'x'.repeat(20_000) }))
        .rejects.toMatchObject({ responseCode: 552 });
      expect((await small.request('GET', '/v0/messages', { key: other.identity.rawKey })).body.count).toBe(0);
      const many = await smallClient.sendMail({ from: 'x@example.org', to: [other.identity.emailAddress, 'a-aaaaa@agents.test', 'b-bbbbb@agents.test'], subject: 's', text: 't' })
        .catch((err) => err);
      expect(many.rejected ?? []).toContain('b-bbbbb@agents.test');
      smallClient.close();

      await small.request('DELETE', `/v0/platform/identities/${other.identity.identityId}`, { key: other.platform_key });
      await expect(smallClient.sendMail({ from: 'x@example.org', to: other.identity.emailAddress, subject: 's', text: 't' }))
        .rejects.toMatchObject({ responseCode: 550 });
    } finally {
      await small.close();
    }
    client.close();
  });

  it('stores a message that carries NUL characters, without them', async () => {
    const agent = await signUp(server);
    const sent = await smtpClient(server).sendMail({ from: 'x@example.org', to: agent.identity.emailAddress, subject: 'a\u0000b', text: 'c\u0000d', html: '<p>e\u0000f</p>' });
    expect(sent.accepted).toEqual([agent.identity.emailAddress]);
    const [message] = (await inbox(agent.identity.rawKey)).messages;
    expect(message).toMatchObject({ subject: 'ab', text: 'cd' });
  });
});

describe('two identities on one server mail each other over SMTP', () => {
  it('delivers a send, threads the reply into the sender’s thread with the right headers, and keeps Bcc out of every copy', async () => {
    const alice = await signUp(server);
    const bob = await signUp(server);
    const carol = await signUp(server);
    const sent = await server.request('POST', '/v0/messages/send', {
      key: alice.identity.rawKey,
      body: { to: [bob.identity.emailAddress], cc: [carol.identity.emailAddress], bcc: ['dave-ddddd@agents.test'], subject: 'Lunch?', text: 'Tomorrow at noon?' },
    });
    expect(sent.status).toBe(201);
    expect(sent.body).toEqual({
      messageId: expect.stringMatching(/^<[0-9a-f]{32}@agents\.test>$/), threadId: expect.stringMatching(/^thd_[0-9a-f]{16}$/),
      inboxId: alice.identity.emailAddress, from: [alice.identity.emailAddress], to: [bob.identity.emailAddress],
      subject: 'Lunch?', labels: ['sent'], createdAt: expect.any(String),
    });

    let received: any;
    await eventually(async () => {
      const res = await inbox(bob.identity.rawKey, '?labels=unread');
      expect(res.count).toBe(1);
      received = res.messages[0];
    });
    expect(received).toMatchObject({ messageId: sent.body.messageId, from: [alice.identity.emailAddress], subject: 'Lunch?', text: 'Tomorrow at noon?' });
    expect(received.threadId).not.toBe(sent.body.threadId); // Bob's inbox has its own thread
    const bobCopy = await server.request('GET', `/v0/messages/${enc(sent.body.messageId)}`, { key: bob.identity.rawKey });
    expect(bobCopy.body.cc).toEqual([carol.identity.emailAddress]);
    expect(bobCopy.body).not.toHaveProperty('bcc');
    expect(JSON.stringify(bobCopy.body)).not.toContain('dave-ddddd');
    await eventually(async () => expect((await inbox(carol.identity.rawKey)).count).toBe(1));

    // Dave does not exist: a permanent (550) failure for him, delivered for the others, visible to Alice.
    await eventually(async () => {
      const own = await server.request('GET', `/v0/messages/${enc(sent.body.messageId)}`, { key: alice.identity.rawKey });
      expect(own.body.delivery.status).toBe('partially_failed');
      expect(own.body.bcc).toEqual(['dave-ddddd@agents.test']);
      expect(own.body.delivery.recipients).toEqual(expect.arrayContaining([
        { address: bob.identity.emailAddress, status: 'delivered' },
        { address: carol.identity.emailAddress, status: 'delivered' },
        { address: 'dave-ddddd@agents.test', status: 'failed', error: expect.stringContaining('550') },
      ]));
    });

    const reply = await server.request('POST', `/v0/messages/${enc(sent.body.messageId)}/reply`, { key: bob.identity.rawKey, body: { text: 'Yes!' } });
    expect(reply.status).toBe(201);
    expect(reply.body.threadId).toBe(received.threadId);
    let answer: any;
    await eventually(async () => {
      const res = await inbox(alice.identity.rawKey, '?labels=received');
      expect(res.count).toBe(1);
      answer = res.messages[0];
    });
    expect(answer).toMatchObject({ messageId: reply.body.messageId, threadId: sent.body.threadId, subject: 'Re: Lunch?', from: [bob.identity.emailAddress], extractedText: 'Yes!' });
    const headers = await server.request('GET', `/v0/messages/${enc(reply.body.messageId)}`, { key: alice.identity.rawKey });
    expect(headers.body).toMatchObject({ inReplyTo: sent.body.messageId, references: [sent.body.messageId] });

    // Replying again does not double the prefix and carries the whole chain.
    const again = await server.request('POST', `/v0/messages/${enc(reply.body.messageId)}/reply`, { key: alice.identity.rawKey, body: { text: 'Great.' } });
    expect(again.body).toMatchObject({ subject: 'Re: Lunch?', threadId: sent.body.threadId });
    await eventually(async () => expect((await inbox(bob.identity.rawKey, '?labels=received')).count).toBe(2));
    const third = await server.request('GET', `/v0/messages/${enc(again.body.messageId)}`, { key: bob.identity.rawKey });
    expect(third.body).toMatchObject({ threadId: received.threadId, inReplyTo: reply.body.messageId, references: [sent.body.messageId, reply.body.messageId] });

    const threads = await server.request('GET', '/v0/threads', { key: alice.identity.rawKey });
    expect(threads.body).toMatchObject({ count: 1, threads: [{ threadId: sent.body.threadId, subject: 'Lunch?', messageCount: 3, inboxId: alice.identity.emailAddress }] });
  });
});

describe('the mail API', () => {
  it('answers 404 for an unknown message and for another identity’s message', async () => {
    const a = await signUp(server);
    const b = await signUp(server);
    const sent = await server.request('POST', '/v0/messages/send', { key: a.identity.rawKey, body: { to: ['nobody-xxxxx@agents.test'], subject: 'x', text: 'y' } });
    for (const [key, id] of [[a.identity.rawKey, '<unknown@agents.test>'], [b.identity.rawKey, sent.body.messageId]]) {
      for (const [method, path, body] of [['GET', '', undefined], ['PATCH', '', { addLabels: ['x'] }], ['POST', '/reply', { text: 'hi' }]] as const) {
        const res = await server.request(method, `/v0/messages/${enc(id!)}${path}`, { key, body });
        expect(res.status).toBe(404);
        expect(res.body).toEqual({ error: 'not_found', message: 'Message not found', status: 404 });
      }
    }
    const thread = await server.request('GET', `/v0/threads/${sent.body.threadId}`, { key: b.identity.rawKey });
    expect(thread.status).toBe(404);
  });

  it('shows a permanent delivery failure on the sent message', async () => {
    const a = await signUp(server);
    const sent = await server.request('POST', '/v0/messages/send', { key: a.identity.rawKey, body: { to: ['ghost-zzzzz@agents.test', 'x@elsewhere.example'], subject: 'x', text: 'y' } });
    await eventually(async () => {
      const res = await server.request('GET', `/v0/messages/${enc(sent.body.messageId)}`, { key: a.identity.rawKey });
      expect(res.body.delivery).toMatchObject({ status: 'failed', attempts: 1 });
      expect(res.body.delivery.recipients).toEqual([
        { address: 'ghost-zzzzz@agents.test', status: 'failed', error: expect.stringContaining('No such mailbox') },
        { address: 'x@elsewhere.example', status: 'failed', error: expect.stringContaining('SMTP_RELAY_URL') },
      ]);
    });
  });

  it('keeps label edits made while the message is being delivered', async () => {
    const a = await signUp(server);
    const key = a.identity.rawKey;
    await Promise.all(Array.from({ length: 4 }, async (_, i) => {
      const sent = await server.request('POST', '/v0/messages/send', { key, body: { to: [`ghost-${i}@agents.test`], subject: `s${i}`, text: 't' } });
      const path = `/v0/messages/${enc(sent.body.messageId)}`;
      // Label the message one label at a time until its delivery has been recorded, then a few more times.
      const added: string[] = [];
      for (let n = 0, after = 0; after < 3 && n < 45; n++) {
        const res = await server.request('PATCH', path, { key, body: { addLabels: [`l${n}`] } });
        expect(res.status).toBe(200);
        added.push(`l${n}`);
        if ((await server.request('GET', path, { key })).body.delivery.status !== 'queued') after++;
      }
      await eventually(async () => {
        const res = await server.request('GET', path, { key });
        expect(res.body.delivery.status).toBe('failed');
        expect(res.body.labels).toEqual(['sent', ...added]);
      });
    }));
  });

  it('validates input: recipients, limits, labels, page tokens', async () => {
    const a = await signUp(server);
    const key = a.identity.rawKey;
    const bad = [
      ['POST', '/v0/messages/send', { to: [], subject: 's', text: 't' }],
      ['POST', '/v0/messages/send', { to: ['not-an-address'], subject: 's', text: 't' }],
      ['POST', '/v0/messages/send', { to: ['a@b.example'], text: 't' }],
      ['GET', '/v0/messages?limit=0'], ['GET', '/v0/messages?limit=101'], ['GET', '/v0/messages?limit=abc'],
      ['GET', '/v0/messages?pageToken=garbage!'], ['GET', `/v0/messages?pageToken=${Buffer.from('nope').toString('base64url')}`],
      ['GET', '/v0/threads?limit=101'], ['GET', '/v0/threads?pageToken=%%%'],
    ] as const;
    for (const [method, path, body] of bad) {
      const res = await server.request(method, path, { key, body: body as unknown });
      expect([path, res.status]).toEqual([path, 400]);
      expect(res.body).toMatchObject({ error: expect.any(String), message: expect.any(String), status: 400 });
    }
    // A From that is not one of the sender's addresses (test/mail/domains.test.ts has its own domain's).
    const spoof = await server.request('POST', '/v0/messages/send', { key, body: { to: ['a@b.example'], subject: 's', text: 't', from: 'spoof@x.example' } });
    expect([spoof.status, spoof.body.error]).toEqual([403, 'from_not_allowed']);
    const msg = await server.request('POST', '/v0/messages/send', { key, body: { to: ['ghost-qqqqq@agents.test'], subject: 's', text: 't' } });
    const path = `/v0/messages/${enc(msg.body.messageId)}`;
    expect((await server.request('PATCH', path, { key, body: {} })).status).toBe(400);
    expect((await server.request('PATCH', path, { key, body: { addLabels: ['x'.repeat(65)] } })).status).toBe(400);
    expect((await server.request('PATCH', path, { key, body: { addLabels: ['a,b'] } })).status).toBe(400);
    expect((await server.request('PATCH', path, { key, body: { addLabels: ['same'], removeLabels: ['same'] } })).status).toBe(400);
    const many = Array.from({ length: 30 }, (_, i) => `l${i}`);
    expect((await server.request('PATCH', path, { key, body: { addLabels: many } })).status).toBe(200);
    expect((await server.request('PATCH', path, { key, body: { addLabels: many.map((l) => `m${l}`) } })).status).toBe(400);
    const trimmed = await server.request('PATCH', path, { key, body: { addLabels: ['  important  ', 'important'], removeLabels: ['sent', 'never-there'] } });
    expect(trimmed.body.labels).toEqual([...many, 'important']);
  });

  it('enforces the mail scopes and records sends, replies and label changes in the activity log', async () => {
    const a = await signUp(server);
    const key = a.identity.rawKey;
    const sent = await server.request('POST', '/v0/messages/send', { key, body: { to: [a.identity.emailAddress], subject: 'Note to self', text: 'hi' } });
    await eventually(async () => expect((await inbox(key, '?labels=received')).count).toBe(1));
    await server.request('POST', `/v0/messages/${enc(sent.body.messageId)}/reply`, { key, body: { text: 'again' } });
    await server.request('PATCH', `/v0/messages/${enc(sent.body.messageId)}`, { key, body: { addLabels: ['processed'] } });
    const logs = await server.request('GET', '/v0/logs', { key: a.platform_key });
    const actions = logs.body.logs.map((l: any) => l.action);
    expect(actions).toEqual(expect.arrayContaining(['mail.sent', 'mail.replied', 'mail.labels_updated']));
    const sentLog = logs.body.logs.find((l: any) => l.action === 'mail.sent');
    expect(sentLog).toMatchObject({ category: 'mail', targetType: 'message', targetId: sent.body.messageId, identityId: a.identity.identityId });

    await server.request('PATCH', `/v0/platform/identities/${a.identity.identityId}`, {
      key: a.platform_key, body: { removeScopes: ['mail:send', 'mail:manage'] },
    });
    const denied = await server.request('POST', '/v0/messages/send', { key, body: { to: ['x@y.example'], subject: 's', text: 't' } });
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({ error: 'forbidden', requiredScope: 'mail:send' });
    expect((await server.request('PATCH', `/v0/messages/${enc(sent.body.messageId)}`, { key, body: { addLabels: ['x'] } })).status).toBe(403);
    expect((await server.request('GET', '/v0/messages', { key })).status).toBe(200);
    expect((await server.request('GET', '/v0/messages', { key: a.platform_key })).status).toBe(403);
    expect((await server.request('GET', '/v0/messages')).status).toBe(401);
  });
});
