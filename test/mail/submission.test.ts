// SMTP submission as mail clients use it: Python's smtplib (STARTTLS on the submission port, AUTH with the
// identity key) and nodemailer (TLS from the first byte), against a certificate made here with openssl.
// What they submit must be what POST /v0/messages/send would have sent: in the sender's mail as sent,
// threaded as a reply when it is one, delivered to the recipient's inbox, sent once.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import nodemailer from 'nodemailer';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { eventually, smtpClient } from './mail-support.js';

const run = promisify(execFile);
let server: TestServer;
let certDir: string;
let ca: string;

beforeAll(async () => {
  certDir = mkdtempSync(join(tmpdir(), 'agentgate-submission-'));
  await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', join(certDir, 'key.pem'), '-out', join(certDir, 'cert.pem')]);
  ca = readFileSync(join(certDir, 'cert.pem'), 'utf8');
  server = await startTestServer({
    SMTP_SUBMISSION_PORT: '0', SMTP_SUBMISSIONS_PORT: '0',
    SMTP_TLS_CERT_FILE: join(certDir, 'cert.pem'), SMTP_TLS_KEY_FILE: join(certDir, 'key.pem'),
    // Each test's identities send a few; the last test spends one identity's limit.
    MAIL_SEND_LIMIT_PER_IDENTITY: '4',
  });
});
afterAll(async () => {
  await server?.close();
  rmSync(certDir, { recursive: true, force: true });
});

/** Python's smtplib, as a script would use it: STARTTLS, login, send_message. Prints the refusal, if any. */
async function pythonSend(options: { user: string; password: string; from: string; to: string[]; subject: string; body: string; inReplyTo?: string; messageId?: string; starttls?: boolean }) {
  const script = `
import json, os, smtplib, ssl, sys
from email.message import EmailMessage
o = json.loads(os.environ['MAIL'])
m = EmailMessage()
m['From'] = o['from']; m['To'] = ', '.join(o['to']); m['Subject'] = o['subject']
if o.get('inReplyTo'): m['In-Reply-To'] = o['inReplyTo']; m['References'] = o['inReplyTo']
if o.get('messageId'): m['Message-ID'] = o['messageId']
m.set_content(o['body'])
try:
    with smtplib.SMTP('127.0.0.1', int(os.environ['PORT']), timeout=20) as s:
        if o.get('starttls', True):
            s.starttls(context=ssl.create_default_context(cafile=os.environ['CA']))
        s.login(o['user'], o['password'])
        refused = s.send_message(m)
        print(json.dumps({'ok': True, 'refused': list(refused)}))
except smtplib.SMTPResponseException as e:
    print(json.dumps({'ok': False, 'code': e.smtp_code, 'error': e.smtp_error.decode()}))
except smtplib.SMTPRecipientsRefused as e:
    print(json.dumps({'ok': False, 'code': 0, 'error': str(e)}))
`;
  const { stdout } = await run('python3', ['-c', script], {
    env: { ...process.env, PORT: String(server.submissionPort), CA: join(certDir, 'cert.pem'), MAIL: JSON.stringify(options) },
  });
  return JSON.parse(stdout.trim()) as { ok: boolean; code?: number; error?: string };
}

/** One message as GET /v0/messages/{id} shows it (with cc, bcc, inReplyTo). */
async function single(key: string, messageId: string) {
  const res = await server.request('GET', `/v0/messages/${encodeURIComponent(messageId)}`, { key });
  expect(res.status).toBe(200);
  return res.body;
}

async function messages(key: string, query = '') {
  const res = await server.request('GET', `/v0/messages${query}`, { key });
  expect(res.status).toBe(200);
  return res.body.messages as any[];
}

describe('SMTP submission', () => {
  it('smtplib with STARTTLS and AUTH sends a reply that arrives threaded, and is in the sender\'s mail as sent', async () => {
    const a = await signUp(server);
    const b = await signUp(server);
    // B writes to A first (over the API), so A has something to answer.
    const first = await server.request('POST', '/v0/messages/send', { key: b.identity.rawKey, body: { to: [a.identity.emailAddress], subject: 'Lunch?', text: 'Thursday?' } });
    expect(first.status).toBe(201);
    let original: any;
    await eventually(async () => {
      original = (await messages(a.identity.rawKey)).find((m) => m.subject === 'Lunch?');
      expect(original).toBeDefined();
    });

    const sent = await pythonSend({ user: a.identity.emailAddress, password: a.identity.rawKey, from: a.identity.emailAddress, to: [b.identity.emailAddress], subject: 'Re: Lunch?', body: 'Thursday works.', inReplyTo: original.messageId, messageId: '<reply-1@client.example>' });
    expect(sent).toEqual({ ok: true, refused: [] });

    // The sender's copy: labelled sent, in the original's thread.
    const mine = (await messages(a.identity.rawKey, '?labels=sent')).find((m) => m.subject === 'Re: Lunch?');
    expect(await single(a.identity.rawKey, mine.messageId)).toMatchObject({ threadId: original.threadId, labels: expect.arrayContaining(['sent']), inReplyTo: original.messageId });
    // The recipient's: in B's own thread of the conversation.
    await eventually(async () => {
      const got = (await messages(b.identity.rawKey)).find((m) => m.subject === 'Re: Lunch?');
      const bThread = (await messages(b.identity.rawKey, '?labels=sent')).find((m) => m.subject === 'Lunch?').threadId;
      expect(got).toMatchObject({ from: [a.identity.emailAddress], threadId: bThread, text: expect.stringContaining('Thursday works.') });
    });

    // The client sends it again (its connection dropped before our answer): sent once.
    expect(await pythonSend({ user: a.identity.emailAddress, password: a.identity.rawKey, from: a.identity.emailAddress, to: [b.identity.emailAddress], subject: 'Re: Lunch?', body: 'Thursday works.', inReplyTo: original.messageId, messageId: '<reply-1@client.example>' })).toEqual({ ok: true, refused: [] });
    await new Promise((r) => setTimeout(r, 500));
    expect((await messages(a.identity.rawKey, '?labels=sent')).filter((m) => m.subject === 'Re: Lunch?')).toHaveLength(1);
  });

  it('nodemailer over TLS from the first byte, with Bcc from the envelope alone', async () => {
    const a = await signUp(server);
    const b = await signUp(server);
    const c = await signUp(server);
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: server.submissionTlsPort, secure: true, tls: { ca }, auth: { user: a.identity.emailAddress, pass: a.identity.rawKey } });
    try {
      await transport.sendMail({ from: a.identity.emailAddress, to: b.identity.emailAddress, bcc: c.identity.emailAddress, subject: 'Quarterly', text: 'Numbers attached.', attachments: [{ filename: 'q.csv', content: 'a,b\n1,2\n' }] });
    } finally {
      transport.close();
    }
    const mine = (await messages(a.identity.rawKey, '?labels=sent')).find((m) => m.subject === 'Quarterly');
    expect(await single(a.identity.rawKey, mine.messageId)).toMatchObject({ to: [b.identity.emailAddress], bcc: [c.identity.emailAddress], attachments: [expect.objectContaining({ filename: 'q.csv' })] });
    for (const who of [b, c]) {
      await eventually(async () => expect((await messages(who.identity.rawKey)).find((m) => m.subject === 'Quarterly')).toMatchObject({ to: [b.identity.emailAddress] }));
    }
  });

  it('refuses a wrong key, a key of another mailbox, another identity\'s From, and a login before STARTTLS', async () => {
    const a = await signUp(server);
    const b = await signUp(server);
    const base = { from: a.identity.emailAddress, to: [b.identity.emailAddress], subject: 's', body: 'b' };
    expect(await pythonSend({ ...base, user: a.identity.emailAddress, password: 'idk_wrong' })).toMatchObject({ ok: false, code: 535 });
    // B's key with A's mailbox as the user name.
    expect(await pythonSend({ ...base, user: a.identity.emailAddress, password: b.identity.rawKey })).toMatchObject({ ok: false, code: 535 });
    // A's key, sending as B.
    expect(await pythonSend({ ...base, from: b.identity.emailAddress, user: a.identity.emailAddress, password: a.identity.rawKey })).toMatchObject({ ok: false, code: 553 });
    // The password would cross in the clear: refused before it is sent.
    const clear = await pythonSend({ ...base, user: a.identity.emailAddress, password: a.identity.rawKey, starttls: false });
    expect(clear).toMatchObject({ ok: false, code: 538, error: expect.stringMatching(/STARTTLS/) });
    expect((await messages(a.identity.rawKey, '?labels=sent'))).toHaveLength(0);

    // The inbound listener (port 25's) takes no AUTH at all: it is not a way to send.
    const inbound = smtpClient(server);
    await expect(inbound.sendMail({ from: a.identity.emailAddress, to: 'x@example.org', subject: 's', text: 't' })).rejects.toMatchObject({ responseCode: 550 });
    inbound.close();
  });

  it('counts submitted mail against the same send limit as the API: over it, a temporary refusal (452) that names it', async () => {
    const a = await signUp(server);
    const b = await signUp(server);
    for (let i = 0; i < 4; i++) {
      expect((await server.request('POST', '/v0/messages/send', { key: a.identity.rawKey, body: { to: [b.identity.emailAddress], subject: `api ${i}`, text: 't' } })).status).toBe(201);
    }
    const over = await pythonSend({ user: a.identity.emailAddress, password: a.identity.rawKey, from: a.identity.emailAddress, to: [b.identity.emailAddress], subject: 'one too many', body: 'b' });
    expect(over).toMatchObject({ ok: false, code: 452, error: expect.stringMatching(/has sent 4 messages in this window, its limit; retry in \d+ s/) });
    const api = await server.request('POST', '/v0/messages/send', { key: a.identity.rawKey, body: { to: [b.identity.emailAddress], subject: 'api over', text: 't' } });
    expect([api.status, api.body.error, Number(api.headers.get('retry-after')) > 0]).toEqual([429, 'mail_rate_limited', true]);
    // Another identity of another org is not affected.
    expect((await server.request('POST', '/v0/messages/send', { key: b.identity.rawKey, body: { to: [a.identity.emailAddress], subject: 'b is fine', text: 't' } })).status).toBe(201);
  });
});
