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

/** Inbox addresses contain "@", so these ids never collide with a claim. */
const SEARCH_MARKER = 'search-indexed-v1';
/** Who goes through all the mail: the process that inserts it (the others index recent mail only). */
const SEARCH_WALKER = 'search-indexing-v1';
const RECENT_MS = 15 * 60_000;
/** A walk not finished after this long is taken for dead (its process stopped): another start takes over. */
const WALK_LEASE_MS = 60 * 60_000;

const claimsOf = (store: MailStore) => store.messages.db.collection<ClaimDoc>('mail_sequence');

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
  const claims = claimsOf(store);
  const everything = !(await claims.findOne({ _id: SEARCH_MARKER }, { projection: { _id: 1 } })) && await claimWalk(claims, now);
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

/**
 * Whether this process goes through all the mail: N processes starting together on a database never
 * indexed would each walk it. The walk is claimed by a unique insert; a claim older than WALK_LEASE_MS
 * (its process died mid-walk) is replaced by a claim of the next generation, never deleted and re-inserted.
 */
async function claimWalk(claims: ReturnType<typeof claimsOf>, now: number): Promise<boolean> {
  for (let generation = 0; generation < 100; generation++) {
    const _id = `${SEARCH_WALKER}#${generation}`;
    try {
      await claims.insertOne({ _id, messageId: '', at: new Date(now) });
      return true;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const holder = await claims.findOne({ _id });
      if (holder && now - holder.at.getTime() < WALK_LEASE_MS) return false;
    }
  }
  return false;
}
