// Mail events pushed to the agent, end to end over real SMTP: signed webhooks (on the payment.received
// delivery machinery: signature, idempotency key, retries, attempts on record) for received, sent,
// delivered and bounced mail (a DSN returned by the dev mail catcher, linked to the original), silence for
// blocked senders, and the SSE stream resuming from Last-Event-ID, also from another process.
import { verifyWebhook, WEBHOOK_HEADERS } from 'agentgate-x402-wire';
import { MailCatcher } from '../../server/dev/mail-catcher.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { startReceiver } from '../webhooks/receiver.js';
import { eventually, smtpClient } from './mail-support.js';
import { claimId } from '../../server/mail/inbox-sequence.js';

let server: TestServer;
let catcher: MailCatcher;
beforeAll(async () => {
  catcher = await new MailCatcher().start();
  server = await startTestServer({ TRUST_PROXY: 'true', SMTP_RELAY_URL: catcher.relayUrl, WEBHOOK_RETRY_BASE_MS: '50' });
  catcher.returnBouncesTo(server.app.mail.delivery.inboundListener());
});
afterAll(async () => {
  await server?.close();
  await catcher?.stop();
});


async function mailFrom(from: string, to: string, subject: string) {
  const human = smtpClient(server);
  const sent = await human.sendMail({ from, to, subject, text: `${subject} body` });
  human.close();
  return sent;
}

/** A raw SSE client: collects `{id, event, data}` until closed. */
function openStream(base: string, key: string, options: { lastEventId?: string; query?: string } = {}) {
  const events: Array<{ id: string; event: string; data: any }> = [];
  const controller = new AbortController();
  const ready = fetch(`${base}/v0/events${options.query ?? ''}`, {
    headers: { authorization: `Bearer ${key}`, ...(options.lastEventId ? { 'last-event-id': options.lastEventId } : {}) }, signal: controller.signal,
  });
  const done = (async () => {
    const res = await ready;
    if (res.status !== 200) return res.status;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields = Object.fromEntries(block.split('\n').filter((l) => !l.startsWith(':') && l.includes(':')).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
          if (fields.data) events.push({ id: fields.id, event: fields.event, data: JSON.parse(fields.data) });
        }
      }
    } catch { /* aborted */ }
    return 200;
  })();
  return { events, ready, close: async () => { controller.abort(); await done; } };
}

test('webhooks: received, sent, delivered and a DSN bounce linked to the original, each signed, with an idempotency key', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const receiver = await startReceiver();
  const created = await server.request('POST', '/v0/webhooks', { key, body: { url: receiver.url, events: ['message.received', 'message.sent', 'message.delivered', 'message.bounced'] } });
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({ webhookId: expect.stringMatching(/^mwh_[0-9a-f]{24}$/), url: receiver.url, secret: expect.stringMatching(/^whsec_/) });
  const { secret, webhookId } = created.body;
  // The secret is shown once: never in a read.
  const read = await server.request('GET', `/v0/webhooks/${webhookId}`, { key });
  expect(read.body).toEqual({ webhookId, url: receiver.url, events: created.body.events, createdAt: created.body.createdAt });
  expect((await server.request('GET', '/v0/webhooks', { key })).text).not.toContain('whsec_');
  const stored = await server.app.mailWebhooks.hooks.findById(webhookId).lean();
  expect(JSON.stringify(stored)).not.toContain(secret);

  const byEvent = (event: string) => receiver.received.filter((r) => r.json?.event === event);
  await mailFrom('ada@example.org', agent.identity.emailAddress, 'Hello agent');
  await eventually(() => expect(byEvent('message.received')).toHaveLength(1));
  const hello = byEvent('message.received')[0]!;
  expect(verifyWebhook(hello.raw, hello.headers[WEBHOOK_HEADERS.signature] as string, secret)).toBe(true);
  expect(hello.headers[WEBHOOK_HEADERS.event]).toBe('message.received');
  expect(hello.headers[WEBHOOK_HEADERS.idempotencyKey]).toMatch(new RegExp(`\\.${webhookId}$`));
  expect(hello.json).toMatchObject({ event: 'message.received', identityId: agent.identity.identityId, data: { message: { subject: 'Hello agent', from: ['ada@example.org'], labels: ['received', 'unread'] } } });

  const sent = await server.request('POST', '/v0/messages/send', { key, body: { to: ['bounce@example.org'], subject: 'Are you there?', text: 'hello?' } });
  expect(sent.status).toBe(201);
  // Delivered and bounced are two deliveries, each on its own job: under load either can reach the receiver first.
  await eventually(() => {
    expect(byEvent('message.bounced')).toHaveLength(1);
    expect(byEvent('message.delivered')).toHaveLength(1);
  }, 20_000);
  expect(byEvent('message.sent').map((r) => r.json.data.message.messageId)).toEqual([sent.body.messageId]);
  // The catcher (the outside relay) accepted it, then its DSN came back: delivered to the relay, then bounced.
  expect(byEvent('message.delivered').map((r) => r.json.data)).toEqual([{ messageId: sent.body.messageId, threadId: sent.body.threadId, recipient: 'bounce@example.org' }]);
  const bounce = byEvent('message.bounced')[0]!;
  expect(verifyWebhook(bounce.raw, bounce.headers[WEBHOOK_HEADERS.signature] as string, secret)).toBe(true);
  expect(bounce.json.data).toMatchObject({
    messageId: sent.body.messageId, threadId: sent.body.threadId, recipient: 'bounce@example.org', source: 'dsn', status: '5.1.1',
    diagnostic: expect.stringContaining('User unknown'), bounceMessageId: expect.stringContaining('@catcher.localhost>'),
  });
  // The report itself is in the inbox, in the thread of the message that bounced.
  const thread = await server.request('GET', `/v0/threads/${sent.body.threadId}`, { key });
  expect(thread.body.messages.map((m: any) => m.subject)).toEqual(['Are you there?', 'Undelivered Mail Returned to Sender']);
  expect(thread.body.messages[1].labels).toContain('bounce');

  // The report is also mail in the inbox, so it arrives as message.received too.
  await eventually(() => expect(byEvent('message.received').map((r) => r.json.data.message.subject)).toEqual(['Hello agent', 'Undelivered Mail Returned to Sender']));
  // Every attempt is on record for the agent.
  await eventually(async () => {
    const deliveries = await server.request('GET', `/v0/webhooks/${webhookId}/deliveries`, { key });
    expect(deliveries.body.deliveries.map((d: any) => d.event).sort()).toEqual(['message.bounced', 'message.delivered', 'message.received', 'message.received', 'message.sent']);
    expect(deliveries.body.deliveries.every((d: any) => d.status === 'delivered' && d.attempts.length === 1 && d.attempts[0].statusCode === 200)).toBe(true);
  });
  // The seller's payment.received log does not show an identity's mail deliveries.
  expect((await server.request('GET', '/v0/webhooks/deliveries', { key: agent.platform_key })).body.count).toBe(0);
  await receiver.close();
});

test('a failing receiver is retried on the 1s/4s/16s/64s/300s schedule (here scaled down) and every attempt shows', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const receiver = await startReceiver([500, 503], 200);
  const hook = await server.request('POST', '/v0/webhooks', { key, body: { url: receiver.url, events: ['message.received'] } });
  await mailFrom('ada@example.org', agent.identity.emailAddress, 'Retry me');
  await receiver.next(3);
  const keys = receiver.received.map((r) => r.headers[WEBHOOK_HEADERS.idempotencyKey]);
  expect(new Set(keys).size).toBe(1); // the same event, the same key, on every retry
  expect(new Set(receiver.received.map((r) => r.raw)).size).toBe(1);
  await eventually(async () => {
    const [delivery] = (await server.request('GET', `/v0/webhooks/${hook.body.webhookId}/deliveries`, { key })).body.deliveries;
    expect(delivery).toMatchObject({ event: 'message.received', status: 'delivered', attemptCount: 3 });
    expect(delivery.attempts.map((a: any) => a.statusCode)).toEqual([500, 503, 200]);
  });
  await receiver.close();
});

test('an event stored by a process that died before telling its webhooks is delivered by the outbox sweep, once', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const receiver = await startReceiver();
  const hook = await server.request('POST', '/v0/webhooks', { key, body: { url: receiver.url, events: ['message.received'] } });
  await mailFrom('ada@example.org', agent.identity.emailAddress, 'Told at once');
  await receiver.next(1);
  const events = server.app.mail.events;
  // Told events are marked: the sweep finds nothing of them.
  await eventually(async () => expect(await events.events.countDocuments({ identityId: agent.identity.identityId, undispatched: true })).toBe(0));

  // What a process leaves that stored the event and died before its webhook dispatch ran: the event, unmarked.
  const seq = (await events.top(agent.identity.identityId)) + 1;
  await events.events.create({
    _id: `${agent.identity.identityId}#${seq}`, identityId: agent.identity.identityId, orgId: agent.org_id, seq, type: 'message.received',
    data: { message: { messageId: 'msg_orphan', subject: 'Stored, never told' } }, at: new Date(Date.now() - 60_000), undispatched: true,
  });
  // Swept here, by two sweepers at once (the server's own sweep may also run meanwhile): told once, then marked.
  await Promise.all([events.redispatch(10_000), events.redispatch(10_000)]);
  await eventually(async () => expect(await events.redispatch(0)).toBe(0));
  await receiver.next(2);
  const subjects = receiver.received.map((r) => r.json.data.message.subject);
  expect(subjects).toEqual(['Told at once', 'Stored, never told']);
  expect(receiver.received[1]!.headers[WEBHOOK_HEADERS.idempotencyKey]).toBe(`${agent.identity.identityId}.${seq}.${hook.body.webhookId}`);
  await eventually(async () => {
    const deliveries = (await server.request('GET', `/v0/webhooks/${hook.body.webhookId}/deliveries`, { key })).body.deliveries;
    expect(deliveries).toHaveLength(2);
    expect(deliveries.every((d: any) => d.status === 'delivered' && d.attempts.length === 1)).toBe(true);
  });
  await receiver.close();
});

test('a blocked sender is silent: no message.received webhook or stream event, unless message.received.blocked is asked for', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const receiver = await startReceiver();
  const watcher = await startReceiver();
  await server.request('POST', '/v0/webhooks', { key, body: { url: receiver.url, events: ['message.received'] } });
  await server.request('POST', '/v0/webhooks', { key, body: { url: watcher.url, events: ['message.received.blocked'] } });
  await server.request('POST', '/v0/mail/lists/receive-block', { key, body: { entry: 'spam.example' } });
  const stream = openStream(server.url, key);
  expect((await stream.ready).status).toBe(200);

  await mailFrom('offers@spam.example', agent.identity.emailAddress, 'Buy now');
  await mailFrom('ada@example.org', agent.identity.emailAddress, 'Real mail');
  await eventually(() => expect(receiver.received.map((r) => r.json.data.message.subject)).toEqual(['Real mail']));
  await eventually(() => expect(watcher.received.map((r) => r.json.data.message.subject)).toEqual(['Buy now']));
  await eventually(() => expect(stream.events.map((e) => e.data.data.message?.subject)).toEqual(['Real mail']));
  // Delivered after the blocked one, so had the blocked one been announced, it would have been seen first.
  expect(receiver.received).toHaveLength(1);
  await stream.close();
  await Promise.all([receiver.close(), watcher.close()]);
});

test('the event stream resumes after Last-Event-ID, from another process on the same database', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const other = await startTestServer({ MONGODB_DB: server.config.MONGODB_DB, TRUST_PROXY: 'true' });
  try {
    const first = openStream(server.url, key);
    await first.ready;
    await mailFrom('ada@example.org', agent.identity.emailAddress, 'one');
    await mailFrom('ada@example.org', agent.identity.emailAddress, 'two');
    await eventually(() => expect(first.events.map((e) => e.data.data.message.subject)).toEqual(['one', 'two']));
    expect(first.events.map((e) => e.event)).toEqual(['message.received', 'message.received']);
    const lastSeen = first.events[0]!.id; // pretend the connection dropped after "one"
    await first.close();

    await mailFrom('ada@example.org', agent.identity.emailAddress, 'three');
    // Reconnect to the other process: it replays what came after "one", then follows live mail that the
    // first process stores (it hears of it through the change feed).
    const resumed = openStream(other.url, key, { lastEventId: lastSeen });
    expect((await resumed.ready).status).toBe(200);
    await eventually(() => expect(resumed.events.map((e) => e.data.data.message.subject)).toEqual(['two', 'three']));
    await mailFrom('ada@example.org', agent.identity.emailAddress, 'four');
    await eventually(() => expect(resumed.events.map((e) => e.data.data.message.subject)).toEqual(['two', 'three', 'four']));
    expect(resumed.events.map((e) => Number(e.id))).toEqual([2, 3, 4]);
    await resumed.close();

    // A filter by event type, and the sent copy as message.sent.
    const sentOnly = openStream(other.url, key, { query: '?events=message.sent' });
    await sentOnly.ready;
    const sent = await server.request('POST', '/v0/messages/send', { key, body: { to: [agent.identity.emailAddress], subject: 'note to self', text: 'x' } });
    await eventually(() => expect(sentOnly.events.map((e) => e.data.data.message.messageId)).toEqual([sent.body.messageId]));
    await sentOnly.close();
  } finally {
    await other.stop();
  }
});

test('bad input: unknown event, private or malformed webhook URL, bad Last-Event-ID; scopes and identities hold', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const unknown = await server.request('POST', '/v0/webhooks', { key, body: { url: 'https://hooks.example.org/x', events: ['message.opened'] } });
  expect(unknown.status).toBe(400);
  expect(unknown.body.message).toContain('message.received');
  for (const url of ['http://10.0.0.7/hook', 'http://169.254.169.254/latest', 'http://[fd00::1]/hook']) {
    const refused = await server.request('POST', '/v0/webhooks', { key, body: { url, events: ['message.received'] } });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe('url_not_allowed');
  }
  expect((await server.request('POST', '/v0/webhooks', { key, body: { url: 'ftp://example.org/x', events: ['message.received'] } })).status).toBe(400);
  const badResume = await fetch(`${server.url}/v0/events`, { headers: { authorization: `Bearer ${key}`, 'last-event-id': 'yesterday' } });
  expect(badResume.status).toBe(400);
  const badFilter = await server.request('GET', '/v0/events?events=message.opened', { key });
  expect(badFilter.status).toBe(400);

  const receiver = await startReceiver();
  const hook = await server.request('POST', '/v0/webhooks', { key, body: { url: receiver.url, events: ['message.received'] } });
  const stranger = await signUp(server);
  expect((await server.request('GET', `/v0/webhooks/${hook.body.webhookId}`, { key: stranger.identity.rawKey })).status).toBe(404);
  expect((await server.request('DELETE', `/v0/webhooks/${hook.body.webhookId}`, { key: stranger.identity.rawKey })).status).toBe(404);
  expect((await server.request('DELETE', `/v0/webhooks/${hook.body.webhookId}`, { key })).status).toBe(200);
  expect((await server.request('GET', '/v0/webhooks', { key })).body.count).toBe(0);
  await server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['mail:read', 'mail:manage'] } });
  expect((await server.request('GET', '/v0/events', { key })).status).toBe(403);
  expect((await server.request('POST', '/v0/webhooks', { key, body: { url: receiver.url, events: ['message.received'] } })).status).toBe(403);
  await receiver.close();
});

test('a recipient refused with a 5xx during delivery is message.bounced with source smtp, once', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const receiver = await startReceiver();
  await server.request('POST', '/v0/webhooks', { key, body: { url: receiver.url, events: ['message.bounced', 'message.delivered'] } });
  const peer = await signUp(server);
  const sent = await server.request('POST', '/v0/messages/send', { key, body: { to: [peer.identity.emailAddress, 'nobody-here@agents.test'], subject: 'Two', text: 'x' } });
  await eventually(() => expect(receiver.received.map((r) => r.json.event).sort()).toEqual(['message.bounced', 'message.delivered']));
  const bounced = receiver.received.find((r) => r.json.event === 'message.bounced')!.json.data;
  expect(bounced).toMatchObject({ messageId: sent.body.messageId, recipient: 'nobody-here@agents.test', source: 'smtp', diagnostic: expect.stringContaining('No such mailbox') });
  // The worker records the same outcome again (a retry, a give-up after a crash): nothing is announced twice.
  const outbound = await server.app.db.collection('mail_outbound').findOne({ from: agent.identity.emailAddress });
  await server.app.mail.delivery.giveUp(String(outbound!._id), new Error('recorded again'));
  const logged = await server.app.db.collection('mail_events').find({ identityId: agent.identity.identityId, type: { $in: ['message.bounced', 'message.delivered'] } }).toArray();
  expect(logged.map((e) => e.type).sort()).toEqual(['message.bounced', 'message.delivered']);
  await receiver.close();
});

test('a stream resuming from an id long trimmed jumps over the trimmed events in a few lookups, not two per event', async () => {
  const agent = await signUp(server);
  const identity = { _id: agent.identity.identityId, orgId: agent.org_id };
  const events = server.app.mail.events;
  for (let i = 0; i < 60; i++) await events.emit(identity, 'message.received.blocked', { n: i });
  // The first 50 are past the retention: their claims are 8 days old and the events themselves trimmed.
  const old = new Date(Date.now() - 8 * 24 * 3600_000);
  const ids = Array.from({ length: 50 }, (_, i) => claimId(identity._id, i + 1));
  await server.app.db.collection('mail_event_sequence').updateMany({ _id: { $in: ids as never[] } }, { $set: { at: old } });
  await server.app.db.collection('mail_events').deleteMany({ _id: { $in: ids as never[] } });

  const commands = async () => (await server.app.metrics.dbCommands.get()).values.filter((v) => ['mail_events', 'mail_event_sequence'].includes(v.labels.collection as string)).reduce((sum, v) => sum + v.value, 0);
  const before = await commands();
  const page = await events.after(identity._id, 0);
  const used = (await commands()) - before;
  expect(page.events.map((e) => (e.data as { n: number }).n)).toEqual([50, 51, 52, 53, 54, 55, 56, 57, 58, 59]);
  expect(page.cursor).toBe(60);
  // Walking the trimmed numbers one by one took two lookups each (100 here).
  expect(used).toBeLessThan(40);
});


test('in production a webhook URL on loopback is refused too (dev allows it for local receivers)', async () => {
  // The service as a production process would build it, on this test database; nothing is dispatched
  // through it (it is the last test here), only its registration check is used.
  const { MailWebhooks } = await import('../../server/mail/webhooks.js');
  const production = new MailWebhooks(server.app.db, { ...server.app.config, mode: 'production' }, server.app.secrets, server.app.webhooks, server.app.logs);
  const agent = await signUp(server);
  const owner = { orgId: agent.org_id, identityId: agent.identity.identityId };
  for (const url of ['http://127.0.0.1:8080/hook', 'http://localhost/hook', 'http://[::1]/hook', 'http://192.168.1.10/hook']) {
    await expect(production.create(owner, { url, events: ['message.received'] })).rejects.toMatchObject({ status: 400, code: 'url_not_allowed' });
  }
});
