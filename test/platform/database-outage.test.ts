// The database going away for a few seconds (PostgreSQL under the embedded FerretDB restarted, as an
// operator's restart or a failover does): every command fails meanwhile. What callers are told must be
// true (a grouped write that failed as a whole is not reported written), the errors read as "not now"
// (a retryable 503 for HTTP clients, never a 500), and what must not be lost is written once it is back.
import type { Collection } from 'mongodb';
import { MongoClient } from 'mongodb';
import { provideMongoServer, type MongoServer } from '../../server/dev/database/mongo-server.js';
import { GroupedInserts, GroupedUpdates } from '../../server/platform/group-commit.js';
import { isDatabaseUnavailable, retryWhileDatabaseAway } from '../../server/platform/database-outage.js';
import { createLogger } from '../../server/platform/logger.js';
import { startTestServer, type TestServer } from '../support/server.js';

let mongo: MongoServer;
let client: MongoClient;
let docs: Collection<{ _id: string; key?: string; v?: number }>;

beforeAll(async () => {
  // A database of its own: it is restarted below, which the suite's shared one must never be.
  mongo = await provideMongoServer({ env: { ...process.env, MONGODB_URI: '' } });
  client = await MongoClient.connect(mongo.uri);
  docs = client.db('outage').collection('docs');
  await docs.createIndex({ key: 1 }, { unique: true });
  await docs.insertOne({ _id: 'existing', key: 'k0', v: 0 });
}, 120_000);
afterAll(async () => {
  await client?.close();
  await mongo?.stop();
});

/** Whether a read now fails as "the database is away" (a read that answers means it is still there). */
const away = () => docs.findOne({ _id: 'existing' }).then(() => false, (err) => isDatabaseUnavailable(err));

/**
 * Runs `during` while PostgreSQL is down (it stays down `downMs` once stopped, then starts again), then
 * waits for it. `during` starts once a read finds the database away, not after a fixed moment: stopping
 * PostgreSQL takes longer on a loaded machine, and a command sent before it is gone would succeed.
 */
async function whileDown<T>(during: () => Promise<T>, downMs = 4_000): Promise<T> {
  const restart = mongo.restartBackend!(downMs);
  for (const deadline = Date.now() + 30_000; !(await away());) {
    if (Date.now() > deadline) throw new Error('the database was still there 30 s after PostgreSQL was stopped');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  try {
    return await during();
  } finally {
    await restart;
  }
}

it('a grouped insert or update whose command fails as a whole is reported failed to every caller, never written', async () => {
  const inserts = new GroupedInserts(() => docs);
  const updates = new GroupedUpdates(() => docs);
  const outcome = await whileDown(() => Promise.allSettled([
    inserts.insert({ _id: 'o1', key: 'k1' }), inserts.insert({ _id: 'o2', key: 'k2' }),
    updates.update({ filter: { _id: 'existing' }, update: { $set: { v: 1 } } }),
  ]));
  expect(outcome.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
  for (const o of outcome) expect(isDatabaseUnavailable((o as PromiseRejectedResult).reason)).toBe(true);
  // Back: nothing of it was written, and the same writes go through now.
  expect(await docs.countDocuments({ _id: { $in: ['o1', 'o2'] } } as never)).toBe(0);
  expect((await docs.findOne({ _id: 'existing' }))!.v).toBe(0);
  expect(await inserts.insert({ _id: 'o1', key: 'k1' })).toBe('inserted');
});

it('tells "the database is away" from refusals that are final', async () => {
  const errors = await whileDown(async () => {
    const caught: unknown[] = [];
    for (const attempt of [() => docs.findOne({ _id: 'existing' }), () => docs.insertOne({ _id: 'o3', key: 'k3' }), () => docs.insertMany([{ _id: 'o4', key: 'k4' }])]) {
      await attempt().then(() => caught.push(undefined), (err) => caught.push(err));
    }
    return caught;
  });
  expect(errors.map(isDatabaseUnavailable)).toEqual([true, true, true]);
  const duplicate = await docs.insertOne({ _id: 'o5', key: 'k0' }).catch((err) => err);
  expect(isDatabaseUnavailable(duplicate)).toBe(false);
  expect(isDatabaseUnavailable(new Error('something else'))).toBe(false);
});

it('a write that must not be lost, started while the database is away, is written once it is back', async () => {
  const log = createLogger({ level: 'silent' });
  const written = await whileDown(() => retryWhileDatabaseAway(() => docs.insertOne({ _id: 'kept', key: 'kept' }), log, 'a test write'), 3_000);
  expect(written.acknowledged).toBe(true);
  expect(await docs.findOne({ _id: 'kept' })).toMatchObject({ key: 'kept' });
});

describe('the HTTP API while the database is away', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ MONGODB_URI: mongo.uri });
  }, 60_000);
  afterAll(async () => { await server?.close(); });

  it('answers a retryable 503 database_unavailable, not a 500, and works again after', async () => {
    const answer = await whileDown(() => server.request('POST', '/v0/agent-signup', { body: {}, headers: { 'x-forwarded-for': '10.77.0.1' } }));
    expect(answer.status).toBe(503);
    expect(answer.body).toMatchObject({ error: 'database_unavailable', status: 503 });
    expect(answer.headers.get('retry-after')).toBe('2');
    const after = await server.request('POST', '/v0/agent-signup', { body: {}, headers: { 'x-forwarded-for': '10.77.0.2' } });
    expect(after.status).toBe(201);
  });
});
