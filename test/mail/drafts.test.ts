// Drafts, scheduled sends and approval, over the HTTP API against real SMTP on loopback; scheduled sends
// across a restart and two servers (each its own connections, memory and job worker) on one database.
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { sentIdOf } from '../../server/mail/drafts.js';
import { eventually, smtpClient } from './mail-support.js';
import { consoleGet, consolePost, signIn } from '../console/http-client.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

const enc = encodeURIComponent;

async function received(key: string, s = server) {
  return (await s.request('GET', '/v0/messages?labels=received', { key })).body.messages as any[];
}

describe('drafts', () => {
  it('are created, read, listed, changed and deleted by their identity only; another identity gets 404', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const created = await server.request('POST', '/v0/drafts', { key, body: { to: ['bob@example.org'], subject: 'Plan', text: 'v1' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ status: 'draft', kind: 'new', to: ['bob@example.org'], subject: 'Plan', text: 'v1', sendAt: null });
    const id = created.body.draftId;
    expect(id).toMatch(/^drf_[0-9a-f]{24}$/);

    const changed = await server.request('PATCH', `/v0/drafts/${id}`, { key, body: { text: 'v2', cc: ['carol@example.org'] } });
    expect(changed.body).toMatchObject({ text: 'v2', cc: ['carol@example.org'], status: 'draft' });
    expect((await server.request('GET', `/v0/drafts/${id}`, { key })).body.text).toBe('v2');
    const listed = await server.request('GET', '/v0/drafts', { key });
    expect(listed.body).toMatchObject({ count: 1, drafts: [{ draftId: id }] });

    const other = await signUp(server);
    expect((await server.request('GET', `/v0/drafts/${id}`, { key: other.identity.rawKey })).status).toBe(404);
    expect((await server.request('PATCH', `/v0/drafts/${id}`, { key: other.identity.rawKey, body: { text: 'x' } })).status).toBe(404);
    expect((await server.request('POST', `/v0/drafts/${id}/send`, { key: other.identity.rawKey, body: {} })).status).toBe(404);
    expect((await server.request('GET', `/v0/drafts/${id}`, { key: other.platform_key })).status).toBe(404);
    expect((await server.request('GET', '/v0/drafts/drf_nope', { key })).body).toMatchObject({ error: 'validation_error', status: 400 });
    expect((await server.request('POST', '/v0/drafts', { key, body: { to: ['bob@example.org'], bogus: 1 } })).status).toBe(400);
    expect((await server.request('GET', '/v0/drafts', {})).status).toBe(401);

    expect((await server.request('DELETE', `/v0/drafts/${id}`, { key })).body).toEqual({ draftId: id, deleted: true });
    expect((await server.request('GET', `/v0/drafts/${id}`, { key })).status).toBe(404);
  });

  it('hold as much as a message may: a 1.5 MB HTML body is taken, a text past its limit is refused by name (400, not 413)', async () => {
    const key = (await signUp(server)).identity.rawKey;
    const html = `<p>${'x'.repeat(1_500_000)}</p>`;
    const created = await server.request('POST', '/v0/drafts', { key, body: { to: ['bob@example.org'], subject: 'Long', html } });
    expect(created.status).toBe(201);
    expect((await server.request('GET', `/v0/drafts/${created.body.draftId}`, { key })).body.html).toBe(html);
    const tooLong = await server.request('PATCH', `/v0/drafts/${created.body.draftId}`, { key, body: { text: 'y'.repeat(1_000_001) } });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body).toMatchObject({ error: 'validation_error' });
    expect(tooLong.body.message).toMatch(/text/);
  });

  it('are sent once: new mail, a reply in its thread and a forward; sending again sends nothing more', async () => {
    const agent = await signUp(server);
    const peer = await signUp(server);
    const key = agent.identity.rawKey;
    const draft = (await server.request('POST', '/v0/drafts', { key, body: { to: [peer.identity.emailAddress], subject: 'Hello', text: 'Hi peer' } })).body;
    const sent = await server.request('POST', `/v0/drafts/${draft.draftId}/send`, { key, body: {} });
    expect(sent.status).toBe(200);
    expect(sent.body).toMatchObject({ status: 'sent', message: { subject: 'Hello', to: [peer.identity.emailAddress], labels: ['sent'] } });
    const again = await server.request('POST', `/v0/drafts/${draft.draftId}/send`, { key, body: {} });
    expect(again.body.message.messageId).toBe(sent.body.message.messageId);
    expect((await server.request('PATCH', `/v0/drafts/${draft.draftId}`, { key, body: { text: 'late' } })).body.error).toBe('draft_sent');
    await eventually(async () => expect(await received(peer.identity.rawKey)).toHaveLength(1));

    const human = smtpClient(server);
    const incoming = await human.sendMail({ from: 'ada@example.org', to: agent.identity.emailAddress, subject: 'Question', text: 'When?' });
    human.close();
    const reply = (await server.request('POST', '/v0/drafts', { key, body: { inReplyTo: incoming.messageId, text: 'Tomorrow.' } })).body;
    expect(reply).toMatchObject({ kind: 'reply', inReplyTo: incoming.messageId, subject: 'Question' });
    const replied = (await server.request('POST', `/v0/drafts/${reply.draftId}/send`, { key, body: {} })).body;
    const original = (await server.request('GET', `/v0/messages/${enc(incoming.messageId)}`, { key })).body;
    expect(replied.message).toMatchObject({ subject: 'Re: Question', to: ['ada@example.org'], threadId: original.threadId });

    const forward = (await server.request('POST', '/v0/drafts', { key, body: { forwardOf: incoming.messageId, to: [peer.identity.emailAddress], text: 'FYI' } })).body;
    const forwarded = (await server.request('POST', `/v0/drafts/${forward.draftId}/send`, { key, body: {} })).body;
    expect(forwarded.message).toMatchObject({ subject: 'Fwd: Question', to: [peer.identity.emailAddress] });
    await eventually(async () => expect((await received(peer.identity.rawKey)).map((m) => m.subject).sort()).toEqual(['Fwd: Question', 'Hello']));
    expect((await server.request('GET', '/v0/drafts?status=sent', { key })).body.count).toBe(3);
  });
});

describe('scheduled sends', () => {
  it('go out at sendAt from a job that survives a restart: the draft is scheduled on one server and sent by the next', async () => {
    const first = await startTestServer({ TRUST_PROXY: 'true' });
    const agent = await signUp(first);
    const key = agent.identity.rawKey;
    const sendAt = new Date(Date.now() + 3_000).toISOString();
    const draft = (await first.request('POST', '/v0/drafts', { key, body: { to: [agent.identity.emailAddress], subject: 'Later', text: 'Scheduled', sendAt } })).body;
    const scheduled = await first.request('POST', `/v0/drafts/${draft.draftId}/send`, { key, body: {} });
    expect(scheduled.status).toBe(202);
    expect(scheduled.body).toMatchObject({ status: 'scheduled', sendAt });
    expect((await first.request('PATCH', `/v0/drafts/${draft.draftId}`, { key, body: { text: 'x' } })).body.error).toBe('draft_locked');
    await first.stop(); // the process goes away before the send is due; its database stays

    const next = await startTestServer({ TRUST_PROXY: 'true', MONGODB_DB: first.config.MONGODB_DB, MASTER_KEY: first.config.MASTER_KEY.toString('hex') });
    try {
      await eventually(async () => expect((await next.request('GET', `/v0/drafts/${draft.draftId}`, { key })).body.status).toBe('sent'), 20_000);
      const view = (await next.request('GET', `/v0/drafts/${draft.draftId}`, { key })).body;
      expect(new Date(view.message.createdAt).getTime()).toBeGreaterThanOrEqual(new Date(sendAt).getTime());
      await eventually(async () => expect(await received(key, next)).toHaveLength(1));
    } finally {
      await next.close();
    }
  });

  it('two servers racing on one due scheduled send send it once', async () => {
    const other = await startTestServer({ TRUST_PROXY: 'true', MONGODB_DB: server.config.MONGODB_DB, MASTER_KEY: server.config.MASTER_KEY.toString('hex') });
    try {
      const agent = await signUp(server);
      const peer = await signUp(server);
      const key = agent.identity.rawKey;
      const draft = (await server.request('POST', '/v0/drafts', { key, body: { to: [peer.identity.emailAddress], subject: 'Raced', text: 'Once', sendAt: new Date(Date.now() + 3_600_000).toISOString() } })).body;
      expect((await server.request('POST', `/v0/drafts/${draft.draftId}/send`, { key, body: {} })).body.status).toBe('scheduled');
      // Time passes: the send is due now (written the way no route can, to race the two runs on it).
      await server.app.mail.drafts.drafts.updateOne({ _id: draft.draftId }, { $set: { sendAt: new Date(Date.now() - 1000) } });
      await Promise.all([0, 1, 2, 3, 4, 5].map((i) => (i % 2 ? other : server).app.mail.drafts.sendWhenDue(draft.draftId)));
      const sent = await server.app.mail.messages.find({ inboxId: agent.identity.emailAddress, direction: 'sent' }).lean();
      expect(sent.map((m) => m._id)).toEqual([sentIdOf(draft.draftId)]);
      await eventually(async () => expect(await received(peer.identity.rawKey)).toHaveLength(1));
      expect((await server.request('GET', `/v0/drafts/${draft.draftId}`, { key })).body.status).toBe('sent');
    } finally {
      await other.stop();
    }
  });
});

describe('approval', () => {
  it('holds sends outside the list for the org admin, who approves (sent, draft.approved) or rejects (never sent, draft.rejected)', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const admin = agent.platform_key;
    const id = agent.identity.identityId;
    // Only the org admin sets the approval policy, for the org or for one identity.
    expect((await server.request('PATCH', '/v0/mail/settings', { key, body: { approval: 'never' } })).status).toBe(403);
    const policy = await server.request('PATCH', `/v0/mail/settings?identityId=${id}`, { key: admin, body: { approval: 'outside-list', approvalList: ['example.org'] } });
    expect(policy.status).toBe(200);
    expect(policy.body.effective).toMatchObject({ approval: 'outside-list', approvalList: ['example.org'] });

    const inside = await server.request('POST', '/v0/messages/send', { key, body: { to: ['bob@example.org'], subject: 'Inside', text: 'ok' } });
    expect(inside.status).toBe(201);
    const held = await server.request('POST', '/v0/messages/send', { key, body: { to: ['eve@outside.example'], subject: 'Wire 500 USDC', text: 'pay' } });
    expect(held.status).toBe(202);
    expect(held.body).toMatchObject({ status: 'pending_approval', approvalFor: ['eve@outside.example'], subject: 'Wire 500 USDC' });
    const second = await server.request('POST', '/v0/messages/send', { key, body: { to: ['mallory@outside.example'], subject: 'Also', text: 'pay' } });
    expect(second.status).toBe(202);

    // The agent cannot approve its own send; the admin sees what waits.
    expect((await server.request('POST', `/v0/drafts/${held.body.draftId}/approve`, { key, body: {} })).status).toBe(403);
    const waiting = await server.request('GET', '/v0/drafts?status=pending_approval', { key: admin });
    expect(waiting.body.drafts.map((d: any) => d.subject).sort()).toEqual(['Also', 'Wire 500 USDC']);

    const rejected = await server.request('POST', `/v0/drafts/${second.body.draftId}/reject`, { key: admin, body: { reason: 'Unknown payee' } });
    expect(rejected.body).toMatchObject({ status: 'rejected', decision: { decision: 'rejected', reason: 'Unknown payee' } });
    const approved = await server.request('POST', `/v0/drafts/${held.body.draftId}/approve`, { key: admin, body: {} });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ status: 'sent', message: { subject: 'Wire 500 USDC', to: ['eve@outside.example'] } });
    expect((await server.request('POST', `/v0/drafts/${held.body.draftId}/approve`, { key: admin, body: {} })).status).toBe(409);
    expect((await server.request('POST', `/v0/drafts/${second.body.draftId}/send`, { key, body: {} })).body.error).toBe('draft_rejected');
    // A rejected draft is final: it cannot be changed either (the decision is once per draft).
    expect((await server.request('PATCH', `/v0/drafts/${second.body.draftId}`, { key, body: { to: ['bob@partner.example'] } })).body).toMatchObject({ status: 409, error: 'draft_rejected' });

    const sent = (await server.request('GET', '/v0/messages?labels=sent', { key })).body.messages.map((m: any) => m.subject);
    expect(sent.sort()).toEqual(['Inside', 'Wire 500 USDC']);
    const events = (await server.app.mail.events.after(id, 0)).events.filter((e) => e.type.startsWith('draft.'));
    expect(events.map((e) => [e.type, (e.data as any).draftId])).toEqual([['draft.rejected', second.body.draftId], ['draft.approved', held.body.draftId]]);
    // Another org's admin sees none of it.
    const stranger = await signUp(server);
    expect((await server.request('POST', `/v0/drafts/${second.body.draftId}/approve`, { key: stranger.platform_key, body: {} })).status).toBe(404);
  });

  it('the org admin approves and rejects in the console as through the API', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    expect((await server.request('PATCH', '/v0/mail/settings', { key: agent.platform_key, body: { approval: 'always' } })).status).toBe(200);
    const a = (await server.request('POST', '/v0/messages/send', { key, body: { to: ['ada@example.org'], subject: 'Needs a yes', text: 'Pay 5 USDC' } })).body;
    const b = (await server.request('POST', '/v0/messages/send', { key, body: { to: ['bob@example.org'], subject: 'Needs a no', text: 'Pay 500 USDC' } })).body;
    expect([a.status, b.status]).toEqual(['pending_approval', 'pending_approval']);

    const session = await signIn(server, agent.platform_key, { 'x-forwarded-for': '10.99.0.1' });
    const listed = await consoleGet(server, '/console/drafts', session.cookie);
    expect(listed.status).toBe(200);
    expect(listed.text).toContain('Needs a yes');
    expect(listed.text).toContain('Pay 500 USDC');
    // A form without the CSRF token changes nothing.
    expect((await consolePost(server, `/console/drafts/${a.draftId}/approve`, {}, { cookie: session.cookie })).status).toBe(403);
    const approved = await consolePost(server, `/console/drafts/${a.draftId}/approve`, { _csrf: session.csrf }, { cookie: session.cookie });
    expect([approved.status, approved.location]).toEqual([303, '/console/drafts?done=approved']);
    const rejected = await consolePost(server, `/console/drafts/${b.draftId}/reject`, { _csrf: session.csrf, reason: 'Too much' }, { cookie: session.cookie });
    expect(rejected.status).toBe(303);
    expect((await server.request('GET', `/v0/drafts/${a.draftId}`, { key })).body.status).toBe('sent');
    expect((await server.request('GET', `/v0/drafts/${b.draftId}`, { key })).body).toMatchObject({ status: 'rejected', decision: { reason: 'Too much' } });
    expect((await consoleGet(server, '/console/drafts', session.cookie)).text).toContain('Nothing waits for approval.');
  });
});
