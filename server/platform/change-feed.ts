import type { Connection } from 'mongoose';
import type { Collection } from 'mongodb';
import { isDuplicateKey } from './errors.js';

/**
 * What a change invalidates, and what its id names:
 * - `api-key`: one key (its id): revoked;
 * - `identity-keys`: every key of an identity (its id): revoked together;
 * - `identity`: an identity (its id): scopes, name or key changed, or revoked;
 * - `org`: an org (its id): its role changed;
 * - `seller`: a seller org's payment acceptance or endpoints (its id) changed.
 */
export type ChangeTopic = 'api-key' | 'identity-keys' | 'identity' | 'org' | 'seller';

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
  /** How long entries are kept; a process that falls further behind drops all it cached instead. */
  retainMs?: number;
  /** How long a hole in the sequence is waited for before it is skipped (see poll). */
  gapWaitMs?: number;
  onError?: (err: Error) => void;
}

/**
 * Invalidations shared by every process on one database: the process that changes something (revokes a
 * key, removes a scope) publishes it here, and every process drops its cached copy within one poll
 * (CHANGE_FEED_POLL_MS) instead of serving it until its TTL. FerretDB has no change streams, so this is
 * a small collection each process polls with one indexed query.
 *
 * "New" is decided by a sequence number, not by time: an entry's timestamp comes from the clock of the
 * process that wrote it, which may run behind a reader's, so "entries since my last poll" by time could
 * miss one. Each entry takes the next number by inserting it under the unique `_id` (a duplicate means
 * another writer took that number first: take the next), and each process reads the entries above the
 * highest number it has applied.
 */
export class ChangeFeed {
  private readonly changes: Collection<ChangeDoc>;
  private readonly handlers = new Map<ChangeTopic, Array<(id: string) => void>>();
  private readonly resetHandlers: Array<() => void> = [];
  private readonly retainMs: number;
  private readonly gapWaitMs: number;
  /** Every entry up to this number has been applied here. */
  private applied = 0;
  /** Entries above `applied` already applied, because a lower number was not visible yet. */
  private readonly ahead = new Set<number>();
  private gapSince: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private lastTrim = 0;

  constructor(conn: Connection, private readonly options: ChangeFeedOptions) {
    this.changes = conn.collection<ChangeDoc>('change_feed') as unknown as Collection<ChangeDoc>;
    this.retainMs = options.retainMs ?? 10 * 60_000;
    this.gapWaitMs = options.gapWaitMs ?? 5_000;
  }

  /** Calls `handler` with the id of every change on `topic`, made in this process or any other. */
  on(topic: ChangeTopic, handler: (id: string) => void): void {
    this.handlers.set(topic, [...(this.handlers.get(topic) ?? []), handler]);
  }

  /** Called when this process may have missed changes (it fell behind the feed's retention): drop everything cached. */
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
    let next = (await this.highest()) + 1;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.changes.insertOne({ _id: next, topic, id, at: new Date() });
        return;
      } catch (err) {
        if (!isDuplicateKey(err) || attempt >= 100) throw err;
        // Taken: the next one is likely free; after a few misses, read where the feed has got to.
        next = attempt % 5 === 0 ? (await this.highest()) + 1 : next + 1;
      }
    }
  }

  /** Starts polling from the current end of the feed (nothing is cached yet, so older entries do not matter). */
  async start(): Promise<void> {
    if (this.timer) return;
    this.applied = await this.highest();
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

  /**
   * Applies the entries above `applied`. Entry n+1 can become visible before n (their inserts commit in
   * either order), so a hole is not skipped at once: `applied` stays below it, and entries above it are
   * applied and remembered, until the hole fills or `gapWaitMs` passes (a writer that died between taking
   * the number and committing; a reader that fell behind the retention). Skipping a hole drops everything
   * cached, since what it held is unknown.
   */
  async poll(): Promise<void> {
    const entries = await this.changes.find({ _id: { $gt: this.applied } }).sort({ _id: 1 }).limit(1000).toArray();
    for (const entry of entries) {
      if (this.ahead.has(entry._id)) continue;
      this.deliver(entry.topic, entry.id);
      this.ahead.add(entry._id);
    }
    while (this.ahead.delete(this.applied + 1)) this.applied++;
    if (this.ahead.size === 0) {
      this.gapSince = undefined;
    } else if (this.gapSince === undefined) {
      this.gapSince = Date.now();
    } else if (Date.now() - this.gapSince > this.gapWaitMs) {
      this.applied = Math.max(...this.ahead);
      this.ahead.clear();
      this.gapSince = undefined;
      for (const handler of this.resetHandlers) handler();
    }
    this.trim();
  }

  private async highest(): Promise<number> {
    const [last] = await this.changes.find({}, { projection: { _id: 1 } }).sort({ _id: -1 }).limit(1).toArray();
    return last?._id ?? 0;
  }

  private deliver(topic: ChangeTopic, id: string): void {
    for (const handler of this.handlers.get(topic) ?? []) handler(id);
  }

  /** Housekeeping, once a minute per process. The newest entry stays, so numbering never restarts. */
  private trim(): void {
    const now = Date.now();
    if (now - this.lastTrim < 60_000) return;
    this.lastTrim = now;
    this.changes.deleteMany({ _id: { $lt: this.applied }, at: { $lt: new Date(now - this.retainMs) } }).catch(() => {});
  }
}
