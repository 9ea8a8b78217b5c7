import type { Collection } from 'mongodb';
import type { Connection } from 'mongoose';
import { z } from 'zod';
import { AppError } from '../platform/errors.js';
import { findByIds } from '../platform/find-by-ids.js';
import type { Logger } from '../platform/logger.js';
import { limitParam } from '../platform/pagination.js';
import type { MessageDoc } from './message-model.js';
import { HIDDEN_LABELS, label } from './mail-schemas.js';

// Search over an inbox's subject, body, sender and recipients, with a word index kept inside the database
// (FerretDB has no text index; the same collection works on MongoDB). Every stored message adds one
// posting per distinct word (`mail_search_postings`, `_id` per inbox, word and message: a message indexed
// twice is indexed once). Postings are only ever inserted, never updated, which FerretDB makes happen once
// like MongoDB does, so any number of processes index at once.
//
// A query starts from the word that is rarest among the newest mail (one bucket of postings per word read
// to tell): a common one is read bucket by bucket from the newest (an equality on `iwb`), a rare one all at
// once (an equality on `iw`). Each candidate's other words are checked by `_id` (an index hit on any
// engine). The newest SEARCH_WINDOW candidates holding every word are ranked (the fields a word is in:
// subject 4, sender and recipients 2, body 1, summed over words; newer first on ties) and paged.

/** Positions per search bucket: a common word's postings are read a bucket at a time. */
export const SEARCH_BUCKET = 64;
/** At most this many of the newest matches are ranked (documented: a query as common as "the" ranks its newest). */
export const SEARCH_WINDOW = 100;
/** Positions per coarse bucket: a word of middling frequency is read this many positions at a time. */
export const SEARCH_COARSE = 1024;
/** In the newest fine bucket at least this many postings: a dense word, read fine bucket by fine bucket. */
const DENSE = 24;
/** In the newest coarse bucket fewer than this: a rare word, read whole. */
const RARE = 6;
/** A rare word's postings read at most (a word rare in new mail but common in old reads this many). */
const RARE_CAP = 20_000;
const MAX_WORDS_PER_MESSAGE = 400;
const MAX_TEXT_CHARS = 50_000;

const FIELD = { subject: 4, people: 2, body: 1 } as const;

interface PostingDoc { _id: string; iw: string; iwb: string; iwc: string; m: string; s: number; t: number; f: number }

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

/** The words of a query: an address is looked up whole (its parts would match everyone at its domain). */
export function queryWordsOf(q: string): string[] {
  return q.split(/\s+/).flatMap((part) => {
    const words = wordsOf(part);
    return words[0]?.includes('@') ? [words[0]] : words;
  });
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

/** Where the next page starts: the window of matches below position `below` (of an inbox topped at `top`), at `offset` in its ranking. */
interface SearchCursor { top: number; below: number; offset: number }
function encodeToken(c: SearchCursor): string {
  return Buffer.from(`${c.top}:${c.below}:${c.offset}`).toString('base64url');
}
function decodeToken(token: string): SearchCursor {
  const match = /^(\d{1,15}):(\d{1,15}):(\d{1,6})$/.exec(Buffer.from(token, 'base64url').toString('utf8'));
  if (!match) throw new AppError(400, 'invalid_page_token', 'pageToken is malformed; pass nextPageToken from a previous response');
  return { top: Number(match[1]), below: Number(match[2]), offset: Number(match[3]) };
}

export class MailSearch {
  readonly postings: Collection<PostingDoc>;

  private ready: Promise<void> | undefined;

  constructor(conn: Connection, private readonly log: Logger) {
    this.postings = conn.collection<PostingDoc>('mail_search_postings') as unknown as Collection<PostingDoc>;
  }

  /** The indexes queries rely on (an equality each), created once per process before first use; idempotent. */
  ensureIndexes(): Promise<void> {
    this.ready ??= Promise.all([this.postings.createIndex({ iwb: 1 }), this.postings.createIndex({ iwc: 1 }), this.postings.createIndex({ iw: 1 })]).then(() => {}, (err) => {
      this.ready = undefined;
      this.log.warn({ err }, 'search indexes not created; retried on next use');
    });
    return this.ready;
  }

  /** The documents that index one message (what index() inserts; the bench inserts them in bulk). */
  documentsFor(message: Pick<MessageDoc, '_id' | 'inboxId' | 'listSeq' | 'createdAt' | 'subject' | 'text' | 'from' | 'to' | 'cc'>): PostingDoc[] {
    const seq = message.listSeq ?? 0;
    const bucket = Math.floor(seq / SEARCH_BUCKET);
    return [...indexWordsOf(message)].map(([word, mask]) => ({
      _id: key(message.inboxId, word, message._id), iw: key(message.inboxId, word), iwb: key(message.inboxId, word, bucket),
      iwc: key(message.inboxId, word, `c${Math.floor(seq / SEARCH_COARSE)}`),
      m: message._id, s: seq, t: message.createdAt.getTime(), f: mask,
    }));
  }

  /**
   * Indexes a stored message. Inserts only, unordered, duplicates ignored: indexing a message twice, or
   * two messages marking one bucket at once, leaves one of each. A failure is logged, never thrown at the
   * mail path: the message is stored either way.
   */
  async index(message: MessageDoc): Promise<void> {
    await this.ensureIndexes();
    const postings = this.documentsFor(message);
    if (!postings.length) return;
    try {
      await this.postings.insertMany(postings, { ordered: false });
    } catch (err) {
      const errors = (err as { writeErrors?: { code?: number }[] | { code?: number } }).writeErrors;
      const list = Array.isArray(errors) ? errors : errors ? [errors] : [];
      if (list.length && list.every((e) => e.code === 11000)) return; // indexed before: a redelivery

      this.log.error({ err, messageId: message._id }, 'message not indexed for search');
    }
  }

  /**
   * Matches of every query word, best first within windows of SEARCH_WINDOW matches, newest window first
   * (so every match is reached by paging, and the best of recent mail comes first); paged by a token that
   * fixes the inbox's top position at the first page, so mail arriving meanwhile does not shift pages.
   */
  async search(inboxId: string, top: number, query: SearchInput, load: (ids: string[]) => Promise<MessageDoc[]>): Promise<{ items: SearchHit[]; nextPageToken?: string }> {
    await this.ensureIndexes();
    const terms = [...new Set(queryWordsOf(query.q))].slice(0, 8);
    if (!terms.length) throw new AppError(400, 'validation_error', 'query.q: give at least one word of letters or digits');
    let cursor = query.pageToken ? decodeToken(query.pageToken) : { top, below: top + 1, offset: 0 };
    const after = query.after ? new Date(query.after).getTime() : -Infinity;
    const before = query.before ? new Date(query.before).getTime() : Infinity;
    // Labels live on the message (they change), so they are checked on the messages themselves. Hidden
    // mail (blocked, unauthenticated) shows only when asked for by label.
    const wanted = query.labels ?? [];
    const shown = HIDDEN_LABELS.filter((l) => wanted.includes(l));
    const visible = (m: MessageDoc | undefined): m is MessageDoc => !!m && m.inboxId === inboxId && wanted.every((l) => m.labels.includes(l))
      && (!m.labels.some((l) => (HIDDEN_LABELS as readonly string[]).includes(l)) || m.labels.some((l) => (shown as string[]).includes(l)));

    const items: SearchHit[] = [];
    for (let windows = 0; windows < 50 && cursor.below > 0; windows++) {
      const { ranked, full, next } = await this.window(inboxId, terms, cursor.below, after, before);
      let offset = cursor.offset;
      while (items.length <= query.limit && offset < ranked.length) {
        const chunk = ranked.slice(offset, offset + query.limit + 1 - items.length);
        const byId = new Map((await load(chunk.map((c) => c.id))).map((m) => [m._id, m]));
        for (const hit of chunk) {
          const m = byId.get(hit.id);
          if (items.length > query.limit) break;
          offset += 1;
          if (visible(m)) items.push({ message: m, score: hit.score });
        }
      }
      if (items.length > query.limit) {
        // The extra item found is where the next page starts.
        return { items: items.slice(0, query.limit), nextPageToken: encodeToken({ top: cursor.top, below: cursor.below, offset: offset - 1 }) };
      }
      if (!full || next >= cursor.below) break;
      cursor = { top: cursor.top, below: next, offset: 0 };
    }
    return { items };
  }

  /** The newest SEARCH_WINDOW messages below `below` holding every term, ranked; `full` when more may follow. */
  private async window(inboxId: string, terms: string[], below: number, after: number, before: number) {
    const topBucket = Math.floor((below - 1) / SEARCH_BUCKET);
    const topCoarse = Math.floor((below - 1) / SEARCH_COARSE);
    const inWindow = (p: PostingDoc) => p.s < below && p.t >= after && p.t < before;
    const fine = (term: string, bucket: number) => this.postings.find({ iwb: key(inboxId, term, bucket) }).toArray();
    const coarse = (term: string, bucket: number) => this.postings.find({ iwc: key(inboxId, term, `c${bucket}`) }).toArray();
    // The driving word: the one with fewest postings in the newest fine bucket.
    const newest = await Promise.all(terms.map((t) => fine(t, topBucket)));
    const d = newest.reduce((best, list, i) => (list.length < newest[best]!.length ? i : best), 0);
    const driver = terms[d]!;
    const others = terms.filter((_, i) => i !== d);
    const wanted = SEARCH_WINDOW * (others.length ? 2 : 1) + 1;

    const driven: PostingDoc[] = [];
    let exhausted = true;
    /** Reads buckets from `first` down, 1, 2, 4, ... at once, until the window could be full. */
    const walk = async (first: number, read: (b: number) => Promise<PostingDoc[]>) => {
      let next = first;
      for (let width = 1; next >= 0 && driven.length < wanted; width = Math.min(width * 2, 16)) {
        const batch = Array.from({ length: Math.min(width, next + 1) }, (_, i) => next - i);
        next -= batch.length;
        for (const list of await Promise.all(batch.map(read))) driven.push(...list.filter(inWindow));
      }
      exhausted = next < 0;
    };
    if (newest[d]!.length >= DENSE) {
      // Dense: fine bucket by fine bucket from the newest (a few dozen postings each).
      driven.push(...newest[d]!.filter(inWindow));
      await walk(topBucket - 1, (b) => fine(driver, b));
    } else {
      const top = await coarse(driver, topCoarse);
      if (top.length >= RARE) {
        // Middling: coarse bucket by coarse bucket, so a word in one message of ten takes a query or two.
        driven.push(...top.filter(inWindow));
        await walk(topCoarse - 1, (b) => coarse(driver, b));
      } else {
        // Rare: every posting of the word at once.
        driven.push(...(await this.postings.find({ iw: key(inboxId, driver) }).limit(RARE_CAP).toArray()).filter(inWindow));
      }
    }
    driven.sort((a, b) => b.s - a.s);

    // The other words, checked per candidate by `_id`, newest candidates first, until the window is full.
    const found: { id: string; seq: number; score: number }[] = [];
    let checkedAll = true;
    let lowest = below;
    for (let i = 0; i < driven.length; i += 32) {
      if (found.length >= SEARCH_WINDOW) { checkedAll = false; break; }
      const slice = driven.slice(i, i + 32);
      lowest = slice[slice.length - 1]!.s;
      const checked = await Promise.all(slice.map(async (p) => {
        const rest = await Promise.all(others.map((t) => this.postings.findOne({ _id: key(inboxId, t, p.m) })));
        return rest.every(Boolean) ? [p, ...rest as PostingDoc[]] : null;
      }));
      for (const hit of checked) {
        if (!hit) continue;
        if (found.length >= SEARCH_WINDOW) { checkedAll = false; break; }
        found.push({ id: hit[0]!.m, seq: hit[0]!.s, score: hit.reduce((sum, m) => sum + score(m.f), 0) });
      }
    }
    // More may follow when the window filled up, or the buckets read did not reach the oldest; the next
    // window starts below the last candidate this one holds (or, when none matched, below all it looked at).
    const full = !checkedAll || !exhausted || found.length >= SEARCH_WINDOW;
    const next = found.length >= SEARCH_WINDOW || !checkedAll ? Math.min(...found.map((f) => f.seq)) : lowest;
    found.sort((a, b) => b.score - a.score || b.seq - a.seq);
    return { ranked: found, full, next };
  }
}

/** One equality lookup per id (FerretDB reads a whole collection for `$in`). */
export const loadMessages = (messages: { findOne(filter: { _id: string }, projection: Record<string, 0>): { lean(): PromiseLike<MessageDoc | null> } }) =>
  (ids: string[]) => findByIds(ids, (id) => messages.findOne({ _id: id }, { html: 0, bcc: 0 }).lean());
