import type { Connection, Model } from 'mongoose';
import type { IdentityService } from '../identities/identity-service.js';
import type { IdentityDoc } from '../identities/identity-model.js';
import type { Logger } from '../platform/logger.js';
import { notFound } from '../platform/errors.js';
import { sortKeyOf } from '../platform/pagination.js';
import { messageSchema, outboundSchema, threadSchema, type MessageDoc, type OutboundDoc, type ThreadDoc } from './message-model.js';
import { InboxChanges } from './inbox-changes.js';
import { InboxSequence, listPosition, type ClaimDoc } from './inbox-sequence.js';
import { AttachmentStore } from './attachment-store.js';
import { MailSearch } from './mail-search.js';
import type { Meter } from '../usage/index.js';

// Where mail is kept, and the steps every path that stores or changes a message shares (sending,
// receiving, labelling): finding the caller's inbox, giving a message its list position, telling the
// inbox's list pages they changed, keeping the thread's order. Each path is a module of its own on top.

/** Lists carry neither bodies' html nor the sender-only fields; typed loosely so results stay MessageDoc. */
export const LIST_FIELDS: Record<string, 0> = { html: 0, bcc: 0 };

export function unique<T>(items: T[]): T[] {
  return [...new Set(items)];
}

/** A subject as the activity log shows it: at most 80 characters. */
export const logSubject = (text: string) => (text.length > 80 ? `${text.slice(0, 77)}...` : text);

/** What a message keeps in storage, as usage counts it: its bodies and its attachments. */
export function storedBytes(mail: { text: string; html?: string; attachments: ReadonlyArray<{ content: Buffer } | { size: number }> }): number {
  return Buffer.byteLength(mail.text) + (mail.html ? Buffer.byteLength(mail.html) : 0)
    + mail.attachments.reduce((sum, a) => sum + ('size' in a ? a.size : a.content.length), 0);
}

export class MailStore {
  readonly messages: Model<MessageDoc>;
  readonly threads: Model<ThreadDoc>;
  readonly outbound: Model<OutboundDoc>;
  readonly sequence: InboxSequence;
  readonly changes: InboxChanges;
  readonly attachments: AttachmentStore;
  /** The word index of every stored message (mail-search.ts). */
  readonly search: MailSearch;

  /**
   * @param meter usage of the org: mail sent and received, and the bytes kept (messages and their
   *   attachments), checked against its plan's quotas (server/usage).
   */
  constructor(conn: Connection, private readonly identities: IdentityService, private readonly log: Logger, readonly meter: Meter) {
    this.messages = conn.models.Message ?? conn.model<MessageDoc>('Message', messageSchema, 'messages');
    this.threads = conn.models.Thread ?? conn.model<ThreadDoc>('Thread', threadSchema, 'threads');
    this.outbound = conn.models.MailOutbound ?? conn.model<OutboundDoc>('MailOutbound', outboundSchema, 'mail_outbound');
    this.attachments = new AttachmentStore(conn);
    this.sequence = new InboxSequence(conn.collection<ClaimDoc>('mail_sequence'));
    this.changes = new InboxChanges(conn);
    this.search = new MailSearch(conn, log);
  }

  /** The caller's live identity, whose email address is its inbox; 404 otherwise. */
  async inboxOf(identityId: string): Promise<IdentityDoc> {
    const identity = await this.identities.getLive(identityId);
    if (!identity) throw notFound('Identity not found');
    return identity;
  }

  /** The next position in the inbox for the message `id` (inbox-sequence.ts). */
  async nextPosition(inboxId: string, id: string) {
    return listPosition(inboxId, await this.sequence.next(inboxId, id));
  }

  /**
   * After a write that changes what a list shows. A failed bump is logged, not thrown: the message is
   * stored either way, and kept pages of the inbox then expire by age (PageCache maxAgeMs).
   */
  async noteChange(inboxId: string): Promise<void> {
    await this.changes.bump(inboxId).catch((err) => this.log.error({ err, inboxId }, 'inbox change token not written'));
  }

  async touchThread(identity: IdentityDoc, threadId: string, subject: string, at: Date): Promise<void> {
    // messageCount is counted on read: $inc is not atomic on FerretDB 1.x and would drift under concurrency.
    await this.threads.updateOne({ _id: threadId }, {
      // Both only ever rise, and the key orders exactly like the time, so they stay in step.
      $max: { updatedAt: at, sortKey: sortKeyOf(at, threadId) },
      $setOnInsert: { identityId: identity._id, inboxId: identity.emailAddress, subject, createdAt: at, messageCount: 0 },
    }, { upsert: true });
  }

  /** A message of the caller's inbox by its Message-ID; 404 otherwise. */
  async getMessage(identityId: string, messageId: string): Promise<MessageDoc> {
    const { emailAddress: inboxId } = await this.inboxOf(identityId);
    // An inbox that mailed itself holds a received and a sent copy of one id; the received one is the mail.
    const message = await this.messages.findOne({ inboxId, messageId }).sort({ direction: 1 }).lean();
    if (!message) throw notFound('Message not found');
    return message;
  }
}
