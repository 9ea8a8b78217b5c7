import type { Connection } from 'mongoose';
import type { Collection } from 'mongodb';
import { isDuplicateKey } from './errors.js';

/**
 * What a change invalidates, and what its id names:
 * - `api-key`: one key (its id): revoked;
 * - `identity-keys`: every key of an identity (its id): revoked together;
 * - `identity`: an identity (its id): scopes, name or key changed, or revoked;
 * - `org`: an org (its id): its role changed;
 * - `seller`: a seller org's payment acceptance or endpoints (its id) changed;
 * - `mail-event`: an identity (its id) has a new mail event: its open event streams read it at once.
 */
export type ChangeTopic = 'api-key' | 'identity-keys' | 'identity' | 'org' | 'seller' | 'mail-event';

interface ChangeDoc {
  /** The feed's sequence number, taken by a unique insert: 1, 2, 3, ... */
  _id: number;
  topic: ChangeTopic;
  id: string;
  at: Date;
}

export interface ChangeFeedOptions {
  /** How often this process looks for changes made by others. */
  pollMs: number;
  /** How long entries are kept; a process that could not poll for half of it drops all it cached instead. */
  retainMs?: number;
  /** How often an idle poll also checks that no entry is stuck behind a number that never appeared. */
  holeCheckMs?: number;
  onError?: (err: Error) => void;
}

/**
 * Invalidations shared by every process on one database: the process that changes something (revokes a
 * key, removes a scope) publishes it here, and every process drops its cached copy within one poll
 * (CHANGE_FEED_POLL_MS) instead of serving it until its TTL. FerretDB has no change streams, so this is
 * a small collection each process polls.
 *
 * "New" is decided by a sequence number, not by time: an entry's timestamp comes from the clock of the
 * process that wrote it, which may run behind a reader's, so "entries since my last poll" by time could
 * miss one. Each entry takes the next number by inserting it under the unique `_id` (a duplicate means
 * another writer took that number: take the next), so numbers are dense and a writer only gets n + 1
 * once n is committed. A process then reads n + 1, n + 2, ... by `_id` until one is missing: an equality
 * on `_id` is the one filter FerretDB 1.x answers from an index (a range scans the whole collection:
 * 90 ms at 5,000 entries, against 1 ms), so an idle poll costs one indexed lookup.
 */
export class ChangeFeed {
  private readonly changes: Collection<ChangeDoc>;
  private readonly handlers = new Map<ChangeTopic, Array<(id: string) => void>>();
  private readonly resetHandlers: Array<() => void> = [];
  private readonly retainMs: number;
  private readonly holeCheckMs: number;
  /** Every entry up to this number has been applied here. */
  private applied = 0;
  private lastPolled = 0;
  private lastHoleCheck = 0;
  /** `applied` when the last hole check found entries above it. */
  private behindAt: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private lastTrim = 0;

  constructor(conn: Connection, private readonly options: ChangeFeedOptions) {
    this.changes = conn.collection<ChangeDoc>('change_feed') as unknown as Collection<ChangeDoc>;
    this.retainMs = options.retainMs ?? 10 * 60_000;
    this.holeCheckMs = options.holeCheckMs ?? 10_000;
  }

  /** Calls `handler` with the id of every change on `topic`, made in this process or any other. */
  on(topic: ChangeTopic, handler: (id: string) => void): void {
    this.handlers.set(topic, [...(this.handlers.get(topic) ?? []), handler]);
  }

  /** Called when this process may have missed changes (it could not poll for long): drop everything cached. */
  onReset(handler: () => void): void {
    this.resetHandlers.push(handler);
  }

  /**
   * Announces a change already written to the database. It applies in this process at once and in every
   * other within one poll. Call it after the write: a process that reloads before the write would cache
   * the old value again.
   */
  async publish(topic: ChangeTopic, id: string): Promise<void> {
    this.deliver(topic, id);
    let next = this.applied + 1;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.changes.insertOne({ _id: next, topic, id, at: new Date() });
        return;
      } catch (err) {
        if (!isDuplicateKey(err) || attempt >= 100) throw err;
        // Taken: the next one is likely free; after a few misses, read where the feed has got to.
        next = attempt % 8 === 0 ? Math.max(next, await this.highest()) + 1 : next + 1;
      }
    }
  }

  /** Starts polling from the current end of the feed (nothing is cached yet, so older entries do not matter). */
  async start(): Promise<void> {
    if (this.timer) return;
    this.applied = await this.highest();
    this.lastPolled = Date.now();
    this.timer = setInterval(() => {
      this.polling ??= this.poll().catch((err) => this.options.onError?.(err as Error)).finally(() => { this.polling = undefined; });
    }, this.options.pollMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.polling;
  }

  /** Applies the entries after `applied`, in order. */
  async poll(): Promise<void> {
    const started = Date.now();
    // Entries older than the retention may have been trimmed before this process read them.
    if (started - this.lastPolled > this.retainMs / 2) await this.skipTo(await this.highest());
    for (;;) {
      const entry = await this.changes.findOne({ _id: this.applied + 1 });
      if (!entry) break;
      this.deliver(entry.topic, entry.id);
      this.applied = entry._id;
    }
    this.lastPolled = started;
    if (started - this.lastHoleCheck >= this.holeCheckMs) await this.checkForHole(started);
    this.trim(started);
  }

  /**
   * Numbers are taken densely, so a missing n + 1 below an existing n + 2 should only last while n + 1 is
   * being committed. A hole that outlasts two checks (its number was trimmed, or the engine did something
   * unforeseen) is skipped, and since what it held is unknown, everything cached is dropped.
   */
  private async checkForHole(now: number): Promise<void> {
    this.lastHoleCheck = now;
    const highest = await this.highest();
    if (highest <= this.applied) {
      this.behindAt = undefined;
    } else if (this.behindAt === this.applied) {
      await this.skipTo(highest);
    } else {
      this.behindAt = this.applied;
    }
  }

  private async skipTo(highest: number): Promise<void> {
    this.applied = Math.max(this.applied, highest);
    this.behindAt = undefined;
    for (const handler of this.resetHandlers) handler();
  }

  /** The highest number taken: a scan on FerretDB, so only at start and in the occasional checks. */
  private async highest(): Promise<number> {
    const [last] = await this.changes.find({}, { projection: { _id: 1 } }).sort({ _id: -1 }).limit(1).toArray();
    return last?._id ?? 0;
  }

  private deliver(topic: ChangeTopic, id: string): void {
    for (const handler of this.handlers.get(topic) ?? []) handler(id);
  }

  /** Housekeeping, once a minute per process. The newest entry stays, so numbering never restarts. */
  private trim(now: number): void {
    if (now - this.lastTrim < 60_000) return;
    this.lastTrim = now;
    this.changes.deleteMany({ _id: { $lt: this.applied }, at: { $lt: new Date(now - this.retainMs) } }).catch(() => {});
  }
}
