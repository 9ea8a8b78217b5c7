// The README's headline loop in dev: an agent mails a person outside, the local mail catcher receives it
// over SMTP, the person answers from /dev/mail as that address, and the answer lands in the agent's
// inbox in the same thread.
import { testConfig } from '../support/server.js';
import { startServer, type RunningServer } from '../../server/server.js';
import { devExtension } from '../../server/dev/routes.js';
import { MailCatcher } from '../../server/dev/mail-catcher.js';

let catcher: MailCatcher;
let server: RunningServer;

beforeAll(async () => {
  catcher = await new MailCatcher().start();
  // As `agentgate dev` runs it: the catcher's people write from domains without DNS records, admitted.
  server = await startServer(await testConfig({ SMTP_RELAY_URL: catcher.relayUrl, MAIL_ADMIT_UNVERIFIED: 'true' }), { extension: devExtension({ mailCatcher: catcher }) });
});
afterAll(async () => {
  await server?.app.db.dropDatabase().catch(() => {});
  await server?.close();
  await catcher?.stop();
});

async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('an agent mails a person outside, the person answers from /dev/mail, the answer joins the thread', async () => {
  const signup = await (await fetch(`${server.url}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json() as { identity: { rawKey: string; emailAddress: string } };
  const agent = { identity: signup.identity };
  const key = { authorization: `Bearer ${agent.identity.rawKey}`, 'content-type': 'application/json' };
  const sent = await fetch(`${server.url}/v0/messages/send`, { method: 'POST', headers: key, body: JSON.stringify({ to: ['person@example.org'], subject: 'Invoice 42', text: 'Please confirm' }) });
  expect(sent.status).toBe(201);
  const original = await sent.json() as { messageId: string; threadId: string };

  const caught = await eventually(async () => catcher.list().find((m) => m.subject === 'Invoice 42'));
  expect(caught).toMatchObject({ from: agent.identity.emailAddress, to: ['person@example.org'], text: expect.stringContaining('Please confirm') });
  const page = await (await fetch(`${server.url}/dev/mail`)).text();
  expect(page).toContain('Invoice 42');
  expect(page).toContain(`/dev/mail/${caught.id}/reply`);

  const post = (fields: Record<string, string>, origin = server.url) => fetch(`${server.url}/dev/mail/${caught.id}/reply`, {
    method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded', origin }, body: new URLSearchParams(fields),
  });
  expect((await post({ as: 'person@example.org', text: 'x' }, 'https://evil.example')).status).toBe(403);
  expect((await post({ as: 'someone@else.example', text: 'x' })).status).toBe(400);
  expect((await post({ as: 'person@example.org', text: 'Confirmed, thanks' })).status).toBe(302);

  const reply = await eventually(async () => {
    const list = await (await fetch(`${server.url}/v0/messages?limit=10`, { headers: key })).json() as { messages: Array<{ subject: string; threadId: string; from: string }> };
    return list.messages.find((m) => m.subject === 'Re: Invoice 42');
  });
  expect(reply).toMatchObject({ threadId: original.threadId });
  expect(JSON.stringify(reply.from)).toContain('person@example.org');
});

test('a catcher started on a port in use rejects with EADDRINUSE (agentgate dev names MAIL_CATCHER_PORT) instead of crashing', async () => {
  // SMTPServer re-emits the listen error on itself; unheard there it was an unhandled 'error' event.
  const second = new MailCatcher({ port: catcher.port });
  await expect(second.start()).rejects.toMatchObject({ code: 'EADDRINUSE' });
});
