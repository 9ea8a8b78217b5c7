import { Agenda, InMemoryNotificationChannel, type Job } from 'agenda';
import { claimingMongoBackend } from './job-locking.js';
import { GroupedInserts } from './group-commit.js';
import { deleteByIds } from './find-by-ids.js';
import type { Db, Document } from 'mongodb';
import type { Connection } from 'mongoose';
import { outsideRequest, type Logger } from './logger.js';
import type { ProcessRegistry } from './process-registry.js';
import { startRounds } from './rounds.js';

/** Thrown by a handler when retrying cannot help (a 5xx SMTP reply, a 4xx from a webhook receiver). */
export class PermanentJobError extends Error {}

export interface JobRun {
  /** 1 for the first run, 2 for the first retry, ... */
  attempt: number;
  /** No retry follows if this run fails. */
  lastAttempt: boolean;
}

export interface JobOptions<T> {
  /** Delay before each retry; its length is the number of retries. No retries when empty. */
  retryDelaysMs?: readonly number[];
  /** Runs once when the job stops for good: a permanent error or the last retry failed. */
  onGiveUp?: (data: T, error: Error, run: JobRun) => Promise<void>;
  concurrency?: number;
  /**
   * A job running this long is given up by its worker, and another may run it. A worker that dies holding
   * a job releases it at once (the process registry says it is gone), not after this.
   */
  lockLifetimeMs?: number;
}

export type JobHandler<T> = (data: T, run: JobRun) => Promise<void>;

export const JOBS_COLLECTION = 'jobs';
/** Jobs that gave up, out of the queue: only operators read them, and only for JOB_RETENTION_DAYS. */
export const GIVEN_UP_COLLECTION = 'jobs_given_up';

/**
 * Background work on the same database (Agenda). Small on purpose: areas define a named handler with a
 * retry schedule and enqueue data; the queue owns locking, retries and shutdown.
 */
export interface JobQueue {
  define<T>(name: string, handler: JobHandler<T>, options?: JobOptions<T>): void;
  now<T>(name: string, data: T): Promise<void>;
  schedule<T>(at: Date, name: string, data: T): Promise<void>;
  /** Whether a job `name` whose data has these fields is queued or running (a sweep's "is it in hand?"). */
  has(name: string, data: Record<string, string | number>): Promise<boolean>;
  /**
   * The values of `data[field]` over the jobs `name` that are queued or running, in one read: a sweep asks
   * this once for a whole round instead of `has` per item.
   */
  liveKeys(name: string, field: string): Promise<Set<string>>;
  /** Starts this process's workers. Enqueueing works without it (another process may be the worker). */
  start(): Promise<void>;
  /** Waits briefly for running jobs, then stops taking more (the process's leaving the registry frees the rest). Idempotent. */
  stop(): Promise<void>;
  /**
   * Jobs waiting to run (due, scheduled, or waiting for a retry), by name, across every process on the
   * database; 0 for each name defined here. Agenda clears a job's next run when it starts, removes it when
   * it succeeds and leaves it without one when it gives up: running, done and dead jobs do not count.
   */
  depth(): Promise<Map<string, number>>;
  /**
   * Moves the jobs that gave up out of the queue into `jobs_given_up` (what each process's round does
   * every minute), and deletes those past the retention (at most hourly). Returns how many it moved and deleted.
   */
  tidyGivenUp(): Promise<{ moved: number; removed: number }>;
}

const DEFAULT_LOCK_LIFETIME_MS = 5 * 60_000;

/** Jobs queued or running. One that failed for good stays in the collection with neither a next run nor a lock. */
const LIVE = { disabled: { $ne: true }, $or: [{ nextRunAt: { $ne: null } }, { lockedAt: { $ne: null } }] };

/** How long a stopping process waits for its running jobs; what is still running then is taken over by others. */
const DRAIN_MS = 3_000;

/** How often each process moves the jobs that gave up out of the queue and trims them (see tidyGivenUp). */
const TIDY_EVERY_MS = 60_000;

/** How often each process deletes the moved jobs older than the retention. */
const TRIM_EVERY_MS = 3_600_000;

/**
 * A job is moved once it gave up this long ago. Agenda writes a job's end before it deletes a job that
 * succeeded: for that moment a finished job looks like one that gave up, and must not be moved.
 */
const GAVE_UP_FOR_MS = 60_000;

/**
 * Documents per command of a move or a deletion. FerretDB 1.x cannot delete more than 65,535 documents in
 * one command (`extended protocol limited to 65535 parameters`): one deleteMany of a backlog failed every
 * round, and the collection grew for good.
 */
const TIDY_BATCH = 5_000;

/**
 * `registry`: who is live. A job locked by a process that is not live any more (it crashed, or stopped
 * while the job ran) is runnable again at once, not after its lock lifetime.
 */
export function createJobQueue(conn: Connection, options: {
  processEveryMs: number;
  registry: ProcessRegistry;
  log: Logger;
  /**
   * How long a job that gave up is kept (JOB_RETENTION_DAYS), in `jobs_given_up`. Only operators read it:
   * the delivery or the mail it was for records its own failure.
   */
  retainGivenUpMs: number;
  /** How often the tidying round runs (TIDY_EVERY_MS; tests shorten it). */
  tidyEveryMs?: number;
  /** Documents per command of the tidying round (TIDY_BATCH; tests shorten it). */
  tidyBatch?: number;
}): JobQueue {
  // mongoose pins its own copy of the driver; the Db is the same wire object to Agenda's copy.
  const db = conn.db as unknown as Db;
  const defined = new Set<string>();
  /** The jobs this process runs now (what a stop leaves behind, for its log line). */
  const inHand = new Set<{ name: string; since: number }>();
  /** Each job's lock lifetime: its claims last as long (see claimingMongoBackend). */
  const lockLifetimes = new Map<string, number>();
  let state: 'idle' | 'started' | 'stopped' = 'idle';
  const agenda = new Agenda({
    backend: claimingMongoBackend(db, {
      collection: JOBS_COLLECTION, lockLifetimeMs: (name) => lockLifetimes.get(name) ?? DEFAULT_LOCK_LIFETIME_MS, registry: options.registry,
      log: options.log, stopped: () => state === 'stopped',
    }),
    processEvery: options.processEveryMs,
    // The registry's id: a job's lastModifiedBy names the process that locked it, which the others look up.
    name: options.registry.id,
    removeOnComplete: true,
    // A job enqueued in this process starts at once instead of at the next poll (webhook latency drops
    // from ~processEvery to milliseconds). Other processes still find it by polling.
    notificationChannel: new InMemoryNotificationChannel(),
  });
  let stopTidying: (() => Promise<void>) | undefined;
  const queue = () => db.collection(JOBS_COLLECTION);
  const givenUp = () => db.collection(GIVEN_UP_COLLECTION);
  let givenUpIndexed: Promise<unknown> | undefined;
  let lastTrimAt = 0;
  /**
   * Moves the jobs that gave up (no next run, no lock) out of the queue, and deletes the moved ones older
   * than the retention. Every poll of every worker and every `/metrics` scrape reads the queue, and on
   * FerretDB a read that is not an equality reads all of it: a week of given-up jobs there slowed both.
   * A job that gave up is never run or written again (a retry enqueues a new job), so the move races with
   * nobody but another process moving it too: its copy is an insert that a duplicate `_id` turns into a
   * no-op, and its deletion a delete by `_id` (deleteByIds: FerretDB answers an `_id` list by reading the
   * whole collection). A crash between the two leaves the job in both places, and the next round finishes
   * the move.
   */
  const tidyGivenUp = async () => {
    givenUpIndexed ??= givenUp().createIndex({ lastFinishedAt: 1 });
    await givenUpIndexed;
    const now = Date.now();
    const keepFrom = new Date(now - options.retainGivenUpMs);
    const result = await moveGivenUp(now, keepFrom);
    // The trim reads what the retention kept (on FerretDB, all of it: a range is no index lookup there),
    // so it runs hourly, not with every move.
    if (now - lastTrimAt >= TRIM_EVERY_MS) {
      lastTrimAt = now;
      result.removed += await trimGivenUp(keepFrom);
    }
    if (result.moved || result.removed) options.log.info({ ...result, retainedDays: options.retainGivenUpMs / 86_400_000 }, 'moved jobs that gave up out of the queue; removed those past the retention');
    return result;
  };
  const batchSize = options.tidyBatch ?? TIDY_BATCH;
  // A copy another process made first is a duplicate, not an error; a command that failed as a whole
  // rejects every copy, so the originals are then not deleted.
  const copies = new GroupedInserts<Document>(givenUp, { maxBatch: batchSize });
  /** Copies each job that gave up to `jobs_given_up` (unless past the retention already), then deletes it from the queue. */
  const moveGivenUp = async (now: number, keepFrom: Date) => {
    let moved = 0;
    let removed = 0;
    for (;;) {
      const batch = await queue().find({ nextRunAt: null, lockedAt: null, lastFinishedAt: { $lt: new Date(now - GAVE_UP_FOR_MS) } }).limit(batchSize).toArray();
      const kept = batch.filter((job) => job.lastFinishedAt >= keepFrom);
      await Promise.all(kept.map((job) => copies.insert(job)));
      const deleted = await deleteByIds(queue(), batch.map((job) => job._id), { nextRunAt: null, lockedAt: null });
      moved += kept.length;
      removed += batch.length - kept.length;
      // A batch another process moved at the same time deletes nothing here: it is gone either way. A
      // stopping process leaves the rest of a backlog to the next round, wherever it runs.
      if (batch.length < batchSize || deleted === 0 || state === 'stopped') return { moved, removed };
    }
  };
  const trimGivenUp = async (keepFrom: Date) => {
    let removed = 0;
    for (;;) {
      const batch = await givenUp().find({ lastFinishedAt: { $lt: keepFrom } }, { projection: { _id: 1 } }).limit(batchSize).toArray();
      const deleted = await deleteByIds(givenUp(), batch.map((job) => job._id));
      removed += deleted;
      if (batch.length < batchSize || deleted === 0 || state === 'stopped') return removed;
    }
  };
  // A failing job is recorded by its handler; Agenda's own error events would otherwise crash the process.
  // A poll that was under way when we stopped fails on the closed connection: expected at shutdown, not news.
  agenda.on('error', (err) => {
    if (state === 'stopped' || /client was closed|topology was destroyed/i.test(err.message)) return;
    options.log.error({ err }, 'job queue error');
  });

  return {
    define<T>(name: string, handler: JobHandler<T>, jobOptions: JobOptions<T> = {}) {
      const delays = jobOptions.retryDelaysMs ?? [];
      defined.add(name);
      lockLifetimes.set(name, jobOptions.lockLifetimeMs ?? DEFAULT_LOCK_LIFETIME_MS);
      agenda.define<T>(name, async (job: Job<T>) => {
        const attempt = (job.attrs.failCount ?? 0) + 1;
        const run = { attempt, lastAttempt: attempt > delays.length };
        const running = { name, since: Date.now() };
        inHand.add(running);
        try {
          // A job enqueued by a request may be started from inside it (the in-process notification): its
          // lines must not carry that request's id, nor would the next job's that the same loop picks up.
          await outsideRequest(() => handler(job.attrs.data, run));
        } catch (err) {
          const error = err instanceof Error ? err : new Error(String(err));
          if ((error instanceof PermanentJobError || run.lastAttempt) && jobOptions.onGiveUp) {
            await jobOptions.onGiveUp(job.attrs.data, error, run);
          }
          throw error;
        } finally {
          inHand.delete(running);
        }
      }, {
        concurrency: jobOptions.concurrency,
        lockLifetime: jobOptions.lockLifetimeMs ?? DEFAULT_LOCK_LIFETIME_MS,
        // failCount is already incremented when this runs: attempt 1 failed -> first delay.
        backoff: ({ attempt, error }) => (error instanceof PermanentJobError ? null : delays[attempt - 1] ?? null),
      });
    },
    async now(name, data) {
      await agenda.now(name, data);
    },
    async schedule(at, name, data) {
      await agenda.schedule(at, name, data);
    },
    async has(name, data) {
      const filter = Object.fromEntries(Object.entries(data).map(([field, value]) => [`data.${field}`, value]));
      return (await db.collection(JOBS_COLLECTION).countDocuments({ name, ...filter, ...LIVE }, { limit: 1 })) > 0;
    },
    async liveKeys(name, field) {
      const rows = await db.collection(JOBS_COLLECTION).find({ name, ...LIVE }, { projection: { [`data.${field}`]: 1 } }).toArray();
      return new Set(rows.map((row) => row.data?.[field]).filter((value): value is string => typeof value === 'string'));
    },
    async start() {
      if (state !== 'idle') return;
      state = 'started';
      await agenda.start();
      stopTidying = startRounds({
        everyMs: options.tidyEveryMs ?? TIDY_EVERY_MS, runNow: true, round: tidyGivenUp,
        // A stop does not wait for a round under way (the first after an upgrade may be long): what it did
        // not move or delete, the next round does.
        stopWaitMs: 0,
        onError: (err) => {
          // A round cut short by this process's own stop (its connection closing) is no news.
          if (state !== 'stopped') options.log.warn({ err: err.message }, 'tidying given-up jobs failed; the next round tries again');
        },
      });
    },
    async stop() {
      if (state !== 'started') { state = 'stopped'; return; }
      state = 'stopped';
      await stopTidying?.();
      // No new job starts from now on. Agenda's own drain is not waited for: it listens for each job's
      // 'complete' event, which Agenda emits before it removes the finished job, so the last job of a drain
      // always looked unfinished and every stop waited out the whole drain time. The handlers are waited for
      // instead. Jobs still running after the drain time, and jobs this process locked but did not start,
      // stay locked in its name: the process leaves the registry when it stops, and others take them over.
      await agenda.drain({ timeout: 0, closeConnection: false });
      for (const until = Date.now() + DRAIN_MS; inHand.size > 0 && Date.now() < until;) await new Promise((resolve) => setTimeout(resolve, 20));
      if (inHand.size > 0) {
        options.log.info({ running: [...inHand].map((j) => ({ name: j.name, runningMs: Date.now() - j.since })) }, 'stopping: jobs still running are left to other processes');
      }
    },
    tidyGivenUp,
    async depth() {
      const counts = new Map([...defined].map((name) => [name, 0]));
      const rows = await queue().aggregate<{ _id: string; n: number }>([
        { $match: { nextRunAt: { $ne: null }, disabled: { $ne: true } } },
        { $group: { _id: '$name', n: { $sum: 1 } } },
      ]).toArray();
      for (const row of rows) counts.set(row._id, row.n);
      return counts;
    },
  };
}
