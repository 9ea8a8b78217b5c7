import type { Readable } from 'node:stream';
import { notFound } from '../platform/errors.js';
import { decodeCursor, pageOf, sortKeyOf } from '../platform/pagination.js';
import type { MessageDoc, ThreadDoc } from './message-model.js';
import type { PageCache } from './page-cache.js';
import { BUCKET_SIZE, bucketOf, decodeListCursor, encodeListCursor } from './inbox-sequence.js';
import type { AttachmentRef } from './attachment-store.js';
import { LIST_FIELDS, type MailStore } from './mail-store.js';
import { HIDDEN_LABELS } from './mail-schemas.js';

// What an identity reads of its inbox: the message list (newest first, by position, kept in memory while
// the inbox is unchanged), one message with its delivery state, its attachments, and the threads. Read-only.

export type MessagePage = { items: MessageDoc[]; nextPageToken?: string };

const THREAD_MESSAGE_CAP = 1000;


export class MailReader {
  /** `pages` keeps message-list pages, each valid while its inbox's change token is (see listMessages). */
  constructor(private readonly store: MailStore, private readonly pages: PageCache<MessagePage>) {}

  /**
   * Newest first, by position (inbox-sequence.ts): bucket by bucket from the top, each an equality query,
   * until the page and one more are found. The token is the position the next page starts below.
   */
  async listMessages(identityId: string, query: { limit: number; labels?: string[]; pageToken?: string }): Promise<MessagePage> {
    const below = query.pageToken ? decodeListCursor(query.pageToken) : undefined;
    const { emailAddress: inboxId } = await this.store.inboxOf(identityId);
    // Pages are also kept in memory under the inbox's change token: while the token is unchanged (one
    // `_id` read, taken before the page so a change after it shows as a new token), the kept page is
    // exactly what the queries would answer, in this process or any other.
    const key = JSON.stringify([inboxId, query.limit, query.labels ?? [], query.pageToken ?? null]);
    const token = await this.store.changes.token(inboxId);
    return this.pages.getOrLoad(key, token, () => this.readPage(inboxId, below, query), (page) => JSON.stringify(page).length);
  }

  private async readPage(inboxId: string, below: number | undefined, query: { limit: number; labels?: string[] }): Promise<MessagePage> {
    const top = below !== undefined ? below - 1 : await this.store.sequence.top(inboxId);
    // Blocked and unverified mail shows only to a list that asks for it by label.
    const shown = HIDDEN_LABELS.filter((l) => query.labels?.includes(l));
    const visible = (m: MessageDoc) => !m.labels.some((l) => (HIDDEN_LABELS as readonly string[]).includes(l)) || m.labels.some((l) => (shown as string[]).includes(l));
    const rows: MessageDoc[] = [];
    for (let bucket = Math.floor(top / BUCKET_SIZE); bucket >= 0 && rows.length <= query.limit; bucket--) {
      const filter: Record<string, unknown> = { listBucket: bucketOf(inboxId, bucket * BUCKET_SIZE) };
      if (query.labels?.length) filter.labels = { $all: query.labels };
      const found = await this.store.messages.find(filter, LIST_FIELDS).lean();
      rows.push(...found.filter((m) => m.inboxId === inboxId && (m.listSeq ?? 0) <= top && visible(m))
        .sort((a, b) => b.listSeq! - a.listSeq!));
    }
    const items = rows.slice(0, query.limit);
    const last = items[items.length - 1];
    return rows.length > query.limit && last ? { items, nextPageToken: encodeListCursor(last.listSeq!) } : { items };
  }

  /** One message as its reader sees it: sent mail carries its delivery state. */
  async readMessage(identityId: string, messageId: string): Promise<MessageDoc> {
    const message = await this.store.getMessage(identityId, messageId);
    if (message.direction !== 'sent') return message;
    const outbound = await this.store.outbound.findById(message._id).lean();
    if (!outbound) return message;
    const { status, attempts, recipients, lastError, updatedAt } = outbound;
    return { ...message, delivery: { status, attempts, recipients, updatedAt, ...(lastError ? { lastError } : {}) } };
  }

  /** An attachment of a message in the caller's inbox, with a stream of its bytes; 404 for anything else. */
  async openAttachment(identityId: string, messageId: string, attachmentId: string): Promise<{ attachment: AttachmentRef; open: () => Readable }> {
    const message = await this.store.getMessage(identityId, messageId);
    const attachment = message.attachments?.find((a) => a.attachmentId === attachmentId);
    if (!attachment) throw notFound('Attachment not found');
    return { attachment, open: () => this.store.attachments.stream(attachment.attachmentId) };
  }

  async listThreads(identityId: string, query: { limit: number; pageToken?: string }) {
    const cursor = query.pageToken ? decodeCursor(query.pageToken) : undefined;
    const { emailAddress: inboxId } = await this.store.inboxOf(identityId);
    const rows = await this.store.threads.find({ inboxId, ...(cursor ? { sortKey: { $lt: sortKeyOf(cursor.at, cursor.id) } } : {}) })
      .sort({ sortKey: -1 }).limit(query.limit + 1).lean();
    const page = pageOf(rows, query.limit, (row) => ({ at: row.updatedAt, id: row._id }));
    const counts = await this.store.messages.aggregate<{ _id: string; n: number }>([
      { $match: { inboxId, threadId: { $in: page.items.map((t) => t._id) }, labels: { $nin: [...HIDDEN_LABELS] } } },
      { $group: { _id: '$threadId', n: { $sum: 1 } } },
    ]);
    const countOf = new Map(counts.map((c) => [c._id, c.n]));
    return { ...page, items: page.items.map((t) => ({ ...t, messageCount: countOf.get(t._id) ?? 0 })) };
  }

  async getThread(identityId: string, threadId: string): Promise<{ thread: ThreadDoc; messages: MessageDoc[] }> {
    const { emailAddress: inboxId } = await this.store.inboxOf(identityId);
    const thread = await this.store.threads.findOne({ _id: threadId, inboxId }).lean();
    if (!thread) throw notFound('Thread not found');
    const visible = { threadId, inboxId, labels: { $nin: [...HIDDEN_LABELS] } };
    const messages = await this.store.messages.find(visible, LIST_FIELDS)
      .sort({ createdAt: 1, _id: 1 }).limit(THREAD_MESSAGE_CAP).lean();
    const messageCount = messages.length < THREAD_MESSAGE_CAP ? messages.length : await this.store.messages.countDocuments(visible);
    return { thread: { ...thread, messageCount }, messages };
  }
}
