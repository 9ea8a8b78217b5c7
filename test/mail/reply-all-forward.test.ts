// Reply-all and forward over real SMTP between identities on one server: who receives what, with which
// threading headers, and a forward carrying the original's attachments byte for byte as a new thread.
import { randomBytes } from 'node:crypto';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { eventually, smtpClient } from './mail-support.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

const enc = encodeURIComponent;

async function arrived(key: string, subject: string) {
  let found: any;
  await eventually(async () => {
    const list = await server.request('GET', '/v0/messages?labels=received', { key });
    found = list.body.messages.find((m: any) => m.subject === subject);
    expect(found).toBeDefined();
  });
  return (await server.request('GET', `/v0/messages/${enc(found.messageId)}`, { key })).body;
}

test('reply-all goes to the sender and, on Cc, everyone else but ourselves; every copy threads under the original', async () => {
  const [alice, bob, carol] = [await signUp(server), await signUp(server), await signUp(server)];
  const human = smtpClient(server);
  const original = await human.sendMail({
    from: 'Ada <ada@example.org>', to: [alice.identity.emailAddress, bob.identity.emailAddress], cc: [carol.identity.emailAddress],
    subject: 'Offsite planning', text: 'Where shall we meet?',
  });
  human.close();
  const aliceCopy = await arrived(alice.identity.rawKey, 'Offsite planning');
  const bobOriginal = await arrived(bob.identity.rawKey, 'Offsite planning');

  const reply = await server.request('POST', `/v0/messages/${enc(original.messageId)}/reply`, {
    key: alice.identity.rawKey, body: { text: 'Lisbon?', replyAll: true },
  });
  expect(reply.status).toBe(201);
  expect(reply.body).toMatchObject({ to: ['ada@example.org'], subject: 'Re: Offsite planning', threadId: aliceCopy.threadId });
  const sent = (await server.request('GET', `/v0/messages/${enc(reply.body.messageId)}`, { key: alice.identity.rawKey })).body;
  expect(sent.cc).toEqual([bob.identity.emailAddress, carol.identity.emailAddress]);
  expect(sent.delivery.recipients.map((r: any) => r.address).sort()).toEqual(['ada@example.org', bob.identity.emailAddress, carol.identity.emailAddress].sort());

  // Bob's copy of the reply joins Bob's thread of the original, with the threading headers set.
  const bobReply = await arrived(bob.identity.rawKey, 'Re: Offsite planning');
  expect(bobReply).toMatchObject({ messageId: reply.body.messageId, threadId: bobOriginal.threadId, inReplyTo: original.messageId, references: [original.messageId] });
  expect(bobReply.cc).toEqual([bob.identity.emailAddress, carol.identity.emailAddress]);
  const carolReply = await arrived(carol.identity.rawKey, 'Re: Offsite planning');
  expect(carolReply.inReplyTo).toBe(original.messageId);

  // A plain reply still goes to the sender only.
  const plain = await server.request('POST', `/v0/messages/${enc(original.messageId)}/reply`, { key: bob.identity.rawKey, body: { text: 'Fine by me' } });
  const plainSent = (await server.request('GET', `/v0/messages/${enc(plain.body.messageId)}`, { key: bob.identity.rawKey })).body;
  expect(plainSent).toMatchObject({ to: ['ada@example.org'], cc: [] });
});

test('forward carries the note, the original and its attachments to new recipients, as a new thread', async () => {
  const [alice, dave] = [await signUp(server), await signUp(server)];
  const invoice = randomBytes(50_000);
  const human = smtpClient(server);
  const original = await human.sendMail({
    from: 'billing@example.org', to: alice.identity.emailAddress, subject: 'Invoice 7', text: 'Invoice 7 is attached.',
    attachments: [{ filename: 'invoice-7.pdf', content: invoice, contentType: 'application/pdf' }],
  });
  human.close();
  const aliceCopy = await arrived(alice.identity.rawKey, 'Invoice 7');
  const extra = Buffer.from('approved by alice\n');

  const forwarded = await server.request('POST', `/v0/messages/${enc(original.messageId)}/forward`, {
    key: alice.identity.rawKey,
    body: { to: [dave.identity.emailAddress], text: 'Dave, please pay this one.', attachments: [{ filename: 'approval.txt', contentType: 'text/plain', content: extra.toString('base64') }] },
  });
  expect(forwarded.status).toBe(201);
  expect(forwarded.body).toMatchObject({ subject: 'Fwd: Invoice 7', to: [dave.identity.emailAddress] });
  expect(forwarded.body.threadId).not.toBe(aliceCopy.threadId);
  expect(forwarded.body.attachments.map((a: any) => a.filename)).toEqual(['invoice-7.pdf', 'approval.txt']);

  const daveCopy = await arrived(dave.identity.rawKey, 'Fwd: Invoice 7');
  expect(daveCopy.inReplyTo).toBeUndefined();
  expect(daveCopy.references).toBeUndefined();
  expect(daveCopy.text).toContain('Dave, please pay this one.');
  expect(daveCopy.text).toContain('---------- Forwarded message ---------');
  expect(daveCopy.text).toContain('From: billing@example.org');
  expect(daveCopy.text).toContain('Invoice 7 is attached.');
  const files = new Map<string, Buffer>();
  for (const a of daveCopy.attachments) {
    const res = await fetch(`${server.url}/v0/messages/${enc(daveCopy.messageId)}/attachments/${a.attachmentId}`, { headers: { authorization: `Bearer ${dave.identity.rawKey}` } });
    files.set(a.filename, Buffer.from(await res.arrayBuffer()));
  }
  expect(files.get('invoice-7.pdf')!.equals(invoice)).toBe(true);
  expect(files.get('approval.txt')!.equals(extra)).toBe(true);

  // Another identity cannot forward Alice's message: it is not in its inbox.
  const stranger = await server.request('POST', `/v0/messages/${enc(original.messageId)}/forward`, { key: dave.identity.rawKey, body: { to: ['x@example.org'] } });
  expect(stranger.status).toBe(404);
  const noRecipient = await server.request('POST', `/v0/messages/${enc(original.messageId)}/forward`, { key: alice.identity.rawKey, body: { to: [] } });
  expect(noRecipient.status).toBe(400);
});
