import type { AgendaBackend, JobParameters, JobRepository } from 'agenda';
import { MongoBackend } from '@agendajs/mongo-backend';
import { ObjectId, type Db, type Document } from 'mongodb';
import { isDuplicateKey } from './errors.js';
import type { Logger } from './logger.js';
import { findByIds } from './find-by-ids.js';
import { shuffled } from './random-order.js';
import type { ProcessRegistry } from './process-registry.js';

/** How long a claim is kept after it expired, and how often old ones are swept. */
const CLAIM_KEPT_MS = 24 * 3600_000;
const CLAIM_SWEEP_EVERY_MS = 3600_000;
/** How long a process remembers a claim it won, to skip it without a round trip (see claim). */
const CLAIMING_KEPT_MS = 30_000;
/** A connect that failed (its indexes could not be made) tries again after 50 ms, doubling to 2 s. */
const CONNECT_RETRY_FIRST_MS = 50;
const CONNECT_RETRY_MAX_MS = 2_000;

/**
 * Agenda locks a job with one findOneAndUpdate, which MongoDB runs atomically but FerretDB 1.x does not:
 * measured on FerretDB/SQLite, 40 concurrent findOneAndUpdate({lockedAt: null}) calls on one job let up to
 * 35 of them "win", and two workers ran the same job. A unique index does hold on FerretDB, so a worker
 * must also insert a claim whose _id names the job *in the state it was found in* (next run time, lock
 * time, failure count): exactly one worker can insert it. A retry or a new run changes that state and so
 * needs a new claim; an expired claim (its worker died) is taken over by a claim of the next generation.
 */
export function claimingMongoBackend(db: Db, options: {
  collection: string; lockLifetimeMs: number | ((jobName: string) => number); registry: ProcessRegistry;
  log: Logger;
  /** Whether the queue has stopped: a connect still trying then gives up. */
  stopped: () => boolean;
}): AgendaBackend {
  // A claim lasts as long as Agenda's lock of that job would: a worker that claimed a job and died before
  // marking it locked leaves it runnable by another once that much time passed, as a locked one would be.
  const lifetimeOf = typeof options.lockLifetimeMs === 'number' ? (() => options.lockLifetimeMs as number) : options.lockLifetimeMs;
  const inner = new MongoBackend({ mongo: db, collection: options.collection });
  const jobs = db.collection(options.collection);
  const claims = db.collection<{ _id: string; jobId: string; owner?: string; expiresAt: Date }>(`${options.collection}_claims`);
  const { registry } = options;
  let repository: JobRepository | undefined;
  /** The claims (job and state) this process is inserting or has won lately (see claim). */
  const claiming = new Set<string>();
  let purgeTimer: NodeJS.Timeout | undefined;
  const sweepOldClaims = () => claims.deleteMany({ expiresAt: { $lt: new Date(Date.now() - CLAIM_KEPT_MS) } });

  /** Whether the job is still in the state `job` was read in: a candidate read before its run finished is not run again. */
  const unchanged = async (job: Document): Promise<boolean> => {
    const now = await jobs.findOne({ _id: job._id }, { projection: { nextRunAt: 1, lockedAt: 1, failCount: 1 } });
    return !!now && stateOf(now) === stateOf(job);
  };

  const claim = async (job: Document): Promise<boolean> => {
    const key = `${job._id.toHexString()}:${stateOf(job)}`;
    // This process is claiming it already, or has: skipped without a database round trip. Each job enqueued
    // here starts a queue filler of its own at once, and concurrent fillers read the same first candidates:
    // their claims collided, 3.5 failed inserts and reads per webhook delivery at 16 paid calls at once.
    if (claiming.has(key)) return false;
    claiming.add(key);
    const won = await claimOnce(job, key).catch((err: unknown) => { claiming.delete(key); throw err; });
    // Kept a while once won (never past the claim's own lifetime, after which it may be taken over): a
    // filler's candidates read before this job was marked locked name it in the state claimed. A claim
    // lost is forgotten (its holder may die, and this process take it over).
    if (won) setTimeout(() => claiming.delete(key), Math.min(CLAIMING_KEPT_MS, lifetimeOf(String(job.name)))).unref();
    else claiming.delete(key);
    return won;
  };

  const claimOnce = async (job: Document, key: string): Promise<boolean> => {
    // An expired claim is taken over by inserting `key#1`, `key#2`, ..., never by deleting it and inserting
    // `key` again: on FerretDB a delete that matched the dead worker's claim can remove the one another
    // worker has just inserted in its place, and both would run the job.
    let generation = 0;
    for (let tries = 0; tries < 6; tries++) {
      const id = generation ? `${key}#${generation}` : key;
      try {
        await claims.insertOne({ _id: id, jobId: job._id.toHexString(), owner: registry.id, expiresAt: new Date(Date.now() + lifetimeOf(String(job.name))) });
        // Taking over a claim whose holder looked gone: that holder may have been only stalled, and may have
        // run the job and moved it on (its next run, or done) since this worker read it. Run only a job
        // still as it was read.
        if (generation > 0 && !(await unchanged(job))) return false;
        return true;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        const holder = await claims.findOne({ _id: id });
        // A live claim of a live process stands; one whose process is gone is as good as expired.
        if (holder && holder.expiresAt.getTime() > Date.now() && (!holder.owner || await registry.isLive(holder.owner))) return false;
        // Expired: the next generation. Gone (unlockJobs released the job meanwhile): the same one again.
        if (holder) generation++;
      }
    }
    return false;
  };

  /**
   * A candidate this worker can claim, marked locked; the claim, not lockedAt, is the guarantee. The first
   * few due jobs are tried in a random order: every worker polling the queue finds the same ones first,
   * and taking them in the same order made most claims collide (an insert and a read each, for nothing).
   */
  const lockFirst = async (filter: Document, lockedAt: Date, lastModifiedBy: string | undefined, lockDeadline?: Date): Promise<JobParameters | undefined> => {
    // A process the others count as gone (its heartbeats fail, or it left while stopping) takes nothing:
    // they take over what it holds, and it must not compete with them.
    if (!registry.active) return undefined;
    const candidates = shuffled(await jobs.find(filter).sort({ nextRunAt: 1, priority: -1 }).limit(5).toArray());
    for (const candidate of candidates) {
      // A job locked within its lock lifetime is taken over only from a process that is gone, asked afresh:
      // the view the query used may predate a process that has just joined.
      const lockedAlive = candidate.lockedAt && (!lockDeadline || candidate.lockedAt > lockDeadline) && candidate.lastModifiedBy;
      if (lockedAlive && await registry.isLive(String(candidate.lastModifiedBy))) continue;
      if (!(await claim(candidate))) continue;
      await jobs.updateOne({ _id: candidate._id }, { $set: { lockedAt, lastModifiedBy: lastModifiedBy ?? null } });
      return toJobParameters({ ...candidate, lockedAt, lastModifiedBy });
    }
    return undefined;
  };

  const wrap = (repo: JobRepository): JobRepository => new Proxy(repo, {
    get(target, prop, receiver) {
      if (prop === 'getNextJobToRun') {
        return async (name: string, nextScanAt: Date, lockDeadline: Date, now: Date | undefined, opts: { lastModifiedBy?: string } | undefined) =>
          lockFirst({
            name, disabled: { $ne: true },
            $or: [
              { lockedAt: { $eq: null }, nextRunAt: { $lte: nextScanAt } },
              // Given up by its worker (ran past its lock lifetime), or locked by a process that is gone. Never
              // one this process locked itself: while it runs, this process still runs it, even when a
              // stalled event loop let its own registration lapse for a moment (a view of the live
              // processes read then lacks it, and it would take its own job and run it twice).
              { lockedAt: { $lte: lockDeadline } },
              { lockedAt: { $ne: null }, lastModifiedBy: { $nin: [...await registry.liveIds(), registry.id] } },
            ],
          }, now ?? new Date(), opts?.lastModifiedBy, lockDeadline);
      }
      if (prop === 'lockJob') {
        return (job: JobParameters, opts: { lastModifiedBy?: string } | undefined) => job._id ? lockFirst({
          _id: new ObjectId(job._id.toString()), name: job.name, lockedAt: null, nextRunAt: job.nextRunAt, disabled: { $ne: true },
        }, new Date(), opts?.lastModifiedBy) : Promise.resolve(undefined);
      }
      if (prop === 'unlockJobs') {
        // Jobs released by a stopping worker are runnable again at once, not after their claim expires.
        // One indexed delete per job: FerretDB answers `$in` by reading the whole claims collection, which
        // holds a claim for every job run of the last day, and a stop would wait for it.
        return async (ids: Array<string | { toString(): string }>) => {
          await target.unlockJobs(ids as never);
          await findByIds(ids.map(String), (jobId) => claims.deleteMany({ jobId }).then(() => null));
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });

  return {
    name: inner.name,
    notificationChannel: inner.notificationChannel,
    get logger() { return inner.logger; },
    get ownsConnection() { return inner.ownsConnection; },
    get repository() { return (repository ??= wrap(inner.repository)); },
    /**
     * Never rejects: Agenda calls it from its constructor and handles no failure, so one (the database away
     * for a moment while a process starts) was an unhandled rejection that ended the process, and a queue
     * that never became ready. It tries again until it succeeds, or the queue has stopped (a start that
     * failed and was closed).
     */
    async connect() {
      let warned = false;
      for (let delay = CONNECT_RETRY_FIRST_MS; ; delay = Math.min(delay * 2, CONNECT_RETRY_MAX_MS)) {
        try {
          await inner.connect();
          await claims.createIndex({ jobId: 1 });
          break;
        } catch (err) {
          if (options.stopped()) return;
          if (!warned) options.log.warn({ err: (err as Error).message }, 'job queue: its indexes could not be made; trying again until they are');
          warned = true;
          await new Promise((resolve) => setTimeout(resolve, delay));
        }
      }
      if (warned) options.log.info('job queue: indexes made; the queue is ready');
      // A claim is written for every job run and is of no use a day after it expired. FerretDB 1.x has no
      // TTL indexes: old claims are swept at start and every hour (a range: a read of the whole collection
      // on FerretDB, so not more often).
      // Done before the queue is ready, as a start's own step; a failure is left to the next hour.
      const sweep = () => sweepOldClaims().then(() => {}, () => { /* the next hour tries again */ });
      await sweep();
      purgeTimer = setInterval(() => { void sweep(); }, CLAIM_SWEEP_EVERY_MS);
      purgeTimer.unref();
    },
    disconnect: () => {
      clearInterval(purgeTimer);
      return inner.disconnect();
    },
  } as AgendaBackend;
}

/** A job's state as its claims name it: next run time, lock time, failure count. */
function stateOf(job: Document): string {
  return [job.nextRunAt?.getTime() ?? '-', job.lockedAt?.getTime() ?? 'free', job.failCount ?? 0].join(':');
}

function toJobParameters(doc: Document): JobParameters {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(doc)) out[key] = value ?? undefined;
  out._id = (doc._id as ObjectId).toHexString();
  return out as unknown as JobParameters;
}
