/**
 * The authenticated API under load: 50 concurrent keep-alive clients (autocannon) for a fixed time
 * against a running backend on the embedded database, on two routes an agent calls all day:
 *   - GET /v0/whoami with an identity key (key lookup, scopes, the self view);
 *   - GET /v0/messages?limit=50 on an inbox of 1,000 messages (key lookup plus one indexed page query).
 *
 *   npx tsx bench/api.ts      (BENCH_API_SECONDS=10 per route, BENCH_API_CONNECTIONS=50)
 *
 * Prints: api req/s at concurrency 50: whoami <a>, messages <b>, errors <e>
 * (errors: non-2xx answers and socket errors of both runs).
 */
import { randomBytes } from 'node:crypto';
// @ts-expect-error autocannon ships no type declarations; only its documented options and result fields are used.
import autocannon from 'autocannon';
import { loadConfig } from '../server/platform/config.js';
import { provideMongoServer } from '../server/dev/database/mongo-server.js';
import { freePort } from '../server/platform/net.js';
import { sortKeyOf } from '../server/platform/pagination.js';
import { claimId, listPosition } from '../server/mail/inbox-sequence.js';
import { startServer } from '../server/server.js';

const SECONDS = Number(process.env.BENCH_API_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_API_CONNECTIONS ?? 50);
const INBOX = 1_000;
const log = (line: string) => process.stdout.write(`${line}\n`);

async function main() {
  log('starting the embedded database and the backend ...');
  const mongo = await provideMongoServer({ log: (line) => log(`  ${line}`) });
  const port = await freePort();
  const server = await startServer(loadConfig({
    // An access line per request on stdout would bury the results (LOG_LEVEL=info to watch them).
    AGENTGATE_MODE: 'dev', HOST: '127.0.0.1', LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', PORT: String(port), BASE_URL: `http://127.0.0.1:${port}`,
    MAIL_DOMAIN: 'bench.test', DID_DOMAIN: `127.0.0.1%3A${port}`, SMTP_PORT: '0',
    MASTER_KEY: randomBytes(32).toString('hex'), MONGODB_URI: mongo.uri, MONGODB_DB: `bench_${randomBytes(4).toString('hex')}`,
  }));
  try {
    const signup = await (await fetch(`${server.url}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json() as any;
    const { rawKey: key, emailAddress: inbox, identityId } = signup.identity;

    // The inbox, inserted directly: the API's read path is what is measured, not SMTP.
    const firstSeq = (await server.app.mail.sequence.top(inbox)) + 1;
    const base = Date.now() - INBOX * 1000;
    const messages = Array.from({ length: INBOX }, (_, i) => {
      const _id = `msg_a${i.toString(36).padStart(6, '0')}${randomBytes(6).toString('hex')}`;
      const createdAt = new Date(base + i * 1000);
      return {
        _id, messageId: `<api${i}@example.org>`, identityId, inboxId: inbox, threadId: `thd_${i.toString(16).padStart(16, '0')}`,
        direction: 'received', from: ['ada@example.org'], to: [inbox], cc: [], bcc: [], replyTo: [], subject: `message ${i}`,
        text: `Hello ${i}`, extractedText: `Hello ${i}`, references: [], labels: ['received', 'unread'], createdAt, sortKey: sortKeyOf(createdAt, _id),
        ...listPosition(inbox, firstSeq + i),
      };
    });
    // Each message with its claimed inbox position, as MailService stores them (server/mail/inbox-sequence.ts).
    await server.app.db.collection('mail_sequence').insertMany(messages.map((m) => ({ _id: claimId(inbox, m.listSeq), messageId: m._id, at: m.createdAt })) as never[], { ordered: false });
    await server.app.mail.messages.collection.insertMany(messages as never[], { ordered: false });
    log(`identity ${identityId} with ${INBOX} messages; ${CONNECTIONS} connections, ${SECONDS} s per route`);

    const results: Record<string, { rps: number; errors: number; p50: number }> = {};
    for (const [name, path] of [['whoami', '/v0/whoami'], ['messages', '/v0/messages?limit=50']] as const) {
      // A short warm-up (caches, JIT, connection pools), then the measured run.
      await autocannon({ url: server.url + path, connections: CONNECTIONS, duration: 2, headers: { authorization: `Bearer ${key}` } });
      const result = await autocannon({ url: server.url + path, connections: CONNECTIONS, duration: SECONDS, headers: { authorization: `Bearer ${key}` } });
      results[name] = { rps: result.requests.average, errors: result.errors + result.timeouts + result.non2xx, p50: result.latency.p50 };
      log(`  GET ${path}: ${result.requests.average.toFixed(0)} req/s, latency p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, non-2xx ${result.non2xx}, errors ${result.errors}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 2_000)); // requests still in flight finish before the server closes
    log(`api req/s at concurrency ${CONNECTIONS}: whoami ${results.whoami!.rps.toFixed(0)}, messages ${results.messages!.rps.toFixed(0)}, errors ${results.whoami!.errors + results.messages!.errors}`);
  } finally {
    await server.app.db.dropDatabase().catch(() => {});
    await server.close();
    await mongo.stop();
  }
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
