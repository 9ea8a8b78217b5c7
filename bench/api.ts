/**
 * The authenticated API under load: 50 concurrent keep-alive clients (autocannon) against a running backend
 * on the embedded database, on the routes an agent calls all day, each measured against a reference
 * measured in the same minutes, so that a regression shows here whatever the machine and its load:
 *   - GET /health: no key, no database; every router of the app before it (the shared middleware's cost);
 *   - GET /v0/whoami with an identity key (key lookup, scopes, the self view);
 *   - GET /v0/messages?limit=50 on an inbox of 1,000 messages (key lookup, the inbox's change token, a page).
 *
 * The reference is a plain `node:http` server in this process answering a fixed 15-byte JSON body: what
 * this process and its load generator can do on this machine at this moment, with none of our code. Each
 * route's run is cut in slices that alternate with slices of the reference, so both see the same noise
 * (other processes on the machine), and the route is reported as a share of the reference's req/s. That
 * ratio is compared with the one kept in bench/api-baseline.json: a drop beyond the noise is flagged. Not
 * /health as the reference: it goes through every router and middleware of the app, so a slower shared
 * path would slow the reference too and hide itself.
 *
 *   npx tsx bench/api.ts
 *   BENCH_API_SECONDS=10        seconds of each route per round (as many of the reference, interleaved)
 *   BENCH_API_SLICES=5          slices each route's seconds are cut into
 *   BENCH_API_ROUNDS=1          rounds over all routes; medians over rounds
 *   BENCH_API_CONNECTIONS=50    keep-alive clients
 *   BENCH_API_WRITE_BASELINE=1  write this run's ratios to bench/api-baseline.json (after a change that is
 *                               meant to move them; run with BENCH_API_ROUNDS=3 or more on a quiet machine)
 *
 * Prints a line per route and round, then one per route: ratio, baseline ratio, new/baseline and ok or
 * SLOWER, and: api req/s at concurrency 50: whoami <a>, messages <b>, errors <e> (errors: non-2xx answers,
 * socket errors and timeouts of every run).
 */
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-expect-error autocannon ships no type declarations; only its documented options and result fields are used.
import autocannon from 'autocannon';
import { loadConfig } from '../server/platform/config.js';
import { provideMongoServer } from '../server/dev/database/mongo-server.js';
import { freePort } from '../server/platform/net.js';
import { sortKeyOf } from '../server/platform/pagination.js';
import { claimId, listPosition } from '../server/mail/inbox-sequence.js';
import { startServer } from '../server/server.js';

const SECONDS = Number(process.env.BENCH_API_SECONDS ?? 10);
const SLICES = Math.max(1, Number(process.env.BENCH_API_SLICES ?? 5));
const ROUNDS = Math.max(1, Number(process.env.BENCH_API_ROUNDS ?? 1));
const CONNECTIONS = Number(process.env.BENCH_API_CONNECTIONS ?? 50);
const WRITE_BASELINE = process.env.BENCH_API_WRITE_BASELINE === '1';
const INBOX = 1_000;
const BASELINE_FILE = join(dirname(fileURLToPath(import.meta.url)), 'api-baseline.json');
const log = (line: string) => process.stdout.write(`${line}\n`);

const ROUTES = [
  { name: 'health', path: '/health' },
  { name: 'whoami', path: '/v0/whoami' },
  { name: 'messages', path: '/v0/messages?limit=50' },
] as const;
type RouteName = typeof ROUTES[number]['name'];

/** What bench/api-baseline.json holds: each route's req/s as a share of the reference's, measured together. */
interface Baseline {
  about: string;
  measured: { date: string; commit: string; machine: string; connections: number; rounds: number };
  /** A ratio below baseline x (1 - noise) is flagged. */
  noise: number;
  routes: Record<string, { ratio: number; reqPerSec: number; referenceReqPerSec: number }>;
}

interface Run { requests: number; seconds: number; errors: number; p50: number; p99: number }

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

function readBaseline(): Baseline | undefined {
  try {
    return JSON.parse(readFileSync(BASELINE_FILE, 'utf8')) as Baseline;
  } catch {
    return undefined;
  }
}

async function load(url: string, seconds: number, headers: Record<string, string>): Promise<Run> {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: seconds, headers });
  return { requests: result.requests.total, seconds: seconds, errors: result.errors + result.timeouts + result.non2xx, p50: result.latency.p50, p99: result.latency.p99 };
}

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
  // The reference: the same load generator against node:http alone, in this process.
  const referenceBody = Buffer.from('{"status":"ok"}');
  const reference = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': referenceBody.length });
    res.end(referenceBody);
  });
  const referencePort = await freePort();
  await new Promise<void>((resolve) => reference.listen(referencePort, '127.0.0.1', resolve));
  const referenceUrl = `http://127.0.0.1:${referencePort}/`;
  try {
    const signup = await (await fetch(`${server.url}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json() as any;
    const { rawKey: key, emailAddress: inbox, identityId } = signup.identity;
    // One key at thousands of requests a second, far over the default per-key limit: the operator gives
    // this org its own limits (agentgate limits set), high enough that every request is counted (what the
    // limits cost is in the figures) and none refused.
    await server.app.limits.orgLimits.set(signup.org_id, { perKey: 1_000_000_000, perOrg: 1_000_000_000 });

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
    log(`identity ${identityId} with ${INBOX} messages; ${CONNECTIONS} connections; per route and round ${SECONDS} s in ${SLICES} slices, each after a slice of the reference; ${ROUNDS} round(s)`);

    const headers = { authorization: `Bearer ${key}` };
    const loadBefore = loadavg()[0]!;
    // A short warm-up of everything (caches, JIT, connection pools) before anything is measured.
    await load(referenceUrl, 2, headers);
    for (const route of ROUTES) await load(server.url + route.path, 2, headers);

    const rounds: Record<RouteName, Array<{ route: Run; reference: Run }>> = { health: [], whoami: [], messages: [] };
    const slice = SECONDS / SLICES;
    for (let round = 1; round <= ROUNDS; round++) {
      for (const route of ROUTES) {
        const routeRuns: Run[] = [];
        const referenceRuns: Run[] = [];
        for (let i = 0; i < SLICES; i++) {
          referenceRuns.push(await load(referenceUrl, slice, headers));
          routeRuns.push(await load(server.url + route.path, slice, headers));
        }
        const sum = (runs: Run[]) => ({
          requests: runs.reduce((s, r) => s + r.requests, 0), seconds: runs.reduce((s, r) => s + r.seconds, 0),
          errors: runs.reduce((s, r) => s + r.errors, 0), p50: median(runs.map((r) => r.p50)), p99: Math.max(...runs.map((r) => r.p99)),
        });
        const [routeRun, referenceRun] = [sum(routeRuns), sum(referenceRuns)];
        rounds[route.name].push({ route: routeRun, reference: referenceRun });
        const sliceRatios = routeRuns.map((r, i) => r.requests / referenceRuns[i]!.requests);
        log(`  round ${round} GET ${route.path}: ${(routeRun.requests / routeRun.seconds).toFixed(0)} req/s (p50 ${routeRun.p50} ms, p99 ${routeRun.p99} ms, errors ${routeRun.errors}); `
          + `reference ${(referenceRun.requests / referenceRun.seconds).toFixed(0)} req/s; ratio ${(routeRun.requests / routeRun.seconds / (referenceRun.requests / referenceRun.seconds)).toFixed(3)} `
          + `(slices ${Math.min(...sliceRatios).toFixed(3)}-${Math.max(...sliceRatios).toFixed(3)})`);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 2_000)); // requests still in flight finish before the server closes

    const figures = Object.fromEntries(ROUTES.map(({ name }) => {
      const runs = rounds[name];
      const rps = median(runs.map((r) => r.route.requests / r.route.seconds));
      const referenceRps = median(runs.map((r) => r.reference.requests / r.reference.seconds));
      const ratio = median(runs.map((r) => (r.route.requests / r.route.seconds) / (r.reference.requests / r.reference.seconds)));
      return [name, { ratio, reqPerSec: rps, referenceReqPerSec: referenceRps, errors: runs.reduce((s, r) => s + r.route.errors, 0) }];
    })) as Record<RouteName, { ratio: number; reqPerSec: number; referenceReqPerSec: number; errors: number }>;

    const baseline = readBaseline();
    // Other work on the machine slows the reference and the routes alike, but not the database's processes
    // alike: under a load above the cores, a route that waits for the database (messages) reads low.
    const busy = loadBefore > cpus().length;
    log(`load average ${loadBefore.toFixed(2)} before the runs, ${loadavg()[0]!.toFixed(2)} after them (with this bench's own), ${cpus().length} cores${busy ? ': the machine was busy, and the ratio of messages, which waits for the database, reads low then (185dd25 and this code alike: 0.074 -> 0.050); compare on a quiet machine' : ''}`);
    log(`ratio to the reference (plain node:http in this process), median of ${ROUNDS} round(s)${baseline ? `, against bench/api-baseline.json (${baseline.measured.date}, ${baseline.measured.commit}; flagged below ${(1 - baseline.noise).toFixed(2)}x)` : ' (no bench/api-baseline.json to compare with)'}:`);
    for (const { name, path } of ROUTES) {
      const now = figures[name];
      const kept = baseline?.routes[name];
      const against = kept ? now.ratio / kept.ratio : undefined;
      const slower = against !== undefined && against < 1 - baseline!.noise;
      const verdict = against === undefined ? '' : slower ? `  SLOWER than the baseline beyond the noise${ROUNDS < 3 ? ' (one round can be off by 15 %: confirm with BENCH_API_ROUNDS=3)' : ''}` : '  ok';
      log(`  GET ${path.padEnd(22)} ${now.reqPerSec.toFixed(0).padStart(6)} req/s  ratio ${now.ratio.toFixed(3)}${kept ? `  baseline ${kept.ratio.toFixed(3)}  ${against!.toFixed(2)}x${verdict}` : ''}`);
    }
    if (WRITE_BASELINE) {
      const commit = (() => {
        try {
          return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
        } catch {
          return 'unknown';
        }
      })();
      const written: Baseline = {
        about: 'Each route\'s req/s as a share of a plain node:http server\'s, measured alternately in the same process by bench/api.ts (see its header). Written by BENCH_API_WRITE_BASELINE=1.',
        measured: { date: new Date().toISOString().slice(0, 10), commit, machine: `${cpus().length} cores, ${cpus()[0]?.model ?? 'unknown CPU'}`, connections: CONNECTIONS, rounds: ROUNDS },
        noise: baseline?.noise ?? 0.15,
        routes: Object.fromEntries(ROUTES.map(({ name }) => [name, {
          ratio: Number(figures[name].ratio.toFixed(4)), reqPerSec: Math.round(figures[name].reqPerSec), referenceReqPerSec: Math.round(figures[name].referenceReqPerSec),
        }])),
      };
      writeFileSync(BASELINE_FILE, `${JSON.stringify(written, null, 2)}\n`);
      log(`wrote ${BASELINE_FILE}`);
    }
    const errors = Object.values(figures).reduce((s, f) => s + f.errors, 0);
    log(`api req/s at concurrency ${CONNECTIONS}: whoami ${figures.whoami.reqPerSec.toFixed(0)}, messages ${figures.messages.reqPerSec.toFixed(0)}, errors ${errors}`);
  } finally {
    reference.closeAllConnections();
    await new Promise<void>((resolve) => reference.close(() => resolve()));
    await server.app.db.dropDatabase().catch(() => {});
    await server.close();
    await mongo.stop();
  }
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
