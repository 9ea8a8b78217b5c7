// Message-list pages are kept in memory under their inbox's change token (server/mail/page-cache.ts):
// a kept page must never hide a change, whichever process made it.
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { smtpClient } from './mail-support.js';
import { PageCache } from '../../server/mail/page-cache.js';

describe('message lists across two backends on one database', () => {
  let server: TestServer;
  let other: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ TRUST_PROXY: 'true' });
    other = await startTestServer({ TRUST_PROXY: 'true', MONGODB_DB: server.config.MONGODB_DB, MASTER_KEY: server.config.MASTER_KEY.toString('hex') });
  });
  afterAll(async () => {
    await other.close();
    await server.close();
  });

  const list = (on: TestServer, key: string, query = 'limit=50') => on.request('GET', `/v0/messages?${query}`, { key });

  it('shows mail stored and labels edited by the other backend on the very next read', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    expect((await list(server, key)).body.count).toBe(0); // kept, under the inbox's current token

    // Stored by the other backend's SMTP listener: accepted means stored and the token replaced.
    await smtpClient(other).sendMail({ from: 'ada@example.org', to: agent.identity.emailAddress, subject: 'First', text: 'one' });
    const first = await list(server, key);
    expect(first.body.messages.map((m: any) => m.subject)).toEqual(['First']);
    expect((await list(server, key, 'limit=50&labels=unread')).body.count).toBe(1);

    const messageId = encodeURIComponent(first.body.messages[0].messageId);
    const patched = await other.request('PATCH', `/v0/messages/${messageId}`, { key, body: { addLabels: ['read'], removeLabels: ['unread'] } });
    expect(patched.status).toBe(200);
    expect((await list(server, key)).body.messages[0].labels).toEqual(['received', 'read']);
    expect((await list(server, key, 'limit=50&labels=unread')).body.count).toBe(0);
  });

  it('shows a message sent by the same backend on the next read', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    expect((await list(server, key)).body.count).toBe(0);
    const sent = await server.request('POST', '/v0/messages/send', { key, body: { to: ['someone@example.org'], subject: 'Out', text: 'hi' } });
    expect(sent.status).toBe(201);
    expect((await list(server, key)).body.messages.map((m: any) => m.subject)).toEqual(['Out']);
  });

  it('keeps pages of different inboxes and queries apart', async () => {
    const [a, b] = [await signUp(server), await signUp(server)];
    await smtpClient(server).sendMail({ from: 'ada@example.org', to: a.identity.emailAddress, subject: 'For a', text: 'x' });
    expect((await list(server, a.identity.rawKey)).body.count).toBe(1);
    expect((await list(server, b.identity.rawKey)).body.count).toBe(0);
    expect((await list(server, a.identity.rawKey, 'limit=50&labels=important')).body.count).toBe(0);
  });
});

describe('PageCache', () => {
  const page = (id: string) => ({ id });
  const bytes = () => 100;

  it('serves a page only under the token it was read with, and shares one load among concurrent callers', async () => {
    const cache = new PageCache<{ id: string }>({ maxPages: 10, maxBytes: 10_000, maxPageBytes: 1000, maxAgeMs: 60_000 });
    let loads = 0;
    const load = async () => page(`load-${++loads}`);
    const together = await Promise.all(Array.from({ length: 10 }, () => cache.getOrLoad('k', 't1', load, bytes)));
    expect(new Set(together.map((p) => p.id))).toEqual(new Set(['load-1']));
    expect((await cache.getOrLoad('k', 't1', load, bytes)).id).toBe('load-1');
    expect((await cache.getOrLoad('k', 't2', load, bytes)).id).toBe('load-2'); // the inbox changed
    expect((await cache.getOrLoad('k', 't1', load, bytes)).id).toBe('load-3'); // an old token never brings back an old page
  });

  it('stays within its page and byte bounds, keeps no oversized page, and lets pages age out', async () => {
    let now = 0;
    const cache = new PageCache<{ id: string }>({ maxPages: 5, maxBytes: 300, maxPageBytes: 150, maxAgeMs: 1000, now: () => now });
    for (let i = 0; i < 10; i++) cache.set(`k${i}`, 't', page(`p${i}`), 100);
    expect(cache.size).toEqual({ pages: 3, bytes: 300 });
    expect(cache.get('k9', 't')).toEqual(page('p9'));
    expect(cache.get('k0', 't')).toBeUndefined();
    cache.set('big', 't', page('big'), 151);
    expect(cache.get('big', 't')).toBeUndefined();
    now += 1000;
    expect(cache.get('k9', 't')).toBeUndefined();
    expect(cache.size).toEqual({ pages: 2, bytes: 200 });
  });
});
