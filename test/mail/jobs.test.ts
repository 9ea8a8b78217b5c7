import { createContext, type AppContext } from '../../server/context.js';
import { createJobQueue, GIVEN_UP_COLLECTION, JOBS_COLLECTION, PermanentJobError, type JobQueue } from '../../server/platform/jobs.js';
import { PROCESS_REGISTRY_DEFAULTS, ProcessRegistry } from '../../server/platform/process-registry.js';
import { testConfig } from '../support/server.js';
import { eventually } from './mail-support.js';

let app: AppContext;
const DAY_MS = 86_400_000;
const queues: JobQueue[] = [];
const registries: ProcessRegistry[] = [];
/** A job queue as one process of the deployment has it: registered in the process registry (heartbeats every 100 ms, gone after 500 ms of silence). */
const queue = async (registry = new ProcessRegistry(app.db, undefined, { heartbeatMs: 100, ttlMs: 500, skewMs: 100 }), retention: { retainGivenUpMs: number; tidyEveryMs?: number; tidyBatch?: number } = { retainGivenUpMs: 7 * DAY_MS }) => {
  await registry.join('worker');
  registries.push(registry);
  const q = createJobQueue(app.db, { processEveryMs: 100, registry, log: app.log, ...retention });
  queues.push(q);
  return q;
};

beforeAll(async () => { app = await createContext(await testConfig()); });
afterAll(async () => {
  for (const q of queues) await q.stop();
  for (const r of registries) await r.leave();
  await app.db.dropDatabase().catch(() => {});
  await app.close();
});

describe('JobQueue (Agenda on the test database)', () => {
  it('runs a job enqueued with now() and one scheduled for later', async () => {
    const q = await queue();
    const seen: string[] = [];
    q.define<{ word: string }>('test.record', async ({ word }) => { seen.push(word); });
    await q.start();
    await q.now('test.record', { word: 'now' });
    await q.schedule(new Date(Date.now() + 300), 'test.record', { word: 'later' });
    await eventually(() => expect(seen.sort()).toEqual(['later', 'now']));
  });

  it('retries a failing job on its schedule and gives up after the last retry', async () => {
    const q = await queue();
    const attempts: number[] = [];
    const gaveUp: Array<{ attempt: number; message: string }> = [];
    q.define<{ n: number }>('test.flaky', async (_data, run) => {
      attempts.push(run.attempt);
      throw new Error(`failure ${run.attempt}`);
    }, { retryDelaysMs: [50, 50], onGiveUp: async (_d, err, run) => { gaveUp.push({ attempt: run.attempt, message: err.message }); } });
    await q.start();
    await q.now('test.flaky', { n: 1 });
    await eventually(() => expect(gaveUp).toEqual([{ attempt: 3, message: 'failure 3' }]));
    expect(attempts).toEqual([1, 2, 3]);
  });

  it('moves the jobs that gave up out of the queue, keeps them for the retention, and touches no other job', async () => {
    const jobs = app.db.collection(JOBS_COLLECTION);
    const givenUp = app.db.collection(GIVEN_UP_COLLECTION);
    const ago = (ms: number) => new Date(Date.now() - ms);
    const job = (which: string, fields: Record<string, unknown>) => ({ name: 'test.kept', type: 'normal', priority: 0, data: { which }, nextRunAt: null, lockedAt: null, failCount: 3, failReason: 'gave up', ...fields });
    await jobs.insertMany([
      job('gave up 8 days ago', { lastFinishedAt: ago(8 * DAY_MS), failedAt: ago(8 * DAY_MS) }),
      job('gave up 6 days ago', { lastFinishedAt: ago(6 * DAY_MS), failedAt: ago(6 * DAY_MS) }),
      job('gave up 2 s ago', { lastFinishedAt: ago(2_000), failedAt: ago(2_000) }),
      job('failed 8 days ago, waiting for its retry', { lastFinishedAt: ago(8 * DAY_MS), nextRunAt: new Date(Date.now() + DAY_MS), failCount: 1 }),
      job('running, last finished 8 days ago', { lastFinishedAt: ago(8 * DAY_MS), lockedAt: ago(1_000) }),
    ]);
    // Moved by an earlier round: one past the retention, one within it.
    await givenUp.insertMany([
      job('moved, gave up 9 days ago', { lastFinishedAt: ago(9 * DAY_MS), failedAt: ago(9 * DAY_MS) }),
      job('moved, gave up 3 days ago', { lastFinishedAt: ago(3 * DAY_MS), failedAt: ago(3 * DAY_MS) }),
    ]);
    const q = await queue(undefined, { retainGivenUpMs: 7 * DAY_MS, tidyEveryMs: 100 });
    await q.start();
    const names = async (collection: typeof jobs) => (await collection.find({ name: 'test.kept' }).toArray()).map((j) => j.data.which).sort();
    await eventually(async () => expect(await names(givenUp)).toEqual(['gave up 6 days ago', 'moved, gave up 3 days ago']));
    // A job that ended a moment ago may be one that succeeded, which Agenda is about to delete: it waits a minute.
    expect(await names(jobs)).toEqual(['failed 8 days ago, waiting for its retry', 'gave up 2 s ago', 'running, last finished 8 days ago']);
    const depth = await q.depth();
    expect(depth.get('test.kept')).toBe(1);
    await q.stop();
    await jobs.deleteMany({ name: 'test.kept' });
    await givenUp.deleteMany({ name: 'test.kept' });
  });

  it('moves a backlog larger than one command in batches, once, while two processes tidy at the same time', async () => {
    const jobs = app.db.collection(JOBS_COLLECTION);
    const givenUp = app.db.collection(GIVEN_UP_COLLECTION);
    const at = (daysAgo: number) => new Date(Date.now() - daysAgo * DAY_MS);
    // 250 within the retention and 150 past it, in batches of 40 per command.
    await jobs.insertMany(Array.from({ length: 400 }, (_, i) => ({
      name: 'test.backlog', type: 'normal', priority: 0, data: { i }, nextRunAt: null, lockedAt: null, failCount: 1, failReason: 'gave up',
      lastFinishedAt: at(i < 250 ? 1 : 30), failedAt: at(i < 250 ? 1 : 30),
    })));
    const [a, b] = [await queue(undefined, { retainGivenUpMs: 7 * DAY_MS, tidyBatch: 40 }), await queue(undefined, { retainGivenUpMs: 7 * DAY_MS, tidyBatch: 40 })];
    const [ra, rb] = await Promise.all([a.tidyGivenUp(), b.tidyGivenUp()]);
    expect(await jobs.countDocuments({ name: 'test.backlog' })).toBe(0);
    const moved = (await givenUp.find({ name: 'test.backlog' }).toArray()).map((j) => j.data.i as number).sort((x, y) => x - y);
    expect(moved).toEqual(Array.from({ length: 250 }, (_, i) => i));
    // Each process reports what it did; a job both copied counts for both, so the totals are at least the work.
    expect(ra.moved + rb.moved).toBeGreaterThanOrEqual(250);
    expect(ra.removed + rb.removed).toBeGreaterThanOrEqual(150);
    await givenUp.deleteMany({ name: 'test.backlog' });
  });

  it('does not retry after a PermanentJobError', async () => {
    const q = await queue();
    const attempts: number[] = [];
    const gaveUp: number[] = [];
    q.define('test.permanent', async (_data, run) => {
      attempts.push(run.attempt);
      throw new PermanentJobError('no point');
    }, { retryDelaysMs: [50, 50, 50], onGiveUp: async (_d, _e, run) => { gaveUp.push(run.attempt); } });
    await q.start();
    await q.now('test.permanent', {});
    await eventually(() => expect(gaveUp).toEqual([1]));
    await new Promise((r) => setTimeout(r, 400)); // room for a wrong retry to show up
    expect(attempts).toEqual([1]);
  });

  it("a worker's claim on a job lasts as long as that job's lock, so a worker that dies between claiming and locking holds it no longer", async () => {
    // The claim (a unique insert naming the job's state) is made before the job is marked locked; a worker
    // killed in between leaves the job unlocked and claimed. Its claim must expire with the job's own lock
    // lifetime (webhook deliveries: seconds), not a fixed ten minutes during which nobody could run it.
    const q = await queue();
    let ran = 0;
    q.define('test.short-lock', async () => { ran++; }, { lockLifetimeMs: 2_000 });
    const claims = app.db.collection<{ _id: string; expiresAt: Date }>(`${JOBS_COLLECTION}_claims`);
    await claims.deleteMany({}); // the earlier tests' jobs are done; only this job's claims remain below
    await q.start();
    const before = Date.now();
    await q.now('test.short-lock', {});
    await eventually(() => expect(ran).toBe(1));
    const mine = await claims.find({}).toArray();
    expect(mine.length).toBeGreaterThan(0);
    for (const claim of mine) expect(claim.expiresAt.getTime() - before).toBeLessThanOrEqual(2_000 + (Date.now() - before));
  });

  it('claims a day past their expiry are swept when a queue starts (the hourly sweep is the same delete): one is written per job run', async () => {
    const claims = app.db.collection<{ _id: string; jobId: string; expiresAt: Date }>(`${JOBS_COLLECTION}_claims`);
    await claims.insertMany([
      { _id: 'old-claim', jobId: 'j-old', expiresAt: new Date(Date.now() - 25 * 3600_000) },
      { _id: 'recent-claim', jobId: 'j-recent', expiresAt: new Date(Date.now() - 3600_000) },
    ]);
    const q = await queue();
    await q.start();
    expect((await claims.find({ _id: { $in: ['old-claim', 'recent-claim'] } }).toArray()).map((c) => c._id)).toEqual(['recent-claim']);
    expect((await claims.indexes()).map((ix) => ix.key)).toContainEqual({ jobId: 1 });
  });

  it('runs each job exactly once when two workers share the database (locking)', async () => {
    // Two live workers, registered as a deployment's are (a process counts as gone after 5 s of silence):
    // the registries the other tests use lapse after 500 ms, which a loaded machine's stall can exceed, and
    // taking over the work of a process counted as gone is by design (the tests below).
    const live = () => queue(new ProcessRegistry(app.db, undefined, PROCESS_REGISTRY_DEFAULTS));
    const runs = new Map<number, number>();
    const workers = [await live(), await live()];
    const enqueuer = await live();
    for (const w of [...workers, enqueuer]) {
      w.define<{ i: number }>('test.once', async ({ i }) => {
        runs.set(i, (runs.get(i) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, 5));
      }, { concurrency: 4 });
    }
    for (let i = 0; i < 30; i++) await enqueuer.now('test.once', { i });
    await Promise.all(workers.map((w) => w.start()));
    await eventually(() => expect(runs.size).toBe(30), 20_000);
    await new Promise((r) => setTimeout(r, 500));
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
  });

  it('a process never takes back a job it is running, even when its view of the live processes lacks itself (read while a stall lapsed its registration)', async () => {
    const registry = new ProcessRegistry(app.db, undefined, { heartbeatMs: 100, ttlMs: 500, skewMs: 100 });
    const worker = await queue(registry);
    const name = `test.own-${registries.length}`;
    let runs = 0;
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => { started = resolve; });
    worker.define(name, async () => { runs++; started(); await new Promise(() => {}); }, { lockLifetimeMs: 60_000 });
    await worker.start();
    await worker.now(name, {});
    await running;
    // The view a stalled moment leaves behind: nobody live, this process included.
    (registry as unknown as { liveIds: () => Promise<ReadonlySet<string>> }).liveIds = async () => new Set();
    await new Promise((r) => setTimeout(r, 1_500));
    expect(runs).toBe(1);
  });

  it('a job held by a process that has just joined is not taken over by one whose view of the live processes predates it', async () => {
    const holder = await queue();
    const other = new ProcessRegistry(app.db, undefined, { heartbeatMs: 100, ttlMs: 500, skewMs: 100 });
    const taker = await queue(other);
    const name = `test.joined-${registries.length}`;
    const ranBy: string[] = [];
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => { started = resolve; });
    holder.define(name, async () => { ranBy.push('holder'); started(); await new Promise(() => {}); }, { lockLifetimeMs: 60_000 });
    taker.define(name, async () => { ranBy.push('taker'); }, { lockLifetimeMs: 60_000 });
    // The taker's view was read before the holder joined: only itself.
    (other as unknown as { liveIds: () => Promise<ReadonlySet<string>> }).liveIds = async () => new Set([other.id]);
    await holder.start();
    await holder.now(name, {});
    await running;
    await taker.start();
    await new Promise((r) => setTimeout(r, 1_500));
    expect(ranBy).toEqual(['holder']);
  });

  it.each([
    ['stopped and left the registry', (r: ProcessRegistry) => r.leave()],
    ['died: its heartbeats stopped', async (r: ProcessRegistry) => { (r as unknown as { timer: NodeJS.Timeout }).timer.close(); }],
  ])('a job locked by a process that %s is run by another within seconds, not after its lock lifetime', async (_how, end) => {
    const firstRegistry = new ProcessRegistry(app.db, undefined, { heartbeatMs: 100, ttlMs: 500, skewMs: 100 });
    const first = await queue(firstRegistry);
    const second = await queue();
    const name = `test.takeover-${registries.length}`;
    let started: () => void = () => {};
    const firstStarted = new Promise<void>((resolve) => { started = resolve; });
    const ranBy: string[] = [];
    // The first process's run never ends (a worker wedged, or killed mid-job); the lock lifetime is a minute.
    first.define(name, async () => { ranBy.push('first'); started(); await new Promise(() => {}); }, { lockLifetimeMs: 60_000 });
    second.define(name, async () => { ranBy.push('second'); }, { lockLifetimeMs: 60_000 });
    await first.start();
    await first.now(name, {});
    await firstStarted;
    await second.start();
    await new Promise((r) => setTimeout(r, 800));
    expect(ranBy).toEqual(['first']); // held by a live process: nobody else runs it
    const ended = Date.now();
    await end(firstRegistry);
    await eventually(() => expect(ranBy).toEqual(['first', 'second']), 10_000);
    expect(Date.now() - ended).toBeLessThan(5_000);
    // The process the others count as gone takes nothing back meanwhile (it would run the job twice).
    await new Promise((r) => setTimeout(r, 1_000));
    expect(ranBy).toEqual(['first', 'second']);
  });
});
