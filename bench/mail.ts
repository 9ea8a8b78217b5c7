/**
 * Mail speed: (1) inbound SMTP messages stored per second, through the real listener (nodemailer clients
 * on loopback -> smtp-server -> mailparser -> database); (2) latency of a 50-message page of GET
 * /v0/messages from an inbox of 100,000 messages, first page and a deep page, plus the query's explain
 * plan (on MongoDB it must walk the {inboxId: 1, sortKey: -1} index, not sort in memory).
 *
 * Every timed page is read from the database (the inbox's change token is bumped first, which voids the
 * page kept in memory): bench/api.ts measures repeated reads of an unchanged inbox, which the kept pages serve.
 *
 * Pages are read bucket by bucket (server/mail/inbox-sequence.ts): FerretDB 1.24 sorts and limits in
 * memory over everything a filter matches, so a {inboxId} query sorted by time would decode the whole
 * inbox for every page; an equality on listBucket matches at most 64 messages, through an index on any
 * engine. Set MONGODB_URI to bench against MongoDB.
 *
 *   npx tsx bench/mail.ts      (BENCH_MAIL_INBOUND=600 messages, BENCH_MAIL_INBOX=100000, BENCH_MAIL_PAGES=5)
 *
 * (3) search (GET /v0/messages/search) over the same inbox, through the word index kept in the database
 * (server/mail/mail-search.ts): a rare word, a word in 100 messages, a word in 10,000, two words, a sender.
 * Received mail is authenticated against a DNS server on loopback (test/support/dns-server.ts) publishing
 * SPF for the sending domain, as the tests do.
 *
 * Prints: mail page p50 on <inbox size> messages: first <n> ms, deep <m> ms
 *         mail search p50 on <inbox size> messages: <n> ms (rare <a>, 100 <b>, 10,000 <c>, two words <d>, sender <e>)
 */
import { randomBytes } from 'node:crypto';
import nodemailer from 'nodemailer';
import { loadConfig } from '../server/platform/config.js';
import { provideMongoServer } from '../server/dev/database/mongo-server.js';
import { freePort } from '../server/platform/net.js';
import { startServer } from '../server/server.js';
import { bucketOf, claimId, encodeListCursor, listPosition } from '../server/mail/inbox-sequence.js';
import { sortKeyOf } from '../server/platform/pagination.js';
import { startTestDns } from '../test/support/dns-server.js';

const INBOUND = Number(process.env.BENCH_MAIL_INBOUND ?? 600);
const INBOX = Number(process.env.BENCH_MAIL_INBOX ?? 100_000);
const PAGES = Number(process.env.BENCH_MAIL_PAGES ?? 5);
const log = (line: string) => process.stdout.write(`${line}\n`);
const pct = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!;

async function main() {
  const mongo = await provideMongoServer();
  const dns = await startTestDns();
  const port = await freePort();
  const server = await startServer(loadConfig({
    // An access line per request on stdout would bury the results (LOG_LEVEL=info to watch them).
    AGENTGATE_MODE: 'dev', HOST: '127.0.0.1', LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', PORT: String(port), BASE_URL: `http://127.0.0.1:${port}`,
    MAIL_DOMAIN: 'bench.test', DID_DOMAIN: `127.0.0.1%3A${port}`, SMTP_PORT: '0',
    MASTER_KEY: randomBytes(32).toString('hex'), MONGODB_URI: mongo.uri, MONGODB_DB: `bench_${randomBytes(4).toString('hex')}`,
    MAIL_DNS_SERVERS: dns.server,
  }));
  const signup = await (await fetch(`${server.url}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json() as any;
  const { rawKey: key, emailAddress: inbox, identityId } = signup.identity;
  log(`database: ${mongo.engine}`);

  // 1. Inbound SMTP throughput: 4 pooled client connections, as a sending MTA would open.
  const client = nodemailer.createTransport({ host: '127.0.0.1', port: server.smtpPort, secure: false, ignoreTLS: true, pool: true, maxConnections: 4, maxMessages: Infinity });
  const send = (i: number) => client.sendMail({ from: `sender${i}@example.org`, to: inbox, subject: `bench ${i}`, text: `Message ${i}\n\nOn Mon, someone wrote:\n> quoted ${i}` });
  await Promise.all(Array.from({ length: 20 }, (_, i) => send(i))); // warm-up
  const started = performance.now();
  await Promise.all(Array.from({ length: INBOUND }, (_, i) => send(i)));
  const seconds = (performance.now() - started) / 1000;
  client.close();
  log(`inbound SMTP: ${INBOUND} messages stored in ${seconds.toFixed(2)} s = ${(INBOUND / seconds).toFixed(0)} messages/s (4 connections)`);

  // 2. A 100,000-message inbox, inserted directly (SMTP at the rate above would take minutes).
  const messages = server.app.mail.messages;
  const claims = server.app.db.collection('mail_sequence');
  const firstSeq = (await server.app.mail.sequence.top(inbox)) + 1;
  const base = Date.now() - INBOX * 10;
  for (let offset = 0; offset < INBOX; offset += 5000) {
    const batch = Array.from({ length: Math.min(5000, INBOX - offset) }, (_, j) => {
      const i = offset + j;
      const _id = `msg_b${i.toString(36).padStart(8, '0')}${randomBytes(6).toString('hex')}`;
      const createdAt = new Date(base + Math.floor(i / 4) * 10); // four messages per millisecond
      return {
        _id, messageId: `<b${i}@example.org>`, identityId, inboxId: inbox,
        threadId: `thd_${i.toString(16).padStart(16, '0')}`, direction: 'received', from: ['a@example.org'], to: [inbox], cc: [], bcc: [], replyTo: [],
        // Words in 1 (a needle every 10,000), 100 (w<n>), 10,000 (topic<n>) and all (filler) of the messages.
        subject: `filler ${i} topic${i % 10} w${i % 1000}`, text: `filler${i % 10_000 === 7 ? ' needle' : ''}`, extractedText: 'filler', references: [],
        labels: ['received', i % 3 ? 'read' : 'unread'], authentication: { spf: { result: 'pass', domain: 'example.org' }, dkim: { result: 'none', domain: null }, dmarc: { result: 'none', domain: 'example.org' }, arc: { result: 'none', domain: null }, verified: true },
        createdAt, sortKey: sortKeyOf(createdAt, _id), ...listPosition(inbox, firstSeq + i),
      };
    });
    // Each message with its claimed position, as MailService stores them (server/mail/inbox-sequence.ts).
    await claims.insertMany(batch.map((m) => ({ _id: claimId(inbox, m.listSeq), messageId: m._id, at: m.createdAt })) as never[], { ordered: false });
    await messages.collection.insertMany(batch as never[], { ordered: false });
    // Their search index, as MailService writes it for each stored message, in bulk.
    const index = batch.map((m) => server.app.mail.searchIndex.documentsFor(m as never));
    await server.app.mail.searchIndex.ensureIndexes();
    await server.app.mail.searchIndex.postings.insertMany(index.flat(), { ordered: false });
    log(`  inbox filled: ${Math.min(offset + 5000, INBOX)} of ${INBOX}`);
  }
  log(`inbox: ${await messages.countDocuments({ inboxId: inbox })} messages`);

  // A page is one or two equality queries on listBucket (server/mail/inbox-sequence.ts): the plan must be
  // an index scan (GIN on FerretDB's PostgreSQL, the listBucket index on MongoDB), not a scan of the inbox.
  const topBucket = bucketOf(inbox, await server.app.mail.sequence.top(inbox));
  const plan = await messages.collection.find({ listBucket: topBucket }).explain('executionStats');
  log(`explain (a page bucket): ${JSON.stringify(plan.queryPlanner?.winningPlan ?? plan.queryPlanner ?? plan).slice(0, 400)}`);
  if (plan.executionStats) log(`  docsExamined ${plan.executionStats.totalDocsExamined}, keysExamined ${plan.executionStats.totalKeysExamined}, nReturned ${plan.executionStats.nReturned}`);

  const get = async (path: string) => {
    const t = performance.now();
    const res = await fetch(server.url + path, { headers: { authorization: `Bearer ${key}` } });
    const body = await res.json() as any;
    if (res.status !== 200 || body.count !== 50) throw new Error(`unexpected page: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
    return { ms: performance.now() - t, body };
  };
  // The cursor a client holds after 200 pages: the position 10,000 below the newest.
  const deepToken = encodeListCursor((await server.app.mail.sequence.top(inbox)) - 10_000 + 1);
  const medians: Record<string, number> = {};
  for (const [name, path] of [['first page', '/v0/messages?limit=50'], ['page 201 (10,000 deep)', `/v0/messages?limit=50&pageToken=${deepToken}`], ['labels=unread', '/v0/messages?limit=50&labels=unread']] as const) {
    const times: number[] = [];
    for (let i = 0; i < PAGES; i++) {
      // As if mail had arrived since the last read: the kept page is void and the page is read afresh.
      await server.app.mail.changes.bump(inbox);
      times.push((await get(path)).ms);
    }
    medians[name] = pct(times, 0.5);
    log(`GET ${name}: median ${pct(times, 0.5).toFixed(1)} ms, p95 ${pct(times, 0.95).toFixed(1)} ms (${PAGES} requests, HTTP + auth + query)`);
  }
  log(`mail page p50 on ${INBOX} messages: first ${medians['first page']!.toFixed(0)} ms, deep ${medians['page 201 (10,000 deep)']!.toFixed(0)} ms`);

  // 3. Search: each query read afresh (search keeps nothing in memory), 20 results.
  const searches = [['rare', 'needle'], ['100', 'w123'], ['10,000', 'topic3'], ['two words', 'topic3 w123'], ['sender', 'a@example.org']] as const;
  const searchMedians: Record<string, number> = {};
  const all: number[] = [];
  for (const [name, q] of searches) {
    const times: number[] = [];
    for (let i = 0; i < PAGES; i++) {
      const t = performance.now();
      const res = await fetch(`${server.url}/v0/messages/search?q=${encodeURIComponent(q)}&limit=20`, { headers: { authorization: `Bearer ${key}` } });
      const body = await res.json() as any;
      if (res.status !== 200 || body.count === 0) throw new Error(`unexpected search answer: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
      times.push(performance.now() - t);
    }
    all.push(...times);
    searchMedians[name] = pct(times, 0.5);
    log(`GET /v0/messages/search?q=${q}: median ${pct(times, 0.5).toFixed(1)} ms, p95 ${pct(times, 0.95).toFixed(1)} ms (${PAGES} requests)`);
  }
  log(`mail search p50 on ${INBOX} messages: ${pct(all, 0.5).toFixed(0)} ms (${searches.map(([name]) => `${name} ${searchMedians[name]!.toFixed(0)}`).join(', ')})`);

  await server.close();
  await server.app.db.dropDatabase().catch(() => {});
  await mongo.stop();
  await dns.close();
}

main().catch((err) => { console.error(err); process.exit(1); });
