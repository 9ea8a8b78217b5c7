import type { Collection } from 'mongodb';
import type { Connection } from 'mongoose';
import { z } from 'zod';
import { AppError } from '../platform/errors.js';
import { findByIds } from '../platform/find-by-ids.js';
import type { Logger } from '../platform/logger.js';
import { limitParam } from '../platform/pagination.js';
import type { MessageDoc } from './message-model.js';
import { HIDDEN_LABELS } from './mail-reader.js';
import { label } from './mail-schemas.js';

// Search over an inbox's subject, body, sender and recipients, with a word index kept inside the database
// (FerretDB has no text index; the same collections work on MongoDB). Every stored message adds one
// posting per distinct word (`mail_search_postings`, a unique `_id` per inbox, word and message, so a
// message indexed twice is indexed once) and marks the word present in its position bucket
// (`mail_search_buckets`, `_id` per inbox, word and bucket: inserted once, never updated). Nothing here is
// ever updated: concurrent writers only insert, which FerretDB makes happen once like MongoDB does.
//
// A query reads, per term, the buckets the word is in (one equality on `iw`), walks the rarest term's
// buckets newest first, reads each bucket's postings of every term (one equality on `iwb` each) and keeps
// the messages holding every term, until it has SEARCH_WINDOW candidates. Those are ranked (the fields a
// term is in: subject 4, sender and recipients 2, body 1, summed over terms; newer first on ties) and paged.

/** Positions per search bucket: a common word's postings are read a bucket at a time. */
export const SEARCH_BUCKET = 1024;
/** At most this many of the newest matches are ranked (documented: a query as common as "the" ranks its newest). */
export const SEARCH_WINDOW = 2000;
const MAX_WORDS_PER_MESSAGE = 400;
const MAX_TEXT_CHARS = 50_000;

const FIELD = { subject: 4, people: 2, body: 1 } as const;

interface PostingDoc { _id: string; iwb: string; m: string; s: number; t: number; f: number }
interface BucketDoc { _id: string; iw: string; b: number }

/** Lower-cased words of 1 to 40 letters or digits (addresses whole, and their domains). */
export function wordsOf(text: string): string[] {
  const out: string[] = [];
  const lower = text.toLowerCase().normalize('NFKD').replace(/\p{M}/gu, '');
  for (const token of lower.split(/[^\p{L}\p{N}@._+-]+/u)) {
    if (!token) continue;
    const at = token.indexOf('@');
    if (at > 0 && at < token.length - 1) {
      const address = token.replace(/^[._+-]+|[._+-]+$/g, '');
      if (address.length <= 254) out.push(address, address.slice(address.indexOf('@') + 1));
    }
    for (const word of token.split(/[@._+-]+/)) if (word.length >= 1 && word.length <= 40 && (word.length > 1 || /\d/.test(word))) out.push(word);
  }
  return out;
}

/** Each distinct word of the message with the fields it appears in (a bitmask of FIELD weights). */
export function indexWordsOf(message: Pick<MessageDoc, 'subject' | 'text' | 'from' | 'to' | 'cc' | 'inboxId'>): Map<string, number> {
  const words = new Map<string, number>();
  const add = (text: string, field: number) => {
    for (const word of wordsOf(text)) if (words.size < MAX_WORDS_PER_MESSAGE || words.has(word)) words.set(word, (words.get(word) ?? 0) | field);
  };
  const self = message.inboxId.toLowerCase();
  add(message.subject, FIELD.subject);
  // The inbox's own address is on nearly every message: it says nothing, so it is not indexed.
  add([...message.from, ...message.to, ...(message.cc ?? [])].filter((a) => a.toLowerCase() !== self).join(' '), FIELD.people);
  add(message.text.slice(0, MAX_TEXT_CHARS), FIELD.body);
  return words;
}

const score = (mask: number) => (mask & FIELD.subject ? 4 : 0) + (mask & FIELD.people ? 2 : 0) + (mask & FIELD.body ? 1 : 0);

export const searchInput = z.object({
  q: z.string().trim().min(1, 'give the words to search for').max(500),
  labels: z.union([z.string(), z.array(z.string())])
    .transform((value) => (Array.isArray(value) ? value : value.split(',')).map((l) => l.trim()).filter(Boolean))
    .pipe(z.array(label).max(20)).optional(),
  after: z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time' }).optional(),
  before: z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time' }).optional(),
  limit: limitParam(20, 100),
  pageToken: z.string().max(200).optional(),
});
export type SearchInput = z.output<typeof searchInput>;

export interface SearchHit { message: MessageDoc; score: number }

const key = (...parts: (string | number)[]) => parts.join('\u001f');

function encodeToken(top: number, offset: number): string {
  return Buffer.from(`${top}:${offset}`).toString('base64url');
}
function decodeToken(token: string): { top: number; offset: number } {
  const match = /^(\d{1,15}):(\d{1,6})$/.exec(Buffer.from(token, 'base64url').toString('utf8'));
  if (!match) throw new AppError(400, 'invalid_page_token', 'pageToken is malformed; pass nextPageToken from a previous response');
  return { top: Number(match[1]), offset: Number(match[2]) };
}

export class MailSearch {
  readonly postings: Collection<PostingDoc>;
  readonly buckets: Collection<BucketDoc>;

  private ready: Promise<void> | undefined;

  constructor(conn: Connection, private readonly log: Logger) {
    this.postings = conn.collection<PostingDoc>('mail_search_postings') as unknown as Collection<PostingDoc>;
    this.buckets = conn.collection<BucketDoc>('mail_search_buckets') as unknown as Collection<BucketDoc>;
  }

  /** The indexes queries rely on (an equality each), created once per process before first use; idempotent. */
  ensureIndexes(): Promise<void> {
    this.ready ??= Promise.all([this.postings.createIndex({ iwb: 1 }), this.buckets.createIndex({ iw: 1 })]).then(() => {}, (err) => {
      this.ready = undefined;
      this.log.warn({ err }, 'search indexes not created; retried on next use');
    });
    return this.ready;
  }

  /** The documents that index one message (what index() inserts; the bench inserts them in bulk). */
  documentsFor(message: Pick<MessageDoc, '_id' | 'inboxId' | 'listSeq' | 'createdAt' | 'subject' | 'text' | 'from' | 'to' | 'cc'>): { postings: PostingDoc[]; buckets: BucketDoc[] } {
    const seq = message.listSeq ?? 0;
    const bucket = Math.floor(seq / SEARCH_BUCKET);
    const postings: PostingDoc[] = [];
    const buckets: BucketDoc[] = [];
    for (const [word, mask] of indexWordsOf(message)) {
      postings.push({ _id: key(message.inboxId, word, message._id), iwb: key(message.inboxId, word, bucket), m: message._id, s: seq, t: message.createdAt.getTime(), f: mask });
      buckets.push({ _id: key(message.inboxId, word, bucket), iw: key(message.inboxId, word), b: bucket });
    }
    return { postings, buckets };
  }

  /**
   * Indexes a stored message. Inserts only, unordered, duplicates ignored: indexing a message twice, or
   * two messages marking one bucket at once, leaves one of each. A failure is logged, never thrown at the
   * mail path: the message is stored either way.
   */
  async index(message: MessageDoc): Promise<void> {
    await this.ensureIndexes();
    const { postings, buckets } = this.documentsFor(message);
    const insert = async <T extends { _id: string }>(collection: Collection<T>, docs: T[]) => {
      if (!docs.length) return;
      try {
        await collection.insertMany(docs as never[], { ordered: false });
      } catch (err) {
        const errors = (err as { writeErrors?: { code?: number }[] | { code?: number } }).writeErrors;
        const list = Array.isArray(errors) ? errors : errors ? [errors] : [];
        if (!list.length || list.some((e) => e.code !== 11000)) throw err;
      }
    };
    try {
      await insert(this.buckets, buckets);
      await insert(this.postings, postings);
    } catch (err) {
      this.log.error({ err, messageId: message._id }, 'message not indexed for search');
    }
  }

  /**
   * Ranked matches of every query word in the inbox, newest SEARCH_WINDOW considered, paged by a token
   * that fixes the inbox's top position at the first page (mail arriving meanwhile does not shift pages).
   */
  async search(inboxId: string, top: number, query: SearchInput, load: (ids: string[]) => Promise<MessageDoc[]>): Promise<{ items: SearchHit[]; nextPageToken?: string }> {
    await this.ensureIndexes();
    const terms = [...new Set(wordsOf(query.q))].slice(0, 8);
    if (!terms.length) throw new AppError(400, 'validation_error', 'query.q: give at least one word of letters or digits');
    const page = query.pageToken ? decodeToken(query.pageToken) : { top, offset: 0 };
    const after = query.after ? new Date(query.after).getTime() : -Infinity;
    const before = query.before ? new Date(query.before).getTime() : Infinity;

    // The buckets each term is in; a term found nowhere means no match at all.
    const present = await Promise.all(terms.map(async (t) => new Set((await this.buckets.find({ iw: key(inboxId, t) }).toArray()).map((b) => b.b))));
    if (present.some((s) => s.size === 0)) return { items: [] };
    const rarest = present.reduce((a, b) => (b.size < a.size ? b : a));
    const walk = [...rarest].filter((b) => present.every((s) => s.has(b)) && b * SEARCH_BUCKET <= page.top).sort((a, b) => b - a);

    const candidates = new Map<string, { seq: number; score: number; t: number }>();
    for (const bucket of walk) {
      const lists = await Promise.all(terms.map((t) => this.postings.find({ iwb: key(inboxId, t, bucket) }).toArray()));
      const [first, ...rest] = lists.sort((a, b) => a.length - b.length);
      const others = rest.map((l) => new Map(l.map((p) => [p.m, p])));
      for (const p of first!) {
        if (p.s > page.top || p.t < after || p.t >= before) continue;
        const matches = others.map((o) => o.get(p.m));
        if (matches.some((m) => !m)) continue;
        candidates.set(p.m, { seq: p.s, t: p.t, score: [p, ...matches].reduce((sum, m) => sum + score(m!.f), 0) });
      }
      if (candidates.size >= SEARCH_WINDOW) break;
    }
    const ranked = [...candidates.entries()].sort(([, a], [, b]) => b.score - a.score || b.seq - a.seq);

    // Labels live on the message (they change), so they are checked on the messages themselves, a chunk at
    // a time, until the page is full. Hidden mail (blocked, unauthenticated) shows only when asked for.
    const wanted = query.labels ?? [];
    const shown = HIDDEN_LABELS.filter((l) => wanted.includes(l));
    const items: SearchHit[] = [];
    let offset = page.offset;
    let skipped = 0;
    while (items.length <= query.limit && offset < ranked.length) {
      const chunk = ranked.slice(offset, offset + Math.max(query.limit * 2, 50));
      const byId = new Map((await load(chunk.map(([id]) => id))).map((m) => [m._id, m]));
      for (const [id, hit] of chunk) {
        offset += 1;
        const m = byId.get(id);
        const visible = m && m.inboxId === inboxId && wanted.every((l) => m.labels.includes(l))
          && (!m.labels.some((l) => (HIDDEN_LABELS as readonly string[]).includes(l)) || m.labels.some((l) => (shown as string[]).includes(l)));
        if (!visible) { skipped += 1; continue; }
        items.push({ message: m, score: hit.score });
        if (items.length > query.limit) { offset -= 1; break; }
      }
    }
    if (skipped > 10_000) this.log.debug({ skipped }, 'search skipped many candidates on labels');
    const more = items.length > query.limit;
    return { items: items.slice(0, query.limit), ...(more ? { nextPageToken: encodeToken(page.top, offset) } : {}) };
  }
}

/** One equality lookup per id (FerretDB reads a whole collection for `$in`). */
export const loadMessages = (messages: { findOne(filter: { _id: string }, projection: Record<string, 0>): { lean(): PromiseLike<MessageDoc | null> } }) =>
  (ids: string[]) => findByIds(ids, (id) => messages.findOne({ _id: id }, { html: 0, bcc: 0 }).lean());
