// One send per intent across real OS processes: two `agentgate serve` processes on one database race on
// one Idempotency-Key and on one scheduled send (each process runs its own job worker), and the process
// that scheduled the send is killed before it is due.
import { startTestServer, type TestServer } from '../support/server.js';
import { processEnv, spawnAgentgate, type AgentgateProcess } from '../support/processes.js';
import { signUp } from '../support/agents.js';
import { sentIdOf } from '../../server/mail/drafts.js';
import { eventually } from './mail-support.js';

let server: TestServer;
let a: AgentgateProcess;
let b: AgentgateProcess;
beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true', JOBS_PROCESS_EVERY_MS: '200' });
  [a, b] = await Promise.all([spawnAgentgate('serve', processEnv(server.config)), spawnAgentgate('serve', processEnv(server.config))]);
}, 120_000);
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await server?.close();
});

const post = (base: string, path: string, key: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(base + path, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
    .then(async (res) => ({ status: res.status, headers: res.headers, body: await res.json() as any }));

it('two serve processes racing on one Idempotency-Key send once and answer alike', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const body = { to: ['bob@example.org'], subject: 'Across processes', text: 'Once.' };
  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => post((i % 2 ? b : a).url!, '/v0/messages/send', key, body, { 'idempotency-key': 'cross-process-1' })));
  expect(answers.map((r) => r.status)).toEqual(Array(10).fill(201));
  expect(new Set(answers.map((r) => r.body.messageId)).size).toBe(1);
  const sent = await server.app.mail.messages.find({ inboxId: agent.identity.emailAddress, direction: 'sent' }).lean();
  expect(sent).toHaveLength(1);
});

it('a scheduled send goes out once with two processes\' workers on it, though the process that scheduled it was killed', async () => {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const sendAt = new Date(Date.now() + 4_000).toISOString();
  const draft = (await post(a.url!, '/v0/drafts', key, { to: ['bob@example.org'], subject: 'Scheduled across processes', text: 'Once.', sendAt })).body;
  expect((await post(a.url!, `/v0/drafts/${draft.draftId}/send`, key, {})).body.status).toBe('scheduled');
  await a.kill(); // no shutdown code runs: the job is in the database, b and the test server's workers remain
  await eventually(async () => {
    const sent = await server.app.mail.messages.find({ inboxId: agent.identity.emailAddress, direction: 'sent' }).lean();
    expect(sent.map((m) => m._id)).toEqual([sentIdOf(draft.draftId)]);
  }, 30_000);
  // Every worker had its chance at the job (and at its retries): still one message.
  await new Promise((r) => setTimeout(r, 2_000));
  expect(await server.app.mail.messages.countDocuments({ inboxId: agent.identity.emailAddress, direction: 'sent' })).toBe(1);
  const view = await fetch(`${b.url}/v0/drafts/${draft.draftId}`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json()) as any;
  expect(view.status).toBe('sent');
}, 60_000);
