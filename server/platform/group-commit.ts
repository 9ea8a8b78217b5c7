import type { AnyBulkWriteOperation, Collection, Db, Document, Filter, OptionalUnlessRequiredId } from 'mongodb';
import { Batcher, type BatchOptions, type Queued } from './batcher.js';
import { findByIds } from './find-by-ids.js';

/**
 * Group commit: writes asked for while the collection's previous command is on its way leave together in
 * the next one. A lone write leaves at once (in the next turn of the event loop, with whatever else that
 * turn asked for), so nothing waits when there is no load; under load, N concurrent requests cost a few
 * commands instead of N. On the embedded engine each command costs milliseconds of CPU whatever it
 * carries; on a MongoDB replica set with `w: majority` each one waits for the majority: either way the
 * cost is per command, not per document.
 *
 * Nothing here changes what a write means: a grouped insert is still a unique-index insert (unordered, so
 * a duplicate fails only itself and is reported to its own caller as a duplicate), and a grouped update
 * is the same updateOne it would have been alone.
 */

/** Most writes in one command (default: 256 inserts, 64 updates; see updateGroupingFor), commands on their way at once. */
export type GroupCommitOptions = BatchOptions;

export type InsertResult = 'inserted' | 'duplicate';

/** Inserts grouped into unordered insertMany commands; each caller learns whether its own document was a duplicate. */
export class GroupedInserts<T extends Document> extends Batcher<OptionalUnlessRequiredId<T>, InsertResult> {
  /** An insertMany of a few hundred small documents costs the embedded engine about what one insert does. */
  constructor(private readonly collection: () => Collection<T>, options: GroupCommitOptions = {}) {
    super(options, { maxBatch: 256, maxInFlight: 1 });
  }

  insert(doc: OptionalUnlessRequiredId<T>): Promise<InsertResult> {
    return this.enqueue(doc);
  }

  protected async send(batch: Array<Queued<OptionalUnlessRequiredId<T>, InsertResult>>): Promise<void> {
    this.options.onCommand?.(batch.length);
    // The driver adds an _id to documents without one: each caller's document is its own copy.
    const docs = batch.map((item) => ({ ...item.op }));
    let failed = new Map<number, unknown>();
    try {
      await this.collection().insertMany(docs, { ordered: false });
    } catch (err) {
      const writeErrors = writeErrorsOf(err);
      // A failure that is not about single documents (the connection, the server) fails every one.
      if (!writeErrors) throw err;
      failed = new Map(writeErrors.map((e) => [e.index, e]));
    }
    batch.forEach((item, index) => {
      const error = failed.get(index) as { code?: number } | undefined;
      if (!error) item.resolve('inserted');
      else if (error.code === 11000) item.resolve('duplicate');
      else item.reject(Object.assign(new Error(`insert failed: ${(error as { errmsg?: string }).errmsg ?? 'write error'}`), { code: error.code }));
    });
  }
}

export interface GroupedUpdate<T> {
  filter: Document & { _id: unknown };
  update: Document;
  /**
   * Whether this update took effect, told from the document read back: a bulk write reports matches only
   * in total, so when the total falls short the command's documents are read back (one query by `_id`).
   * Without it the caller learns `matched: undefined` then.
   */
  tookEffect?: (doc: T | undefined) => boolean;
}

/** updateOne writes grouped into unordered bulkWrite commands; each caller learns whether its filter matched. */
export class GroupedUpdates<T extends Document> extends Batcher<GroupedUpdate<T>, { matched: boolean | undefined }> {
  /** Sizes for the database at hand: see `updateGroupingFor`. */
  constructor(private readonly collection: () => Collection<T>, options: GroupCommitOptions = {}) {
    super(options, { maxBatch: 64, maxInFlight: 4 });
  }

  update(op: GroupedUpdate<T>): Promise<{ matched: boolean | undefined }> {
    return this.enqueue(op);
  }

  protected async send(batch: Array<Queued<GroupedUpdate<T>, { matched: boolean | undefined }>>): Promise<void> {
    this.options.onCommand?.(batch.length);
    const ops = batch.map(({ op }) => ({ updateOne: { filter: op.filter, update: op.update } }) as AnyBulkWriteOperation<T>);
    let matchedCount: number;
    let failed = new Map<number, { code?: number; errmsg?: string }>();
    try {
      matchedCount = (await this.collection().bulkWrite(ops, { ordered: false })).matchedCount;
    } catch (err) {
      const writeErrors = writeErrorsOf(err);
      if (!writeErrors) throw err;
      failed = new Map(writeErrors.map((e) => [e.index, e]));
      matchedCount = (err as { result?: { matchedCount?: number } }).result?.matchedCount ?? -1;
    }
    const all = matchedCount === batch.length - failed.size;
    let docs: Map<unknown, T> | undefined;
    if (!all && batch.some(({ op }) => op.tookEffect)) {
      const found = await findByIds(batch.map(({ op }) => op.filter._id), (id) => this.collection().findOne({ _id: id } as Filter<T>));
      docs = new Map(found.map((d) => [d._id, d as unknown as T]));
    }
    batch.forEach((item, index) => {
      const error = failed.get(index);
      if (error) { item.reject(Object.assign(new Error(`update failed: ${error.errmsg ?? 'write error'}`), { code: error.code })); return; }
      if (all) { item.resolve({ matched: true }); return; }
      item.resolve({ matched: docs && item.op.tookEffect ? item.op.tookEffect(docs.get(item.op.filter._id)) : undefined });
    });
  }
}

/** Most statements in one update command on FerretDB (see updateGroupingFor). */
export const FERRETDB_UPDATE_STATEMENTS = 8;

/**
 * How grouped updates are sized on this database. MongoDB: up to 64 statements a command (the records of
 * a settlement transaction in one), 4 commands on their way. FerretDB 1.24 (the embedded engine), by
 * measurement: it runs the statements of one update command one after the other, each about as costly
 * to it as a command of its own, but our side (driver, BSON, a socket write and a reply per command) is
 * paid once per command: at concurrency 16 the event loop's CPU per paid request went from 4.2 to
 * 3.1-3.5 ms with 8 statements a command. And it stops answering altogether once more statements of
 * multi-statement update commands are under way at once, across every process on the database, than its
 * PostgreSQL connection pool holds (the limit moves with the pool's size): about 50 by default (6
 * concurrent commands of 8 answered, 8 of 8 hung, one of 60 hung); with `pool_max_conns=150` in its URL, as the embedded engine runs it, 8 of 8, 12 of 8 and
 * one of 60 answered, 4 of 64 hung. Single-statement commands, however many, never did. There one
 * record command of at most 8 is on its way per process (and one usage-count command, usage.ts): three
 * processes stay under the default pool, nine under the embedded engine's.
 */
export async function updateGroupingFor(db: Db): Promise<Pick<GroupCommitOptions, 'maxBatch' | 'maxInFlight'>> {
  const info = await db.admin().command({ buildInfo: 1 }).catch(() => ({}));
  return 'ferretdbVersion' in info ? { maxBatch: FERRETDB_UPDATE_STATEMENTS, maxInFlight: 1 } : { maxBatch: 64, maxInFlight: 4 };
}

/**
 * The per-document errors of a failed insertMany or bulkWrite, or undefined when the command failed as a
 * whole (then nothing can be assumed about any document). The driver reports a command-level failure of a
 * bulk command (FerretDB with its PostgreSQL away, a step-down) as a MongoBulkWriteError with an empty
 * `writeErrors`: read as "no document failed", it would tell every caller its write landed.
 */
function writeErrorsOf(err: unknown): Array<{ index: number; code?: number; errmsg?: string }> | undefined {
  const writeErrors = (err as { writeErrors?: unknown }).writeErrors;
  if (!writeErrors || (Array.isArray(writeErrors) && writeErrors.length === 0)) return undefined;
  const list = Array.isArray(writeErrors) ? writeErrors : [writeErrors];
  return list.map((e: { index: number; code?: number; errmsg?: string; err?: { index: number; code?: number; errmsg?: string } }) => ({ index: e.index ?? e.err?.index ?? -1, code: e.code ?? e.err?.code, errmsg: e.errmsg ?? e.err?.errmsg }));
}
