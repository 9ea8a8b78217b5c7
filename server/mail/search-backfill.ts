import { isDuplicateKey } from '../platform/errors.js';
import type { Logger } from '../platform/logger.js';
import { BUCKET_SIZE, bucketOf, type ClaimDoc } from './inbox-sequence.js';
import type { MessageDoc } from './message-model.js';
import type { MailStore } from './mail-store.js';

// Messages the word index (mail-search.ts) has not seen get their postings here: all the mail stored
// before search existed (once per database: a marker among the claims says it is done), and at every start
// the mail of the last RECENT_MS, which covers a process that died between storing a message and indexing
// it. Indexing is inserts only with deterministic ids, so a message indexed twice is indexed once, and no
// document a user edits is written.

/** Inbox addresses contain "@", so this id never collides with a claim. */
const SEARCH_MARKER = 'search-indexed-v1';
const RECENT_MS = 15 * 60_000;

/**
 * The mail stored since `since`, read with equality queries only (messages have no index on their time,
 * and a scan of all of them at every start of every process grows with the whole database): the inboxes
 * whose change token moved since then (inbox-changes.ts, bumped right after every stored message), each
 * read bucket by bucket from its newest position (inbox-sequence.ts) until a bucket holds only older mail.
 * Not covered: a process that died in the one write between storing a message and bumping its inbox.
 */
async function* storedSince(store: MailStore, since: Date): AsyncGenerator<MessageDoc> {
  for (const inboxId of await store.changes.changedSince(since)) {
    for (let b = Math.floor((await store.sequence.top(inboxId)) / BUCKET_SIZE); b >= 0; b--) {
      const bucket = await store.messages.find({ listBucket: bucketOf(inboxId, b * BUCKET_SIZE) }).lean();
      const recent = bucket.filter((m) => m.createdAt >= since);
      yield* recent;
      if (!recent.length) break;
    }
  }
}

/** Indexes what the word index may lack; returns how many messages it went through. */
export async function indexUnsearched(store: MailStore, log: Logger, now = Date.now()): Promise<number> {
  const claims = store.messages.db.collection<ClaimDoc>('mail_sequence');
  const everything = !(await claims.findOne({ _id: SEARCH_MARKER }, { projection: { _id: 1 } }));
  const messages = everything ? store.messages.find({}).sort({ _id: 1 }).lean().cursor() : storedSince(store, new Date(now - RECENT_MS));
  let count = 0;
  for await (const message of messages) {
    await store.search.index(message);
    count++;
  }
  if (everything) {
    await claims.insertOne({ _id: SEARCH_MARKER, messageId: '', at: new Date(now) }).catch((err) => { if (!isDuplicateKey(err)) throw err; });
  }
  if (count) log.info({ messages: count, all: everything }, 'messages indexed for search at start');
  return count;
}
