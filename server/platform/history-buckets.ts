import type { Collection } from 'mongodb';
import { Schema, type Connection, type Model } from 'mongoose';
import { isDuplicateKey } from './errors.js';
import { GroupedInserts } from './group-commit.js';
import type { Logger } from './logger.js';
import { startRounds } from './rounds.js';
import { sortKeyOf, type Cursor } from './pagination.js';

/**
 * History filed by the hour, so that a page of it is a few equality queries whatever its depth.
 *
 * Our embedded engine (FerretDB 1.24) answers only equalities from an index: a list sorted by time, or a
 * time range, reads every document of the org, so a seller's payments page cost time in proportion to
 * its history (5-10x the empty database's p50 at 2,000 payments: `npm run bench -- history`). Records therefore carry the UTC hour they
 * were created in (`hour: "2026-12-01T14"`, indexed with the org), and this collection lists, per scope
 * (`payments|<org>`), the days that hold records and, per day, its hours. A page reads the scope's days,
 * the newest day's hours, and hour by hour the records (each one equality), sorted in memory, until it
 * is full. On MongoDB the same queries are index lookups too.
 *
 * A bucket is noted (a unique insert, once per process and hour) before the first record filed under it
 * is written, so a record is never in an hour its scope does not list; an hour listed with no record (its
 * write failed) only costs a page one empty query. Records written by a version that did not file them
 * ("undated") are listed as one `~undated` entry of their scope (scanUndated), and read the old way.
 */
export interface BucketDoc {
  /** `<scope>|<day>` for a day, `<scope>|<hour>` for an hour, `<scope>|~undated`. */
  _id: string;
  /** What the bucket is listed under: the scope for a day (and ~undated), `<scope>|<day>` for an hour. */
  of: string;
  bucket: string;
}

const bucketSchema = new Schema<BucketDoc>({ _id: String, of: { type: String, required: true }, bucket: { type: String, required: true } }, { versionKey: false });
bucketSchema.index({ of: 1 });
// The day groups round's lookup of the scopes with records in one day.
bucketSchema.index({ bucket: 1 });

/** The UTC hour of a time, as records carry it: `2026-12-01T14`. */
export const hourOf = (at: Date) => at.toISOString().slice(0, 13);
/** The UTC day of a time: `2026-12-01`. */
export const dayOf = (at: Date) => at.toISOString().slice(0, 10);
export const UNDATED = '~undated';
/** The bucket list (and day groups) of one kind of record of one org: `payments|<org>`. */
export const scopeOf = (kind: string, orgId: string) => `${kind}|${orgId}`;

/** How long after the first scan for undated records a starting process scans again: a rolling upgrade's length. */
const UNDATED_RESCAN_MS = 3_600_000;

/** How often a scope's list of days is read whole (HistoryBuckets.days). */
const DAYS_READ_EVERY_MS = 60_000;
/** Scopes whose days a process keeps (a year's list is a few KB). */
const MAX_KNOWN_SCOPES = 5_000;

/** Notes kept per process before the memory is cleared (each is a few dozen bytes). */
const MAX_NOTED = 20_000;

/** One per database connection (the payment records and the delivery log share its caches). */
const instances = new WeakMap<Connection, HistoryBuckets>();

export class HistoryBuckets {
  readonly buckets: Model<BucketDoc>;
  /** Hours this process has noted (or is noting), per scope: each is inserted once per process. */
  private readonly noted = new Map<string, Promise<void>>();
  /** Notes of concurrent records (of many scopes) go in one insert command; one already there is no error. */
  private readonly inserts: GroupedInserts<BucketDoc>;
  /** Each scope's days as last read, and when (days): a year's list is read once a minute, not per page. */
  private readonly known = new Map<string, { days: Set<string>; undated: boolean; readAt: number }>();

  /** The connection's instance. */
  static for(conn: Connection): HistoryBuckets {
    let instance = instances.get(conn);
    if (!instance) {
      instance = new HistoryBuckets(conn);
      instances.set(conn, instance);
    }
    return instance;
  }

  private constructor(conn: Connection) {
    this.buckets = conn.models.HistoryBucket ?? conn.model<BucketDoc>('HistoryBucket', bucketSchema, 'history_buckets');
    this.inserts = new GroupedInserts(() => this.buckets.collection as unknown as Collection<BucketDoc>);
  }

  /**
   * Lists the hour of `at` (and its day) under `scope`; resolves once both are written. Called before a
   * record of that hour is inserted; after the first call of an hour in this process, it costs nothing.
   */
  note(scope: string, at: Date): Promise<void> {
    const hour = hourOf(at);
    const key = `${scope}|${hour}`;
    let noting = this.noted.get(key);
    if (!noting) {
      if (this.noted.size >= MAX_NOTED) this.noted.clear();
      noting = this.insert(scope, hour);
      this.noted.set(key, noting);
      // A failed note is tried again by the next record of the hour (the caller's write fails with it).
      noting.catch(() => this.noted.delete(key));
    }
    return noting;
  }

  private async insert(scope: string, hour: string): Promise<void> {
    const day = hour.slice(0, 10);
    await this.insertAll([{ _id: `${scope}|${day}`, of: scope, bucket: day }, { _id: `${scope}|${hour}`, of: `${scope}|${day}`, bucket: hour }]);
    this.known.get(scope)?.days.add(day);
  }

  /** Inserts, where a document already there (another process noted it) is no error. */
  private async insertAll(docs: BucketDoc[]): Promise<void> {
    await Promise.all(docs.map((doc) => this.inserts.insert(doc)));
  }

  /** Whether this process runs the round named `marker` (the first to insert it does). */
  async claimRound(marker: string, now: Date): Promise<boolean> {
    try {
      await this.buckets.create({ _id: marker, of: '~rounds', bucket: now.toISOString() });
      return true;
    } catch (err) {
      if (isDuplicateKey(err)) return false;
      throw err;
    }
  }

  /**
   * Lists `~undated` under each org whose records (of `kind`, in `records`) include some written without
   * their hour (by a version before this one), so that pages and counts read those the old way; returns
   * how many orgs. No backfill writes an hour into them: on FerretDB a write to a document that another
   * write changes at the same moment can lose that other write. The scan is one read of the undated
   * records' org ids, at a process's start. A process of the old version still running in a rolling
   * upgrade may write more after a scan, so processes starting within UNDATED_RESCAN_MS of the first scan
   * scan again (the upgrade's last process starts after the last old one stopped); later starts skip it.
   */
  async scanUndated(kind: string, records: Model<any>, scopeOf: (orgId: string) => string, now = new Date()): Promise<number> {
    const marker = `~undated-scan|${kind}`;
    const first = await this.buckets.findById(marker).lean();
    if (first && now.getTime() - Date.parse(first.bucket) > UNDATED_RESCAN_MS) return 0;
    const orgIds = (await records.distinct('orgId', { hour: null })) as string[];
    if (orgIds.length) await this.insertAll(orgIds.map((orgId) => ({ _id: `${scopeOf(orgId)}|${UNDATED}`, of: scopeOf(orgId), bucket: UNDATED })));
    for (const orgId of orgIds) { const known = this.known.get(scopeOf(orgId)); if (known) known.undated = true; }
    if (!first) await this.insertAll([{ _id: marker, of: marker, bucket: now.toISOString() }]);
    return orgIds.length;
  }

  /**
   * The scope's days, newest first, and whether it holds undated records. The list is read whole at most
   * once per DAYS_READ_EVERY_MS; in between, records are written only in the present (a claim's or a
   * delivery's time is its write's), so the only days another process can have added are today and, past
   * midnight, yesterday: each is looked up by `_id` while the list lacks it.
   */
  async days(scope: string, now = new Date()): Promise<{ days: string[]; undated: boolean }> {
    let known = this.known.get(scope);
    if (!known || now.getTime() - known.readAt > DAYS_READ_EVERY_MS) {
      const readAt = now.getTime();
      const found = (await this.buckets.find({ of: scope }, { bucket: 1 }, { batchSize: 100_000 }).lean()).map((b) => b.bucket);
      known = { days: new Set(found.filter((b) => b !== UNDATED)), undated: found.includes(UNDATED), readAt };
      if (this.known.size >= MAX_KNOWN_SCOPES) this.known.clear();
      this.known.set(scope, known);
    } else {
      const recent = [dayOf(now), dayOf(new Date(now.getTime() - 86_400_000))].filter((day) => !known!.days.has(day));
      const found = await Promise.all(recent.map((day) => this.buckets.exists({ _id: `${scope}|${day}` })));
      recent.forEach((day, i) => { if (found[i]) known!.days.add(day); });
    }
    return { days: [...known.days].sort().reverse(), undated: known.undated };
  }

  /** The hours of one of the scope's days, newest first. */
  async hours(scope: string, day: string): Promise<string[]> {
    return (await this.buckets.find({ of: `${scope}|${day}` }, { bucket: 1 }).lean()).map((b) => b.bucket).sort().reverse();
  }

  /**
   * A scope's records newest first (createdAt, then _id, both descending), strictly after `before`, from
   * the days firstDay to lastDay: hour by hour from `read.hour`, then the undated ones from
   * `read.undated` (which applies `before` itself). Reads only as far as the caller iterates.
   */
  async *newestFirst<T extends { _id: string; createdAt: Date }>(scope: string, read: {
    hour: (hour: string) => Promise<T[]>;
    undated: () => AsyncIterable<T>;
  }, range: { before?: Cursor; firstDay?: string; lastDay?: string } = {}): AsyncIterable<T> {
    const { days, undated } = await this.days(scope);
    const beforeKey = range.before ? sortKeyOf(range.before.at, range.before.id) : undefined;
    const lastHour = range.before ? hourOf(range.before.at) : undefined;
    for (const day of days) {
      if ((lastHour && day > lastHour.slice(0, 10)) || (range.lastDay && day > range.lastDay)) continue;
      if (range.firstDay && day < range.firstDay) break;
      for (const hour of await this.hours(scope, day)) {
        if (lastHour && hour > lastHour) continue;
        const rows = (await read.hour(hour))
          .map((row) => ({ row, key: sortKeyOf(row.createdAt, row._id) }))
          .filter((r) => !beforeKey || r.key < beforeKey)
          .sort((a, b) => (a.key < b.key ? 1 : a.key > b.key ? -1 : 0));
        for (const { row } of rows) yield row;
      }
    }
    if (undated) yield* read.undated();
  }
}

/** The first and last day a time range [from, until) touches (until is exclusive: midnight ends the day before). */
export function dayRangeOf(range: { from?: Date; until?: Date }): { firstDay?: string; lastDay?: string } {
  return {
    ...(range.from ? { firstDay: dayOf(range.from) } : {}),
    ...(range.until ? { lastDay: dayOf(new Date(range.until.getTime() - 1)) } : {}),
  };
}

/** Whether a time range's bounds are midnights (the console's are), so that whole days' groups can answer it. */
export const isWholeDays = (range: { from?: Date; until?: Date }) => [range.from, range.until].every((at) => !at || at.getTime() % 86_400_000 === 0);

/** The `count` records after the first `skip` of a newest-first walk (a numbered page, or a cursor page's limit + 1). */
export async function pageFrom<T>(rows: AsyncIterable<T>, skip: number, count: number): Promise<T[]> {
  const out: T[] = [];
  let seen = 0;
  for await (const row of rows) {
    if (seen++ < skip) continue;
    out.push(row);
    if (out.length >= count) break;
  }
  return out;
}

/** A closed day's groups as written (DayGroups). */
export interface DayGroupsDoc { _id: string; scope: string; day: string; groups: Array<Record<string, unknown> & { n: number }> }

const dayGroupsSchema = new Schema<DayGroupsDoc>({ _id: String, scope: { type: String, required: true }, day: { type: String, required: true }, groups: { type: Schema.Types.Mixed, required: true } }, { versionKey: false });
dayGroupsSchema.index({ scope: 1 });
// The day groups round's lookup of what one day has written.
dayGroupsSchema.index({ day: 1 });

/**
 * A day is closed this long after its end: no record is created in it any more (a claim or a delivery is
 * inserted within seconds of its time, minutes at most when the database was away).
 */
const CLOSE_AFTER_MS = 15 * 60_000;

/** What one day holds across kinds: the day entries listed under it, and the ids of the groups written for it. */
interface DayListing { listed: Array<Pick<BucketDoc, '_id' | 'of'>>; writtenIds: Set<string> }

/** How one kind of record (payments, deliveries, log entries) is grouped by day. */
export interface DayReader<G extends { n: number }> {
  /** One hour's groups of the org's records (one grouping of the records filed under it). */
  hour: (orgId: string, hour: string) => Promise<G[]>;
  /** What makes two groups one. */
  key: (group: G) => string;
  /** Whether no record of the group can change any more. */
  final: (group: G) => boolean;
}

/**
 * Counts of an org's records of one kind per day (by status, amount, whatever the reader groups by), in
 * time that grows with the days asked for, not with the records stored. A day's groups are read live, one
 * grouping per hour (each an equality), until the day is closed and `final` holds for every group; they
 * are then written once, by unique insert, and read from there. The day groups round (startDayGroupsRound)
 * writes each closed day's groups for every org that had records in it, so a view finds them written
 * however long since it last looked; a view writes those the round could not (a day still open then). A
 * change that makes a written day's groups wrong (a failed delivery retried by hand) forgets the day,
 * which is then read live again.
 */
export class DayGroups<G extends { n: number }> {
  readonly written: Model<DayGroupsDoc>;
  /** Each scope's written days as last read (they never change but by forget): read whole once a minute. */
  private readonly known = new Map<string, { days: Map<string, G[]>; readAt: number }>();

  constructor(conn: Connection, private readonly history: HistoryBuckets, readonly kind: string, private readonly reader: DayReader<G>) {
    this.written = conn.models.HistoryDayGroups ?? conn.model<DayGroupsDoc>('HistoryDayGroups', dayGroupsSchema, 'history_day_groups');
  }

  /** The scope's written days, read whole at most once per DAYS_READ_EVERY_MS; days written since are read live once. */
  private async writtenDays(scope: string, now: Date): Promise<Map<string, G[]>> {
    const known = this.known.get(scope);
    if (known && now.getTime() - known.readAt <= DAYS_READ_EVERY_MS) return known.days;
    const readAt = now.getTime();
    const docs = await this.written.find({ scope }, { day: 1, groups: 1 }, { batchSize: 100_000 }).lean();
    const days = new Map(docs.map((d) => [d.day, d.groups as unknown as G[]]));
    if (this.known.size >= MAX_KNOWN_SCOPES) this.known.clear();
    this.known.set(scope, { days, readAt });
    return days;
  }

  /** Each of the org's days' groups in [firstDay, lastDay], and whether it holds undated records (to count the old way). */
  async byDay(orgId: string, range: { firstDay?: string; lastDay?: string }, now = new Date()): Promise<{ days: Map<string, G[]>; undated: boolean }> {
    const scope = scopeOf(this.kind, orgId);
    const [{ days, undated }, writtenByDay] = await Promise.all([this.history.days(scope, now), this.writtenDays(scope, now)]);
    const out = new Map<string, G[]>();
    for (const day of days) {
      if ((range.firstDay && day < range.firstDay) || (range.lastDay && day > range.lastDay)) continue;
      let groups = writtenByDay.get(day);
      if (!groups) {
        groups = await this.readDay(orgId, day);
        if (await this.writeIfFinal(orgId, day, groups, now)) writtenByDay.set(day, groups);
      }
      out.set(day, groups);
    }
    return { days: out, undated };
  }

  /**
   * One round's work for one day: the groups of every org that had records of this kind in it and has
   * none written, written where the day is closed and final. Reads in proportion to that day's orgs and
   * records, whatever the history before it. Returns how many orgs' groups it wrote, and how many it left
   * to a later round or view (a record still open).
   */
  async writeDay(day: string, now = new Date(), listing?: DayListing): Promise<{ written: number; open: number }> {
    if (day >= closedBefore(now)) return { written: 0, open: 0 };
    const prefix = `${this.kind}|`;
    const { listed, writtenIds } = listing ?? await this.listingOf(day);
    const out = { written: 0, open: 0 };
    for (const { _id, of } of listed) {
      if (!of.startsWith(prefix) || _id !== `${of}|${day}` || writtenIds.has(`${of}|${day}`)) continue;
      const orgId = of.slice(prefix.length);
      if (await this.writeIfFinal(orgId, day, await this.readDay(orgId, day), now)) out.written++;
      else out.open++;
    }
    return out;
  }

  /** The scopes (of every kind) with records in `day`, and those whose groups of it are written: read once per round and day. */
  async listingOf(day: string): Promise<DayListing> {
    const [listed, done] = await Promise.all([
      this.history.buckets.find({ bucket: day }, { of: 1 }, { batchSize: 100_000 }).lean(),
      this.written.find({ day }, { _id: 1 }, { batchSize: 100_000 }).lean(),
    ]);
    return { listed, writtenIds: new Set(done.map((d) => d._id)) };
  }

  /** The org's groups of one day, read live: one grouping per hour. */
  private async readDay(orgId: string, day: string): Promise<G[]> {
    const hours = await this.history.hours(scopeOf(this.kind, orgId), day);
    return merge((await Promise.all(hours.map((hour) => this.reader.hour(orgId, hour)))).flat(), this.reader.key);
  }

  /** Writes a day's groups if it is closed and none can change any more (once: a unique insert); whether they are written now. */
  private async writeIfFinal(orgId: string, day: string, groups: G[], now: Date): Promise<boolean> {
    if (day >= closedBefore(now) || !groups.every(this.reader.final)) return false;
    const scope = scopeOf(this.kind, orgId);
    await this.written.create({ _id: `${scope}|${day}`, scope, day, groups }).catch((err: unknown) => { if (!isDuplicateKey(err)) throw err; });
    return true;
  }

  /**
   * The day's written groups are wrong now: it is read live (and written again) from here on; another
   * process reads it live once its list of written days is read again (within DAYS_READ_EVERY_MS).
   */
  async forget(orgId: string, day: string): Promise<void> {
    const scope = scopeOf(this.kind, orgId);
    await this.written.deleteOne({ _id: `${scope}|${day}` });
    this.known.get(scope)?.days.delete(day);
  }
}

/** The first day not closed yet at `now` (records may still be created in it). */
const closedBefore = (now: Date) => dayOf(new Date(now.getTime() - CLOSE_AFTER_MS));

/** How often each process tries the day groups round (one process a round: HistoryBuckets' unique insert of its hour). */
export const DAY_GROUPS_EVERY_MS = 15 * 60_000;
/** The closed days each round writes: yesterday, and the day before for records that were still open then (a delivery being retried). */
const DAY_GROUPS_DAYS_BACK = 2;

/**
 * The day groups round: once an hour across the deployment (the first process to insert the hour's
 * marker runs it), the last closed days' groups are written for every org and kind that has records in
 * them. A round missed (every process down, or the one running it stopped mid-way) costs nothing but time:
 * views read those days live and write them. Returns its stop.
 */
export function startDayGroupsRound(groups: Array<DayGroups<any>>, history: HistoryBuckets, log: Logger, everyMs = DAY_GROUPS_EVERY_MS): () => Promise<void> {
  return startRounds({
    everyMs,
    round: async () => {
      const started = Date.now();
      const done = await dayGroupsRound(groups, history);
      for (const { kind, day, written, open } of done ?? []) {
        if (written || open) log.info({ kind, day, written, open, ms: Date.now() - started }, 'day groups written');
      }
    },
    onError: (err) => log.warn({ err: err.message }, 'the day groups round failed; views read those days live, and the next round retries'),
  });
}

/**
 * One day groups round at `now`, if no process has run this hour's: what it wrote (orgs) and left open,
 * per kind and day; undefined if another process has the round.
 */
export async function dayGroupsRound(groups: Array<DayGroups<any>>, history: HistoryBuckets, now = new Date()): Promise<Array<{ kind: string; day: string; written: number; open: number }> | undefined> {
  if (!await history.claimRound(`~day-groups-round|${hourOf(now)}`, now)) return undefined;
  const out = [];
  for (let back = 1; back <= DAY_GROUPS_DAYS_BACK; back++) {
    const day = dayOf(new Date(now.getTime() - CLOSE_AFTER_MS - back * 86_400_000));
    // One listing of the day serves every kind (they share both collections).
    const listing = groups.length ? await groups[0]!.listingOf(day) : undefined;
    for (const kind of groups) out.push({ kind: kind.kind, day, ...await kind.writeDay(day, now, listing) });
  }
  return out;
}

/** Groups with the same key added up. */
function merge<G extends { n: number }>(groups: G[], key: (group: G) => string): G[] {
  const out = new Map<string, G>();
  for (const g of groups) {
    const k = key(g);
    const sum = out.get(k);
    if (sum) sum.n += g.n;
    else out.set(k, { ...g });
  }
  return [...out.values()];
}
