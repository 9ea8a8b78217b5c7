import { isDuplicateKey } from '../platform/errors.js';
import type { ClaimDoc } from './inbox-sequence.js';
import type { MailStore } from './mail-store.js';

// Messages stored before list positions existed (inbox-sequence.ts), imported, or stored by an older
// version get theirs here, so every message shows in the paged lists.

/** Inbox addresses contain "@", so this id never collides with a claim. */
const POSITIONS_MARKER = 'positions-assigned-v1';

/**
 * Gives messages without a position theirs, oldest first, once per database: a marker among the claims
 * skips this afterwards. Runs at start-up, before the lists serve.
 */
export async function assignPositionsOnce(store: MailStore): Promise<void> {
  const claims = store.messages.db.collection<ClaimDoc>('mail_sequence');
  if (await claims.findOne({ _id: POSITIONS_MARKER }, { projection: { _id: 1 } })) return;
  await assignMissingPositions(store);
  await claims.insertOne({ _id: POSITIONS_MARKER, messageId: '', at: new Date() }).catch((err) => { if (!isDuplicateKey(err)) throw err; });
}

/** Positions for messages that have none, in time order. */
export async function assignMissingPositions(store: MailStore): Promise<number> {
  const missing = await store.messages.find({ listSeq: { $exists: false } }, { _id: 1, inboxId: 1 }).sort({ sortKey: 1 }).lean();
  for (const message of missing) {
    await store.messages.updateOne({ _id: message._id }, { $set: await store.nextPosition(message.inboxId, message._id) });
  }
  for (const inboxId of new Set(missing.map((m) => m.inboxId))) await store.noteChange(inboxId);
  return missing.length;
}
