// Attachments as an agent uses them: sent as base64 over the API, carried over real SMTP to another
// identity's inbox, stored in GridFS on the embedded engine, listed on the message and downloaded byte for
// byte; inline images and forwarded messages (message/rfc822) from an outside mail program; the limits.
import { createHash, randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { eventually, smtpClient } from './mail-support.js';

const CAP = 2 * 1024 * 1024;
let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true', MAIL_MAX_ATTACHMENT_BYTES: String(CAP) }); });
afterAll(async () => { await server.close(); });

const enc = encodeURIComponent;
const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

async function download(key: string, messageId: string, attachmentId: string) {
  const res = await fetch(`${server.url}/v0/messages/${enc(messageId)}/attachments/${attachmentId}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

async function received(key: string, subject: string) {
  let found: any;
  await eventually(async () => {
    const list = await server.request('GET', '/v0/messages?labels=received', { key });
    found = list.body.messages.find((m: any) => m.subject === subject);
    expect(found).toBeDefined();
  });
  return found;
}

describe('attachments', () => {
  it('travel from one identity to another over SMTP and download byte for byte; only their inboxes can read them', async () => {
    const sender = await signUp(server);
    const recipient = await signUp(server);
    const stranger = await signUp(server);
    const pdf = randomBytes(1_500_000); // large enough that the sent message's bytes go to GridFS too
    const notes = Buffer.from('naïve café notes\n', 'utf8');
    const sent = await server.request('POST', '/v0/messages/send', {
      key: sender.identity.rawKey,
      body: {
        to: [recipient.identity.emailAddress], subject: 'Contract and notes', text: 'Both files attached.',
        attachments: [
          { filename: 'contract "final".pdf', contentType: 'application/pdf', content: pdf.toString('base64') },
          // Line-wrapped base64, as `base64` writes it.
          { filename: 'Notizen-ü.txt', contentType: 'text/plain', content: notes.toString('base64').replace(/(.{8})/g, '$1\n') },
        ],
      },
    });
    expect(sent.status).toBe(201);
    expect(sent.body.attachments).toEqual([
      { attachmentId: expect.stringMatching(/^att_[0-9a-f]{24}$/), filename: 'contract "final".pdf', contentType: 'application/pdf', size: pdf.length },
      { attachmentId: expect.stringMatching(/^att_[0-9a-f]{24}$/), filename: 'Notizen-ü.txt', contentType: 'text/plain', size: notes.length },
    ]);

    const message = await received(recipient.identity.rawKey, 'Contract and notes');
    expect(message.attachments.map((a: any) => [a.filename, a.contentType, a.size])).toEqual([
      ['contract "final".pdf', 'application/pdf', pdf.length], ['Notizen-ü.txt', 'text/plain', notes.length],
    ]);
    // The list carries names and sizes, never the bytes.
    const list = await server.request('GET', '/v0/messages', { key: recipient.identity.rawKey });
    expect(list.text.length).toBeLessThan(10_000);

    const [pdfRef, notesRef] = message.attachments;
    const got = await download(recipient.identity.rawKey, message.messageId, pdfRef.attachmentId);
    expect(got.status).toBe(200);
    expect(sha(got.bytes)).toBe(sha(pdf));
    expect(got.headers.get('content-type')).toBe('application/pdf');
    expect(got.headers.get('content-length')).toBe(String(pdf.length));
    expect(got.headers.get('content-disposition')).toBe(`attachment; filename="contract _final_.pdf"; filename*=UTF-8''contract%20%22final%22.pdf`);
    const text = await download(recipient.identity.rawKey, message.messageId, notesRef.attachmentId);
    expect(text.bytes.equals(notes)).toBe(true);
    expect(text.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(text.headers.get('content-disposition')).toBe(`attachment; filename="Notizen-_.txt"; filename*=UTF-8''Notizen-%C3%BC.txt`);

    // The sender's copy lists and serves its own attachments.
    const own = await download(sender.identity.rawKey, sent.body.messageId, sent.body.attachments[0].attachmentId);
    expect(sha(own.bytes)).toBe(sha(pdf));

    // Another identity: the same message and attachment ids are simply not there.
    expect((await download(stranger.identity.rawKey, message.messageId, pdfRef.attachmentId)).status).toBe(404);
    // The recipient cannot reach the sender's copy by its attachment id either.
    expect((await download(recipient.identity.rawKey, message.messageId, sent.body.attachments[0].attachmentId)).status).toBe(404);
    const malformed = await server.request('GET', `/v0/messages/${enc(message.messageId)}/attachments/nope`, { key: recipient.identity.rawKey });
    expect(malformed.status).toBe(400);
  });

  it('keeps inline images (with their Content-ID) and a forwarded message/rfc822 as an .eml from an outside mail program', async () => {
    const agent = await signUp(server);
    const logo = randomBytes(2048);
    const forwarded = Buffer.from('From: boss@example.org\r\nTo: ada@example.org\r\nSubject: Budget 2027\r\nMessage-ID: <budget@example.org>\r\n\r\nThe budget is approved.\r\n');
    const human = smtpClient(server);
    await human.sendMail({
      from: 'ada@example.org', to: agent.identity.emailAddress, subject: 'See below', text: 'FYI, see the forwarded mail.',
      html: '<p>FYI</p><img src="cid:logo@example.org">',
      attachments: [
        { filename: 'logo.png', content: logo, contentType: 'image/png', cid: 'logo@example.org' },
        { filename: 'Budget 2027.eml', content: forwarded, contentType: 'message/rfc822' },
      ],
    });
    human.close();
    const message = await received(agent.identity.rawKey, 'See below');
    const single = await server.request('GET', `/v0/messages/${enc(message.messageId)}`, { key: agent.identity.rawKey });
    expect(single.body.html).toContain('src="cid:logo@example.org"');
    const inline = single.body.attachments.find((a: any) => a.contentType === 'image/png');
    expect(inline).toMatchObject({ filename: 'logo.png', size: logo.length, inline: true, contentId: 'logo@example.org' });
    expect((await download(agent.identity.rawKey, message.messageId, inline.attachmentId)).bytes.equals(logo)).toBe(true);
    const eml = single.body.attachments.find((a: any) => a.contentType === 'message/rfc822');
    expect(eml).toMatchObject({ filename: 'Budget 2027.eml' });
    const emlBytes = (await download(agent.identity.rawKey, message.messageId, eml.attachmentId)).bytes.toString();
    expect(emlBytes).toContain('Message-ID: <budget@example.org>');
    expect(emlBytes).toContain('The budget is approved.');
    // The forwarded text also stays readable in the body.
    expect(single.body.text).toContain('The budget is approved.');
  });

  it('refuses bad base64 and too many attachments with 400, and attachments over the cap with 413 naming it', async () => {
    const agent = await signUp(server);
    const send = (attachments: unknown[]) => server.request('POST', '/v0/messages/send', {
      key: agent.identity.rawKey, body: { to: ['someone@agents.test'], subject: 's', text: 't', attachments },
    });
    const bad = await send([{ filename: 'a.bin', content: 'not base64!' }]);
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('attachments.0.content');
    expect(bad.body.message).toContain('base64');
    const many = await send(Array.from({ length: 21 }, (_, i) => ({ filename: `f${i}.txt`, content: 'aGk=' })));
    expect(many.status).toBe(400);
    expect(many.body.message).toContain('at most 20 attachments');
    const big = await send([{ filename: 'a.bin', content: randomBytes(CAP / 2).toString('base64') }, { filename: 'b.bin', content: randomBytes(CAP / 2 + 1).toString('base64') }]);
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({ error: 'attachments_too_large', status: 413 });
    expect(big.body.message).toContain(`at most ${CAP} bytes`);
    const list = await server.request('GET', '/v0/messages?labels=sent', { key: agent.identity.rawKey });
    expect(list.body.count).toBe(0); // nothing was stored or sent
  });

  it('mail_send takes attachments and mail_get_attachment returns one over MCP', async () => {
    const agent = await signUp(server);
    const peer = await signUp(server);
    const mcp = new Client({ name: 'agent-under-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.identity.rawKey}` } } }));
    const call = async (name: string, args: Record<string, unknown>) => {
      const result = await mcp.callTool({ name, arguments: args });
      expect(result.isError ?? false).toBe(false);
      return JSON.parse((result.content as Array<{ text: string }>)[0]!.text);
    };
    const csv = Buffer.from('day,amount\n1,42\n');
    const sent = await call('mail_send', { to: [peer.identity.emailAddress], subject: 'CSV over MCP', text: 'attached', attachments: [{ filename: 'a.csv', contentType: 'text/csv', content: csv.toString('base64') }] });
    expect(sent.attachments).toHaveLength(1);
    const got = await call('mail_get_attachment', { messageId: sent.messageId, attachmentId: sent.attachments[0].attachmentId });
    expect(got).toMatchObject({ filename: 'a.csv', contentType: 'text/csv', size: csv.length });
    expect(Buffer.from(got.content, 'base64').equals(csv)).toBe(true);
    await mcp.close();
    const message = await received(peer.identity.rawKey, 'CSV over MCP');
    expect((await download(peer.identity.rawKey, message.messageId, message.attachments[0].attachmentId)).bytes.equals(csv)).toBe(true);
  });
});

describe('AttachmentStore after an upload that died halfway', () => {
  it('stores the bytes under an id of their own when only chunks of the id remain (no files document), and keeps a completed upload as it is', async () => {
    const store = server.app.mail.attachments;
    const id = `att_halfway${Date.now().toString(16)}`;
    // What a process killed mid-upload leaves: a chunk, and no files document (GridFS writes it last).
    await server.app.db.collection('mail_attachments.chunks').insertOne({ files_id: id as never, n: 0, data: Buffer.from('partial') } as never);
    const content = Buffer.from('the whole attachment');
    const ref = await store.put(id, { filename: 'a.txt', contentType: 'text/plain', content }, { inboxId: 'x@agents.test' });
    expect(ref.attachmentId).not.toBe(id);
    expect((await store.read(ref.attachmentId)).toString()).toBe('the whole attachment');
    // Stored again under the new id: the completed upload stands.
    const again = await store.put(ref.attachmentId, { filename: 'a.txt', contentType: 'text/plain', content }, { inboxId: 'x@agents.test' });
    expect(again.attachmentId).toBe(ref.attachmentId);
  });
});
