import { Schema, type Connection, type Model } from 'mongoose';
import { isDuplicateKey } from '../platform/errors.js';
import { randomHex } from '../platform/ids.js';

interface InboxChangeDoc { _id: string; token: string; at: Date }

const schema = new Schema<InboxChangeDoc>({ _id: String, token: { type: String, required: true }, at: { type: Date, required: true } }, { versionKey: false });

/**
 * One small document per inbox whose token is replaced, with a fresh random value, after every write that
 * changes what a message list shows (a message stored, labels edited). A page read under one token is
 * still exact while the token is unchanged, in any process. Reading the token is one `_id` read.
 *
 * Any writer replaces the whole token, so two racing bumps cannot undo each other the way FerretDB's
 * whole-document updates undo concurrent edits of different fields: whichever lands last, the token
 * differs from the one a reader saw before both.
 */
export class InboxChanges {
  private readonly changes: Model<InboxChangeDoc>;

  constructor(conn: Connection) {
    this.changes = conn.models.InboxChange ?? conn.model<InboxChangeDoc>('InboxChange', schema, 'inbox_changes');
  }

  /** The inbox's current token; null before its first change. */
  async token(inboxId: string): Promise<string | null> {
    return (await this.changes.findById(inboxId).lean())?.token ?? null;
  }

  /** The inboxes changed at or after `since` (one small document per inbox is read; no index is kept for this). */
  async changedSince(since: Date): Promise<string[]> {
    return (await this.changes.find({ at: { $gte: since } }, { _id: 1 }).lean()).map((c) => c._id);
  }

  /** Call after the change is stored, never before: a reader must not pair the new token with old data. */
  async bump(inboxId: string): Promise<void> {
    const update = { $set: { token: randomHex(8), at: new Date() } };
    try {
      await this.changes.updateOne({ _id: inboxId }, update, { upsert: true });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      await this.changes.updateOne({ _id: inboxId }, update); // a concurrent first bump created it
    }
  }
}
