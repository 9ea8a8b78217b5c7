// The event tap agentgate dev prints from: one line per mail received, mail delivery and activity-log
// entry (payments, webhooks, chat), each with its category.
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import type { ServiceEvent } from '../../server/platform/events.js';

let server: TestServer;
const seen: ServiceEvent[] = [];

beforeAll(async () => {
  server = await startTestServer();
  server.app.events.on((event) => seen.push(event));
});
afterAll(async () => { await server?.close(); });

test('a mail between two agents shows as sent, delivered and received', async () => {
  const [alice, bob] = [await signUp(server), await signUp(server)];
  const sent = await server.request('POST', '/v0/messages/send', {
    key: alice.identity.rawKey, body: { to: [bob.identity.emailAddress], subject: 'Quarterly numbers', text: 'attached' },
  });
  expect(sent.status).toBe(201);
  const deadline = Date.now() + 20_000;
  const lines = () => seen.filter((e) => e.category === 'mail').map((e) => e.line);
  // The recipient's "received" can come before the sender's delivery job records "delivered" (both follow
  // the same SMTP exchange): wait for both.
  const both = () => lines().some((l) => l.includes('received "Quarterly numbers"')) && lines().some((l) => l.startsWith('mail: delivery delivered'));
  while (!both() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(lines()).toEqual(expect.arrayContaining([
    expect.stringMatching(/^mail: .*Quarterly numbers/),
    expect.stringMatching(new RegExp(`^mail: delivery delivered \\(attempt 1\\) to ${bob.identity.emailAddress} delivered`)),
    `mail: ${bob.identity.emailAddress} received "Quarterly numbers" from ${alice.identity.emailAddress}`,
  ]));
});

test('a listener that throws does not fail the work that emitted', async () => {
  const off = server.app.events.on(() => { throw new Error('listener bug'); });
  try {
    const agent = await signUp(server);
    expect(agent.identity.rawKey).toMatch(/^agi_/);
  } finally {
    off();
  }
});
