import type { Collection, Connection } from 'mongoose';
import { isDuplicateKey } from '../platform/errors.js';
import type { SettlementWork, WorkOutcome } from './work.js';

/**
 * Where settlement work crosses from the process that accepted it to the process that holds the relayer
 * lane it was given, and where the outcome comes back: a pair of mailboxes per (lane, accepting process).
 *
 * - The inbox: entries `<lane>/<from>/<n>`, n = 1, 2, 3, ..., written by the accepting process alone, each
 *   with the work it gave the lane since its previous entry.
 * - The outbox: entries `<lane>/<to>/<n>`, written by the lane's holder, each with outcomes for `to`.
 * - The cursor `<lane>/<from>`: how far the lane's holders have read and answered, written by the holder,
 *   so the next holder (after a handover, or after its holder died) continues from there.
 *
 * Every read is an equality on `_id` and every write a unique insert (the cursor aside, which only the
 * lease holder writes): FerretDB 1.x answers nothing else from an index, and makes no conditional update
 * atomic. Numbers are dense because each sequence has one writer at a time; a holder that finds its next
 * outbox number taken (its predecessor wrote it after saving the cursor) moves on to the next one.
 */
export interface InboxEntry { _id: string; lane: string; from: string; n: number; items: SettlementWork[]; at: Date }
export interface OutboxEntry { _id: string; lane: string; to: string; n: number; replies: Reply[]; at: Date }
export interface Reply { id: string; outcome: WorkOutcome }
export interface Cursor { _id: string; lane: string; from: string; read: number; replied: number; holder: string; at: Date }

/** Mail older than this is deleted by the housekeeping sweep: an answer that late is answered by reconciliation. */
export const MAIL_RETAIN_MS = 60 * 60_000;

const entryId = (lane: string, process: string, n: number) => `${lane}/${process}/${n}`;

export class Mailbox {
  private readonly inbox: Collection<InboxEntry>;
  private readonly outbox: Collection<OutboxEntry>;
  private readonly cursors: Collection<Cursor>;

  /** `suffix`: the network's, for a network other than the default one (engine.ts collectionSuffix). */
  constructor(conn: Connection, suffix = '') {
    this.inbox = conn.collection<InboxEntry>(`settlement_inbox${suffix}`) as unknown as Collection<InboxEntry>;
    this.outbox = conn.collection<OutboxEntry>(`settlement_outbox${suffix}`) as unknown as Collection<OutboxEntry>;
    this.cursors = conn.collection<Cursor>(`settlement_cursors${suffix}`) as unknown as Collection<Cursor>;
  }

  /**
   * Writes inbox entry n of (lane, from). A duplicate is an earlier attempt of this same entry that landed
   * though its answer was lost (only `from` writes this sequence): it counts as written.
   */
  async post(lane: string, from: string, n: number, items: SettlementWork[]): Promise<void> {
    try {
      await this.inbox.insertOne({ _id: entryId(lane, from, n), lane, from, n, items, at: new Date() });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
  }

  readEntry(lane: string, from: string, n: number): Promise<InboxEntry | null> {
    return this.inbox.findOne({ _id: entryId(lane, from, n) });
  }

  /** Writes outbox entry n for `to`; false when the number is taken (by a previous holder of the lane): try n + 1. */
  async reply(lane: string, to: string, n: number, replies: Reply[]): Promise<boolean> {
    try {
      await this.outbox.insertOne({ _id: entryId(lane, to, n), lane, to, n, replies, at: new Date() });
      return true;
    } catch (err) {
      if (isDuplicateKey(err)) return false;
      throw err;
    }
  }

  readReplies(lane: string, to: string, n: number): Promise<OutboxEntry | null> {
    return this.outbox.findOne({ _id: entryId(lane, to, n) });
  }

  cursor(lane: string, from: string): Promise<Cursor | null> {
    return this.cursors.findOne({ _id: `${lane}/${from}` });
  }

  async saveCursor(lane: string, from: string, holder: string, read: number, replied: number): Promise<void> {
    await this.cursors.updateOne({ _id: `${lane}/${from}` }, { $set: { lane, from, read, replied, holder, at: new Date() } }, { upsert: true });
  }

  /**
   * Housekeeping (ranges: a scan on FerretDB, so only now and then): mail older than MAIL_RETAIN_MS, and
   * the cursors of processes no longer registered (a live one's cursor says where its next entry is).
   */
  async prune(registered: string[], now = Date.now()): Promise<void> {
    const before = new Date(now - MAIL_RETAIN_MS);
    await Promise.all([
      this.inbox.deleteMany({ at: { $lt: before } }),
      this.outbox.deleteMany({ at: { $lt: before } }),
      this.cursors.deleteMany({ at: { $lt: before }, from: { $nin: registered } }),
    ]);
  }
}
