import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { eventually, smtpClient } from './mail-support.js';
import { sortKeyOf } from '../../server/platform/pagination.js';

/** A stand-in for the outbound relay: a real SMTP server that records what it is handed. */
async function startRelay(options: { deferFirst?: boolean } = {}) {
  const received: Array<{ from: string; to: string[]; raw: string }> = [];
  let deferred = false;
  const relay = new SMTPServer({
    authOptional: true, hideSTARTTLS: true, logger: false, disabledCommands: ['AUTH'],
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (options.deferFirst && !deferred) {
          deferred = true;
          return callback(Object.assign(new Error('Try again later'), { responseCode: 451 }));
        }
        received.push({ from: (session.envelope.mailFrom as { address: string }).address, to: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks).toString() });
        callback(null);
      });
    },
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  return { url: `smtp://127.0.0.1:${(relay.server.address() as AddressInfo).port}`, received, close: () => new Promise<void>((r) => relay.close(() => r())) };
}

describe('pagination', () => {
  let server: TestServer;
  beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
  afterAll(async () => { await server.close(); });

  it('walks 250 messages sharing timestamps without skips or repeats, even when mail arrives between pages', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const inbox = agent.identity.emailAddress;
    // 250 messages over only 5 distinct milliseconds, as a burst of deliveries would store them.
    const base = Date.now() - 60_000;
    const docs = Array.from({ length: 250 }, (_, i) => ({
      _id: `msg_seed${String(i).padStart(4, '0')}${'x'.repeat(12)}`, messageId: `<seed-${i}@example.org>`, identityId: agent.identity.identityId,
      inboxId: inbox, threadId: `thd_${i.toString(16).padStart(16, '0')}`, direction: 'received', from: ['a@example.org'], to: [inbox],
      cc: [], bcc: [], replyTo: [], subject: `seed ${i}`, text: 't', extractedText: 't', references: [],
      labels: i % 2 ? ['received', 'unread'] : ['received', 'read'], createdAt: new Date(base + (i % 5)),
    })).map((d) => ({ ...d, sortKey: sortKeyOf(d.createdAt, d._id) }));
    await server.app.mail.messages.insertMany(docs);
    await server.app.mail.assignMissingPositions(); // as an upgrade does for messages stored before positions

    const walk = async (query: string, limit: number, midway?: () => Promise<void>) => {
      const seen: string[] = [];
      let token: string | undefined;
      let pages = 0;
      do {
        const res = await server.request('GET', `/v0/messages?limit=${limit}${query}${token ? `&pageToken=${token}` : ''}`, { key });
        expect(res.status).toBe(200);
        expect(res.body.count).toBe(res.body.messages.length);
        seen.push(...res.body.messages.map((m: any) => m.messageId));
        token = res.body.nextPageToken;
        if (pages++ === 0 && midway) await midway();
      } while (token);
      return seen;
    };

    const expected = [...docs].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a._id < b._id ? 1 : -1)).map((d) => d.messageId);
    let arrived = '';
    const all = await walk('', 7, async () => {
      const client = smtpClient(server);
      arrived = (await client.sendMail({ from: 'late@example.org', to: inbox, subject: 'late', text: 'between pages' })).messageId;
      client.close();
    });
    expect(all).toEqual(expected); // the late message is newer than the cursor, so it is not on later pages
    expect(all).not.toContain(arrived);
    expect((await walk('', 100)).slice(1)).toEqual(expected);

    const unread = await walk('&labels=unread,received', 50);
    expect(unread).toEqual([arrived, ...expected.filter((id) => Number(/seed-(\d+)/.exec(id)![1]) % 2 === 1)]);
    expect(await walk('&labels=unread,read', 50)).toEqual([]);

    const first = await server.request('GET', '/v0/messages?limit=100', { key });
    const sameToken = await server.request('GET', `/v0/messages?limit=100&pageToken=${first.body.nextPageToken}`, { key });
    // The token is the inbox position the next page starts below.
    expect(Buffer.from(first.body.nextPageToken, 'base64url').toString()).toMatch(/^#\d+$/);
    expect((await server.request('GET', '/v0/messages?limit=5&pageToken=bm90LWEtdG9rZW4', { key })).body.error).toBe('invalid_page_token');
    expect(sameToken.body.messages[0].messageId).toBe(all[99]);
  });
});

describe('outbound mail through the relay', () => {
  it('hands other domains to SMTP_RELAY_URL, DKIM-signed, Bcc only in the envelope; a 451 is retried', async () => {
    const relay = await startRelay({ deferFirst: true });
    const dir = mkdtempSync(join(tmpdir(), 'dkim-'));
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
    writeFileSync(join(dir, 'dkim.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const server = await startTestServer({ TRUST_PROXY: 'true', SMTP_RELAY_URL: relay.url, DKIM_PRIVATE_KEY_FILE: join(dir, 'dkim.pem'), DKIM_SELECTOR: 'mail2026' });
    try {
      const agent = await signUp(server);
      const sent = await server.request('POST', '/v0/messages/send', {
        key: agent.identity.rawKey,
        body: { to: ['ada@example.org'], cc: ['bob@example.net'], bcc: ['secret@example.com'], subject: 'Über straße', text: 'Hello from the agent', html: '<b>Hello</b>' },
      });
      expect(sent.status).toBe(201);
      await eventually(async () => expect(relay.received).toHaveLength(1));
      const [mail] = relay.received;
      expect(mail!.from).toBe(agent.identity.emailAddress);
      expect(mail!.to.sort()).toEqual(['ada@example.org', 'bob@example.net', 'secret@example.com']);
      const headerBlock = mail!.raw.slice(0, mail!.raw.search(/\r?\n\r?\n/));
      expect(headerBlock).toMatch(/^DKIM-Signature: .*d=agents\.test;.*s=mail2026;/ms);
      expect(headerBlock).toContain(`Message-ID: ${sent.body.messageId}`);
      expect(headerBlock).toMatch(/^To: ada@example\.org$/m);
      expect(headerBlock).toMatch(/^Cc: bob@example\.net$/m);
      expect(headerBlock).toMatch(new RegExp(`^From: .*<${agent.identity.emailAddress}>$`, 'm'));
      expect(mail!.raw).not.toMatch(/^Bcc:/im);
      expect(mail!.raw).not.toContain('secret@example.com');
      await eventually(async () => {
        const own = await server.request('GET', `/v0/messages/${encodeURIComponent(sent.body.messageId)}`, { key: agent.identity.rawKey });
        expect(own.body.delivery).toMatchObject({ status: 'delivered', attempts: 2 });
      });
    } finally {
      await server.close();
      await relay.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
