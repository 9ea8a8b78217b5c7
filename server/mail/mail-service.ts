import type { Connection, Model } from 'mongoose';
import type { ServiceEvents } from '../platform/events.js';
import type { Config } from '../platform/config.js';
import type { ActivityLog } from '../logs/activity-log.js';
import type { IdentityService } from '../identities/identity-service.js';
import type { IdentityDoc } from '../identities/identity-model.js';
import type { JobQueue } from '../platform/jobs.js';
import type { Logger } from '../platform/logger.js';
import { AppError, badRequest, notFound, isDuplicateKey } from '../platform/errors.js';
import { newId, newThreadId, randomHex } from '../platform/ids.js';
import { decodeCursor, pageOf, sortKeyOf } from '../platform/pagination.js';
import { messageSchema, outboundSchema, threadSchema, type MessageDoc, type OutboundDoc, type ThreadDoc } from './message-model.js';
import { MAX_ATTACHMENTS, MAX_LABELS_PER_MESSAGE, type AttachmentInput, type ForwardInput, type LabelsInput, type ReplyInput, type SendInput } from './mail-schemas.js';
import { composeMessage } from './compose.js';
import { InboxChanges } from './inbox-changes.js';
import type { PageCache } from './page-cache.js';
import { BUCKET_SIZE, bucketOf, decodeListCursor, encodeListCursor, InboxSequence, listPosition, type ClaimDoc } from './inbox-sequence.js';
import { DELIVER_JOB, MAIL_RETRY_DELAYS_MS, MailDelivery } from './delivery.js';
import { AttachmentStore, inboundAttachmentId, newAttachmentId, type AttachmentContent, type AttachmentRef } from './attachment-store.js';
import type { DeliveryReport } from './delivery-report.js';
import { MailLists } from './mail-lists.js';
import type { MailEventLog } from './mail-events.js';
import { presentMessage, presentSent } from './present.js';
import type { RecipientResult } from './message-model.js';
import type { Readable } from 'node:stream';

/** A message as it arrived over SMTP, already parsed (see inbound.ts). */
export interface InboundMail {
  messageId: string;
  from: string[];
  to: string[];
  cc: string[];
  replyTo: string[];
  subject: string;
  text: string;
  html?: string;
  extractedText: string;
  inReplyTo?: string;
  references: string[];
  attachments: AttachmentContent[];
  /** Set when the message is a delivery status notification reporting failed recipients (a bounce). */
  deliveryReport?: DeliveryReport;
}

/** A delivery report about a message this inbox sent, and the failures it reports for that message's recipients. */
interface Bounce { original: MessageDoc; failed: DeliveryReport['failed'] }

/** Sent messages larger than this keep their RFC 5322 bytes in GridFS rather than in the outbound record. */
const RAW_INLINE_BYTES = 512 * 1024;

// Lists carry neither bodies' html nor the sender-only fields; typed loosely so results stay MessageDoc.
const LIST_FIELDS: Record<string, 0> = { html: 0, bcc: 0 };
const THREAD_MESSAGE_CAP = 1000;
/** Inbox addresses contain "@", so this id never collides with a claim. */
const POSITIONS_MARKER = 'positions-assigned-v1';

export type MessagePage = { items: MessageDoc[]; nextPageToken?: string };

export const replySubject = (subject: string) => (/^re:/i.test(subject.trim()) ? subject : `Re: ${subject}`);
export const forwardSubject = (subject: string) => (/^(fwd?|fw):/i.test(subject.trim()) ? subject : `Fwd: ${subject}`);

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The lines Gmail, Outlook and Apple Mail put above a forwarded message, so people and parsers recognise it. */
function forwardedHeader(original: MessageDoc): string[] {
  return [
    '---------- Forwarded message ---------',
    `From: ${original.from.join(', ')}`,
    `Date: ${original.createdAt.toUTCString()}`,
    `Subject: ${original.subject}`,
    `To: ${original.to.join(', ')}`,
    ...(original.cc?.length ? [`Cc: ${original.cc.join(', ')}`] : []),
  ];
}

/** Every mail operation; the HTTP routes, the MCP tools and the SMTP listener all call into this. */
export class MailService {
  readonly messages: Model<MessageDoc>;
  readonly threads: Model<ThreadDoc>;
  readonly outbound: Model<OutboundDoc>;
  readonly delivery: MailDelivery;
  readonly sequence: InboxSequence;
  readonly changes: InboxChanges;
  readonly attachments: AttachmentStore;
  readonly lists: MailLists;

  /** `pages` keeps message-list pages, each valid while its inbox's change token is (see listMessages). */
  constructor(conn: Connection, private readonly config: Config, private readonly identities: IdentityService,
    private readonly logs: ActivityLog, private readonly jobs: JobQueue, private readonly pages: PageCache<MessagePage>,
    private readonly log: Logger, readonly events: MailEventLog, serviceEvents?: ServiceEvents) {
    this.messages = conn.models.Message ?? conn.model<MessageDoc>('Message', messageSchema, 'messages');
    this.threads = conn.models.Thread ?? conn.model<ThreadDoc>('Thread', threadSchema, 'threads');
    this.outbound = conn.models.MailOutbound ?? conn.model<OutboundDoc>('MailOutbound', outboundSchema, 'mail_outbound');
    this.attachments = new AttachmentStore(conn);
    this.lists = new MailLists(conn, logs);
    this.delivery = new MailDelivery(this.outbound, config, this.attachments, serviceEvents, (id, settled) => this.announceDelivery(id, settled));
    this.sequence = new InboxSequence(conn.collection<ClaimDoc>('mail_sequence'));
    this.changes = new InboxChanges(conn);
    jobs.define<{ id: string }>(DELIVER_JOB, (data, run) => this.delivery.deliver(data.id, run), {
      retryDelaysMs: MAIL_RETRY_DELAYS_MS,
      onGiveUp: (data, error) => this.delivery.giveUp(data.id, error),
    });
  }

  newMessageId(): string {
    return `<${randomHex(16)}@${this.config.MAIL_DOMAIN}>`;
  }

  private async inboxOf(identityId: string): Promise<IdentityDoc> {
    const identity = await this.identities.getLive(identityId);
    if (!identity) throw notFound('Identity not found');
    return identity;
  }

  /**
   * Gives messages stored before positions existed (inbox-sequence.ts) theirs, oldest first, once per
   * database: a marker among the claims skips this afterwards. Runs at start-up, before the lists serve.
   */
  async assignPositionsOnce(): Promise<void> {
    const claims = this.messages.db.collection<ClaimDoc>('mail_sequence');
    if (await claims.findOne({ _id: POSITIONS_MARKER }, { projection: { _id: 1 } })) return;
    await this.assignMissingPositions();
    await claims.insertOne({ _id: POSITIONS_MARKER, messageId: '', at: new Date() }).catch((err) => { if (!isDuplicateKey(err)) throw err; });
  }

  /** Positions for messages that have none (imported or stored by an older version), in time order. */
  async assignMissingPositions(): Promise<number> {
    const missing = await this.messages.find({ listSeq: { $exists: false } }, { _id: 1, inboxId: 1 }).sort({ sortKey: 1 }).lean();
    for (const message of missing) {
      await this.messages.updateOne({ _id: message._id }, { $set: listPosition(message.inboxId, await this.sequence.next(message.inboxId, message._id)) });
    }
    for (const inboxId of new Set(missing.map((m) => m.inboxId))) await this.noteChange(inboxId);
    return missing.length;
  }

  /**
   * After a write that changes what a list shows. A failed bump is logged, not thrown: the message is
   * stored either way, and kept pages of the inbox then expire by age (PageCache maxAgeMs).
   */
  private async noteChange(inboxId: string): Promise<void> {
    await this.changes.bump(inboxId).catch((err) => this.log.error({ err, inboxId }, 'inbox change token not written'));
  }

  /**
   * Newest first, by position (inbox-sequence.ts): bucket by bucket from the top, each an equality query,
   * until the page and one more are found. The token is the position the next page starts below.
   */
  async listMessages(identityId: string, query: { limit: number; labels?: string[]; pageToken?: string }): Promise<MessagePage> {
    const below = query.pageToken ? decodeListCursor(query.pageToken) : undefined;
    const { emailAddress: inboxId } = await this.inboxOf(identityId);
    // Pages are also kept in memory under the inbox's change token: while the token is unchanged (one
    // `_id` read, taken before the page so a change after it shows as a new token), the kept page is
    // exactly what the queries would answer, in this process or any other.
    const key = JSON.stringify([inboxId, query.limit, query.labels ?? [], query.pageToken ?? null]);
    const token = await this.changes.token(inboxId);
    return this.pages.getOrLoad(key, token, () => this.readPage(inboxId, below, query), (page) => JSON.stringify(page).length);
  }

  private async readPage(inboxId: string, below: number | undefined, query: { limit: number; labels?: string[] }): Promise<MessagePage> {
    const top = below !== undefined ? below - 1 : await this.sequence.top(inboxId);
    // Blocked mail shows only to a list that asks for it by label.
    const showBlocked = query.labels?.includes('blocked') ?? false;
    const rows: MessageDoc[] = [];
    for (let bucket = Math.floor(top / BUCKET_SIZE); bucket >= 0 && rows.length <= query.limit; bucket--) {
      const filter: Record<string, unknown> = { listBucket: bucketOf(inboxId, bucket * BUCKET_SIZE) };
      if (query.labels?.length) filter.labels = { $all: query.labels };
      const found = await this.messages.find(filter, LIST_FIELDS).lean();
      rows.push(...found.filter((m) => m.inboxId === inboxId && (m.listSeq ?? 0) <= top && (showBlocked || !m.labels.includes('blocked')))
        .sort((a, b) => b.listSeq! - a.listSeq!));
    }
    const items = rows.slice(0, query.limit);
    const last = items[items.length - 1];
    return rows.length > query.limit && last ? { items, nextPageToken: encodeListCursor(last.listSeq!) } : { items };
  }

  async getMessage(identityId: string, messageId: string): Promise<MessageDoc> {
    const { emailAddress: inboxId } = await this.inboxOf(identityId);
    // An inbox that mailed itself holds a received and a sent copy of one id; the received one is the mail.
    const message = await this.messages.findOne({ inboxId, messageId }).sort({ direction: 1 }).lean();
    if (!message) throw notFound('Message not found');
    return message;
  }

  /** One message as its reader sees it: sent mail carries its delivery state. */
  async readMessage(identityId: string, messageId: string): Promise<MessageDoc> {
    const message = await this.getMessage(identityId, messageId);
    if (message.direction !== 'sent') return message;
    const outbound = await this.outbound.findById(message._id).lean();
    if (!outbound) return message;
    const { status, attempts, recipients, lastError, updatedAt } = outbound;
    return { ...message, delivery: { status, attempts, recipients, updatedAt, ...(lastError ? { lastError } : {}) } };
  }

  async send(identityId: string, input: SendInput): Promise<MessageDoc> {
    const identity = await this.inboxOf(identityId);
    const message = await this.storeOutgoing(identity, {
      to: input.to, cc: input.cc ?? [], bcc: input.bcc ?? [], subject: input.subject, text: input.text, html: input.html,
      threadId: newThreadId(), references: [], attachments: this.decodeAttachments(input.attachments),
    });
    await this.logs.record({
      orgId: identity.orgId, identityId, action: 'mail.sent', category: 'mail', description: `Mail sent: ${truncate(message.subject)}`,
      targetType: 'message', targetId: message.messageId,
      metadata: { threadId: message.threadId, to: message.to, cc: message.cc, bccCount: message.bcc.length, attachments: message.attachments?.length ?? 0 },
    });
    return message;
  }

  async reply(identityId: string, originalId: string, input: ReplyInput): Promise<MessageDoc> {
    const identity = await this.inboxOf(identityId);
    const original = await this.getMessage(identityId, originalId);
    const to = original.direction === 'received'
      ? (original.replyTo.length ? original.replyTo : original.from)
      : original.to; // following up on our own message goes to the same people
    if (!to.length) throw badRequest('The original message has no sender address to reply to');
    // Reply-all: everyone else the original went to, on Cc, never this inbox itself nor anyone already on To.
    const self = identity.emailAddress.toLowerCase();
    const onTo = new Set(to.map((a) => a.toLowerCase()));
    const cc = input.replyAll
      ? uniqueAddresses([...original.to, ...(original.cc ?? [])]).filter((a) => a.toLowerCase() !== self && !onTo.has(a.toLowerCase()))
      : [];
    const chain = original.references.length ? original.references : original.inReplyTo ? [original.inReplyTo] : [];
    const message = await this.storeOutgoing(identity, {
      to, cc, bcc: [], subject: replySubject(original.subject), text: input.text, html: input.html,
      threadId: original.threadId, inReplyTo: original.messageId, references: [...chain, original.messageId],
      attachments: this.decodeAttachments(input.attachments),
    });
    await this.logs.record({
      orgId: identity.orgId, identityId, action: 'mail.replied', category: 'mail', description: `Replied: ${truncate(message.subject)}`,
      targetType: 'message', targetId: message.messageId,
      metadata: { threadId: message.threadId, inReplyTo: original.messageId, to, cc, replyAll: !!input.replyAll },
    });
    return message;
  }

  /**
   * Forwards a message with all its attachments, under a note, as a new conversation: a new thread, and
   * no In-Reply-To or References, so the recipients' mail programs do not file it into the old one.
   */
  async forward(identityId: string, originalId: string, input: ForwardInput): Promise<MessageDoc> {
    const identity = await this.inboxOf(identityId);
    const original = await this.getMessage(identityId, originalId);
    const carried = await Promise.all((original.attachments ?? []).map(async (a) => ({
      filename: a.filename, contentType: a.contentType, content: await this.attachments.read(a.attachmentId),
      ...(a.inline && a.contentId ? { contentId: a.contentId, inline: true } : {}),
    })));
    const attachments = this.decodeAttachments(input.attachments, carried);
    const header = forwardedHeader(original);
    const note = input.text ?? '';
    const text = `${note}${note ? '\n\n' : ''}${header.join('\n')}\n\n${original.text}`;
    const html = original.html !== undefined || input.html !== undefined
      ? `${input.html ?? (note ? `<p>${escapeHtml(note).replace(/\n/g, '<br>')}</p>` : '')}<div>${header.map(escapeHtml).join('<br>')}</div><br>${original.html ?? `<pre>${escapeHtml(original.text)}</pre>`}`
      : undefined;
    const message = await this.storeOutgoing(identity, {
      to: input.to, cc: input.cc ?? [], bcc: input.bcc ?? [], subject: forwardSubject(original.subject), text, html,
      threadId: newThreadId(), references: [], attachments,
    });
    await this.logs.record({
      orgId: identity.orgId, identityId, action: 'mail.forwarded', category: 'mail', description: `Forwarded: ${truncate(message.subject)}`,
      targetType: 'message', targetId: message.messageId,
      metadata: { threadId: message.threadId, original: original.messageId, to: message.to, cc: message.cc, bccCount: message.bcc.length, attachments: attachments.length },
    });
    return message;
  }

  /**
   * Base64 (already checked by the schema) to bytes, refused with 413 when they total more than
   * MAIL_MAX_ATTACHMENT_BYTES: the message must still fit the SMTP size limit once encoded again.
   */
  decodeAttachments(input: AttachmentInput[] | undefined, carried: AttachmentContent[] = []): AttachmentContent[] {
    const decoded = [...carried, ...(input ?? []).map((a) => ({
      filename: a.filename, contentType: a.contentType, content: Buffer.from(a.content, 'base64'),
      ...(a.contentId ? { contentId: a.contentId, inline: true } : {}),
    }))];
    if (decoded.length > MAX_ATTACHMENTS) throw badRequest(`A message can carry at most ${MAX_ATTACHMENTS} attachments; this one has ${decoded.length}`);
    const total = decoded.reduce((sum, a) => sum + a.content.length, 0);
    const cap = this.config.MAIL_MAX_ATTACHMENT_BYTES;
    if (total > cap) {
      throw new AppError(413, 'attachments_too_large', `Attachments total ${total} bytes; a message may carry at most ${cap} bytes (${(cap / 1048576).toFixed(1)} MiB) of attachments, decoded`, { totalBytes: total, maxBytes: cap });
    }
    return decoded;
  }

  /** An attachment of a message in the caller's inbox, with a stream of its bytes; 404 for anything else. */
  async openAttachment(identityId: string, messageId: string, attachmentId: string): Promise<{ attachment: AttachmentRef; open: () => Readable }> {
    const message = await this.getMessage(identityId, messageId);
    const attachment = message.attachments?.find((a) => a.attachmentId === attachmentId);
    if (!attachment) throw notFound('Attachment not found');
    return { attachment, open: () => this.attachments.stream(attachment.attachmentId) };
  }

  /** 403 recipient_blocked, naming every refused address, before anything is stored or sent. */
  private async refuseBlockedRecipients(identity: IdentityDoc, recipients: string[], subject: string): Promise<void> {
    const policy = await this.lists.policyFor(identity);
    const refused = recipients.flatMap((address) => {
      const why = policy.refusesTo(address);
      return why ? [{ address, why }] : [];
    });
    if (!refused.length) return;
    await this.logs.record({
      orgId: identity.orgId, identityId: identity._id, action: 'mail.send_blocked', category: 'mail', severity: 'warning', status: 'failure',
      description: `Not sent ("${truncate(subject)}"): ${refused.map((r) => r.address).join(', ')} blocked by the send lists`,
      targetType: 'message', metadata: { recipients: refused.map((r) => r.address) },
    });
    throw new AppError(403, 'recipient_blocked', `Not sent: ${refused.map((r) => r.why).join('; ')}`, { recipients: refused.map((r) => r.address) });
  }

  private async storeOutgoing(identity: IdentityDoc, mail: {
    to: string[]; cc: string[]; bcc: string[]; subject: string; text: string; html?: string;
    threadId: string; inReplyTo?: string; references: string[]; attachments: AttachmentContent[];
  }): Promise<MessageDoc> {
    const recipients = unique([...mail.to, ...mail.cc, ...mail.bcc].map((a) => a.toLowerCase()));
    if (recipients.length > this.config.SMTP_MAX_RECIPIENTS) {
      throw badRequest(`A message can have at most ${this.config.SMTP_MAX_RECIPIENTS} recipients (to, cc and bcc together)`);
    }
    await this.refuseBlockedRecipients(identity, recipients, mail.subject);
    const id = newId('msg');
    const position = listPosition(identity.emailAddress, await this.sequence.next(identity.emailAddress, id));
    const createdAt = new Date();
    const messageId = this.newMessageId();
    const raw = await composeMessage({
      messageId, from: { name: identity.displayName, address: identity.emailAddress }, to: mail.to, cc: mail.cc,
      subject: mail.subject, text: mail.text, html: mail.html, inReplyTo: mail.inReplyTo, references: mail.references, date: createdAt,
      attachments: mail.attachments,
    });
    // The sender's copy lists its attachments too (downloadable, forwardable), stored before anything refers to them.
    const attachments = await Promise.all(mail.attachments.map((a) => this.attachments.put(newAttachmentId(), a, { inboxId: identity.emailAddress })));
    const rawFileId = raw.length > RAW_INLINE_BYTES ? await this.attachments.putRaw(id, raw) : undefined;
    const doc: MessageDoc = {
      _id: id, messageId, identityId: identity._id, inboxId: identity.emailAddress, threadId: mail.threadId,
      direction: 'sent', from: [identity.emailAddress], to: mail.to, cc: mail.cc, bcc: mail.bcc, replyTo: [],
      subject: mail.subject, text: mail.text, html: mail.html, inReplyTo: mail.inReplyTo, references: mail.references,
      labels: ['sent'], ...(attachments.length ? { attachments } : {}), createdAt, sortKey: sortKeyOf(createdAt, id), ...position,
    };
    const delivery = { status: 'queued' as const, attempts: 0, recipients: recipients.map((address) => ({ address, status: 'pending' as const })), updatedAt: createdAt };
    // The outbound record first: a crash before the message is stored leaves only an orphan nobody sends.
    await this.outbound.create({ _id: id, from: identity.emailAddress, ...(rawFileId ? { raw: '', rawFileId } : { raw }), ...delivery });
    await this.messages.create(doc);
    await this.noteChange(doc.inboxId);
    await this.touchThread(identity, mail.threadId, mail.subject, createdAt);
    await this.jobs.now(DELIVER_JOB, { id });
    // Counts only: addresses are the agents' correspondents, not the operator's business.
    this.log.info({ messageId: id, identityId: identity._id, recipients: recipients.length }, 'mail queued');
    await this.events.emit(identity, 'message.sent', { message: presentSent(doc) });
    return { ...doc, delivery };
  }

  /**
   * message.delivered and message.bounced for each recipient the delivery worker settled: once each
   * (the once-key), however often the worker records the same outcome.
   */
  private async announceDelivery(id: string, settled: RecipientResult[]): Promise<void> {
    const message = await this.messages.findById(id, LIST_FIELDS).lean();
    const identity = message && await this.identities.getLive(message.identityId);
    if (!message || !identity) return;
    for (const r of settled) {
      if (r.status === 'delivered') {
        await this.events.emit(identity, 'message.delivered', { messageId: message.messageId, threadId: message.threadId, recipient: r.address }, `delivered:${id}:${r.address}`);
      } else if (r.status === 'failed') {
        await this.events.emit(identity, 'message.bounced', {
          messageId: message.messageId, threadId: message.threadId, recipient: r.address, source: 'smtp',
          status: /\b([245]\.\d{1,3}\.\d{1,3})\b/.exec(r.error ?? '')?.[1] ?? '5.0.0', diagnostic: r.error ?? null,
        }, `bounced:${id}:${r.address}`);
      }
    }
  }

  /**
   * The message this inbox sent that a delivery status notification reports on, and the failures it
   * reports for that message's own recipients only: any recipient sees a Message-ID, and a report about
   * an address the message never went to is no bounce of ours.
   */
  private async bounceOf(identity: IdentityDoc, mail: InboundMail): Promise<Bounce | undefined> {
    const report = mail.deliveryReport;
    if (!report?.originalMessageId) return undefined;
    const original = await this.messages.findOne({ inboxId: identity.emailAddress, messageId: report.originalMessageId, direction: 'sent' }, LIST_FIELDS).lean();
    if (!original) return undefined;
    // Bcc is not among the list fields: the outbound record names every recipient the message went to.
    const sentTo = new Set(((await this.outbound.findById(original._id, { recipients: 1 }).lean())?.recipients ?? []).map((r) => r.address.toLowerCase()));
    return { original, failed: report.failed.filter((f) => sentTo.has(f.address.toLowerCase())) };
  }

  /** message.bounced for each failed recipient, linked to the original, once the report itself is stored (a redelivered report announces nothing again). */
  private async announceBounce(identity: IdentityDoc, mail: InboundMail, { original, failed: reported }: Bounce): Promise<void> {
    if (reported.length === 0) return;
    for (const failed of reported) {
      await this.events.emit(identity, 'message.bounced', {
        messageId: original.messageId, threadId: original.threadId, recipient: failed.address, source: 'dsn',
        status: failed.status, diagnostic: failed.diagnostic ?? null, bounceMessageId: mail.messageId,
      }, `bounced:${original._id}:${failed.address}`);
    }
    this.logs.recordSoon({
      orgId: identity.orgId, identityId: identity._id, action: 'mail.bounced', category: 'mail', severity: 'warning', status: 'failure',
      description: `"${truncate(original.subject)}" bounced for ${reported.map((f) => f.address).join(', ')}`, targetType: 'message', targetId: original.messageId,
      metadata: { recipients: reported.map((f) => f.address), bounceMessageId: mail.messageId },
    });
  }

  /** Stores a message that arrived over SMTP for one local inbox; a redelivery of the same id is a no-op. */
  async receive(identity: IdentityDoc, mail: InboundMail): Promise<{ stored: boolean; threadId: string; blocked: boolean }> {
    const inboxId = identity.emailAddress;
    // Mail from a blocked sender (or from outside a non-empty allow list) is kept, but out of sight: labelled
    // `blocked` instead of `unread`, left out of default lists and threads, announced to nobody.
    const policy = await this.lists.policyFor(identity);
    const refusal = (mail.from.length ? mail.from : ['']).map((a) => policy.refusesFrom(a)).find((why) => why !== null) ?? null;
    const blocked = refusal !== null;
    // A bounce joins the thread of the message that bounced, so the conversation shows why it stopped.
    const bounce = mail.deliveryReport ? await this.bounceOf(identity, mail) : undefined;
    const bouncedThread = bounce?.original.threadId;
    const threadId = bouncedThread ?? (await this.threadOfReferences(inboxId, [...mail.references, ...(mail.inReplyTo ? [mail.inReplyTo] : [])])) ?? newThreadId();
    const id = newId('msg');
    const position = listPosition(inboxId, await this.sequence.next(inboxId, id));
    const createdAt = new Date();
    const attachments = await Promise.all(mail.attachments.map((a, i) => this.attachments.put(inboundAttachmentId(mail.messageId, i, a.content), a, { inboxId })));
    const stored: MessageDoc = {
      _id: id, messageId: mail.messageId, identityId: identity._id, inboxId, threadId, direction: 'received',
      from: mail.from, to: mail.to, cc: mail.cc, bcc: [], replyTo: mail.replyTo, subject: mail.subject, text: mail.text,
      html: mail.html, extractedText: mail.extractedText, inReplyTo: mail.inReplyTo, references: mail.references,
      labels: [...(blocked ? ['received', 'blocked'] : ['received', 'unread']), ...(bouncedThread ? ['bounce'] : [])],
      ...(attachments.length ? { attachments } : {}), createdAt, sortKey: sortKeyOf(createdAt, id), ...position,
    };
    try {
      await this.messages.create(stored);
    } catch (err) {
      if (isDuplicateKey(err)) return { stored: false, threadId, blocked };
      throw err;
    }
    await this.noteChange(inboxId);
    if (!blocked) await this.touchThread(identity, threadId, mail.subject, createdAt);
    this.logs.recordSoon(blocked ? {
      orgId: identity.orgId, identityId: identity._id, action: 'mail.received_blocked', category: 'mail', severity: 'warning',
      description: `${identity.emailAddress} received "${mail.subject.slice(0, 80)}" from ${mail.from}, blocked: ${refusal}`, targetType: 'message', targetId: id,
    } : {
      orgId: identity.orgId, identityId: identity._id, action: 'mail.received', category: 'mail',
      description: `${identity.emailAddress} received "${mail.subject.slice(0, 80)}" from ${mail.from}`, targetType: 'message', targetId: id,
    });
    await this.events.emit(identity, blocked ? 'message.received.blocked' : 'message.received', { message: presentMessage(stored) });
    if (bounce) await this.announceBounce(identity, mail, bounce);
    return { stored: true, threadId, blocked };
  }

  /** A reply joins the thread of the newest message in this inbox that it names. */
  private async threadOfReferences(inboxId: string, ids: string[]): Promise<string | undefined> {
    if (!ids.length) return undefined;
    const known = await this.messages.findOne({ inboxId, messageId: { $in: unique(ids).slice(-100) } }, { threadId: 1 })
      .sort({ createdAt: -1 }).lean();
    return known?.threadId;
  }

  private async touchThread(identity: IdentityDoc, threadId: string, subject: string, at: Date): Promise<void> {
    // messageCount is counted on read: $inc is not atomic on FerretDB 1.x and would drift under concurrency.
    await this.threads.updateOne({ _id: threadId }, {
      // Both only ever rise, and the key orders exactly like the time, so they stay in step.
      $max: { updatedAt: at, sortKey: sortKeyOf(at, threadId) },
      $setOnInsert: { identityId: identity._id, inboxId: identity.emailAddress, subject, createdAt: at, messageCount: 0 },
    }, { upsert: true });
  }

  /**
   * Adds then removes labels with compare-and-set on the label array, so concurrent edits never lose one on
   * MongoDB (FerretDB 1.x does not make the compare-and-set atomic; there, racing edits can still lose one).
   */
  async updateLabels(identityId: string, messageId: string, change: LabelsInput): Promise<MessageDoc> {
    const add = unique(change.addLabels ?? []);
    const remove = new Set(change.removeLabels ?? []);
    const both = add.filter((l) => remove.has(l));
    if (both.length) throw badRequest(`A label cannot be both added and removed: ${both.join(', ')}`);
    for (let attempt = 0; attempt < 10; attempt++) {
      const current = await this.getMessage(identityId, messageId);
      const labels = unique([...current.labels, ...add]).filter((l) => !remove.has(l));
      if (labels.length > MAX_LABELS_PER_MESSAGE) throw badRequest(`A message can carry at most ${MAX_LABELS_PER_MESSAGE} labels`);
      const result = await this.messages.updateOne({ _id: current._id, labels: current.labels }, { $set: { labels } });
      if (!result.matchedCount) continue;
      await this.noteChange(current.inboxId);
      const updated = { ...current, labels };
      const identity = await this.inboxOf(identityId);
      await this.logs.record({
        orgId: identity.orgId, identityId, action: 'mail.labels_updated', category: 'mail',
        description: `Labels of "${truncate(updated.subject)}" updated`, targetType: 'message', targetId: updated.messageId,
        metadata: { addLabels: add, removeLabels: [...remove], labels },
      });
      return updated;
    }
    throw new AppError(409, 'conflict', 'The labels changed concurrently too often; retry');
  }

  async listThreads(identityId: string, query: { limit: number; pageToken?: string }) {
    const cursor = query.pageToken ? decodeCursor(query.pageToken) : undefined;
    const { emailAddress: inboxId } = await this.inboxOf(identityId);
    const rows = await this.threads.find({ inboxId, ...(cursor ? { sortKey: { $lt: sortKeyOf(cursor.at, cursor.id) } } : {}) })
      .sort({ sortKey: -1 }).limit(query.limit + 1).lean();
    const page = pageOf(rows, query.limit, (row) => ({ at: row.updatedAt, id: row._id }));
    const counts = await this.messages.aggregate<{ _id: string; n: number }>([
      { $match: { inboxId, threadId: { $in: page.items.map((t) => t._id) }, labels: { $ne: 'blocked' } } },
      { $group: { _id: '$threadId', n: { $sum: 1 } } },
    ]);
    const countOf = new Map(counts.map((c) => [c._id, c.n]));
    return { ...page, items: page.items.map((t) => ({ ...t, messageCount: countOf.get(t._id) ?? 0 })) };
  }

  async getThread(identityId: string, threadId: string): Promise<{ thread: ThreadDoc; messages: MessageDoc[] }> {
    const { emailAddress: inboxId } = await this.inboxOf(identityId);
    const thread = await this.threads.findOne({ _id: threadId, inboxId }).lean();
    if (!thread) throw notFound('Thread not found');
    const visible = { threadId, inboxId, labels: { $ne: 'blocked' } };
    const messages = await this.messages.find(visible, LIST_FIELDS)
      .sort({ createdAt: 1, _id: 1 }).limit(THREAD_MESSAGE_CAP).lean();
    const messageCount = messages.length < THREAD_MESSAGE_CAP ? messages.length : await this.messages.countDocuments(visible);
    return { thread: { ...thread, messageCount }, messages };
  }
}

function unique<T>(items: T[]): T[] {
  return [...new Set(items)];
}

/** Addresses once each, compared without case, in their first spelling. */
function uniqueAddresses(addresses: string[]): string[] {
  const seen = new Set<string>();
  return addresses.filter((a) => !seen.has(a.toLowerCase()) && seen.add(a.toLowerCase()));
}

const truncate = (text: string) => (text.length > 80 ? `${text.slice(0, 77)}...` : text);
