import { AppError, badRequest } from '../platform/errors.js';
import type { Config } from '../platform/config.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { IdentityDoc } from '../identities/identity-model.js';
import type { IdentityService } from '../identities/identity-service.js';
import type { JobQueue } from '../platform/jobs.js';
import type { Logger } from '../platform/logger.js';
import type { ServiceEvents } from '../platform/events.js';
import { newId, newThreadId, randomHex } from '../platform/ids.js';
import { sortKeyOf } from '../platform/pagination.js';
import type { MessageDoc, RecipientResult } from './message-model.js';
import { MAX_ATTACHMENTS, type AttachmentInput, type ForwardInput, type ReplyInput, type SendInput } from './mail-schemas.js';
import { composeMessage } from './compose.js';
import { DELIVER_JOB, MAIL_RETRY_DELAYS_MS, MailDelivery, type MailDomainsForDelivery } from './delivery.js';
import { newAttachmentId, type AttachmentContent } from './attachment-store.js';
import type { MailLists } from './mail-lists.js';
import type { MailEventLog } from './mail-events.js';
import type { MailAuthenticator } from './mail-auth.js';
import { presentSent } from './present.js';
import { LIST_FIELDS, logSubject, storedBytes, unique, type MailStore } from './mail-store.js';

// Mail an identity sends: a new message, a reply (to the sender, or to all) and a forward with its
// attachments, each composed, stored as the sender's copy and queued for SMTP delivery (delivery.ts), and
// the recipients' outcomes announced as message.delivered and message.bounced when the delivery records them.

/** Sent messages larger than this keep their RFC 5322 bytes in GridFS rather than in the outbound record. */
const RAW_INLINE_BYTES = 512 * 1024;

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

/** Addresses once each, compared without case, in their first spelling. */
function uniqueAddresses(addresses: string[]): string[] {
  const seen = new Set<string>();
  return addresses.filter((a) => !seen.has(a.toLowerCase()) && seen.add(a.toLowerCase()));
}

export interface SendOptions {
  /**
   * The sent message's own id, chosen by the caller: its outbound record is inserted under it first, so a
   * second send with the same id fails with a duplicate key before anything is stored or queued (a draft
   * sent once, whoever sends it).
   */
  id?: string;
}

/** Addresses on custom domains (domains/domain-service.ts): which are an identity's, while their domain is verified. */
export interface CustomAddresses {
  firstOwned(identityId: string, candidates: string[]): Promise<string | undefined>;
}

export class OutgoingMail {
  /** Hands stored messages to SMTP (the delivery job's worker). */
  readonly delivery: MailDelivery;

  constructor(private readonly store: MailStore, private readonly config: Config, private readonly identities: IdentityService,
    private readonly lists: MailLists, private readonly logs: ActivityLog, private readonly jobs: JobQueue,
    private readonly log: Logger, private readonly events: MailEventLog, authenticator: MailAuthenticator,
    private readonly addresses: CustomAddresses & MailDomainsForDelivery, serviceEvents?: ServiceEvents) {
    this.delivery = new MailDelivery(store.outbound, config, store.attachments, authenticator, addresses, serviceEvents, (id, settled) => this.announceDelivery(id, settled));
    jobs.define<{ id: string }>(DELIVER_JOB, (data, run) => this.delivery.deliver(data.id, run), {
      retryDelaysMs: MAIL_RETRY_DELAYS_MS,
      onGiveUp: (data, error) => this.delivery.giveUp(data.id, error),
    });
  }

  newMessageId(): string {
    return `<${randomHex(16)}@${this.config.MAIL_DOMAIN}>`;
  }

  /**
   * The From of a message the identity sends: the address it asks for, if it is its own (its inbox
   * address, or an address of its on a domain verified now); by default its inbox address or, for a reply
   * to mail sent to one of its custom addresses, that address.
   */
  async fromAddress(identity: IdentityDoc, asked?: string, original?: MessageDoc): Promise<string> {
    const inbox = identity.emailAddress.toLowerCase();
    if (!asked) {
      const addressed = original?.direction === 'received' ? [...original.to, ...(original.cc ?? [])].filter((a) => a.toLowerCase() !== inbox) : [];
      return (await this.addresses.firstOwned(identity._id, addressed)) ?? identity.emailAddress;
    }
    if (asked.toLowerCase() === inbox) return identity.emailAddress;
    const own = await this.addresses.firstOwned(identity._id, [asked]);
    if (own) return own;
    throw new AppError(403, 'from_not_allowed', `You can send only as your own addresses: ${asked} is not one of them, or its domain is not verified now (GET /v0/mail/addresses lists yours)`);
  }

  async send(identityId: string, input: SendInput, options: SendOptions = {}): Promise<MessageDoc> {
    const identity = await this.store.inboxOf(identityId);
    const from = await this.fromAddress(identity, input.from);
    const message = await this.storeOutgoing(identity, from, {
      to: input.to, cc: input.cc ?? [], bcc: input.bcc ?? [], subject: input.subject, text: input.text, html: input.html,
      threadId: newThreadId(), references: [], attachments: this.decodeAttachments(input.attachments),
    }, options);
    await this.logs.record({
      orgId: identity.orgId, identityId, action: 'mail.sent', category: 'mail', description: `Mail sent: ${logSubject(message.subject)}`,
      targetType: 'message', targetId: message.messageId,
      metadata: { threadId: message.threadId, to: message.to, cc: message.cc, bccCount: message.bcc.length, attachments: message.attachments?.length ?? 0 },
    });
    return message;
  }

  async reply(identityId: string, originalId: string, input: ReplyInput, options: SendOptions = {}): Promise<MessageDoc> {
    const identity = await this.store.inboxOf(identityId);
    const original = await this.store.getMessage(identityId, originalId);
    const from = await this.fromAddress(identity, input.from, original);
    const to = original.direction === 'received'
      ? (original.replyTo.length ? original.replyTo : original.from)
      : original.to; // following up on our own message goes to the same people
    if (!to.length) throw badRequest('The original message has no sender address to reply to');
    // Reply-all: everyone else the original went to, on Cc, never this inbox itself nor anyone already on To.
    const self = new Set([identity.emailAddress.toLowerCase(), from.toLowerCase()]);
    const onTo = new Set(to.map((a) => a.toLowerCase()));
    const cc = input.replyAll
      ? uniqueAddresses([...original.to, ...(original.cc ?? [])]).filter((a) => !self.has(a.toLowerCase()) && !onTo.has(a.toLowerCase()))
      : [];
    const chain = original.references.length ? original.references : original.inReplyTo ? [original.inReplyTo] : [];
    const message = await this.storeOutgoing(identity, from, {
      to, cc, bcc: [], subject: replySubject(original.subject), text: input.text, html: input.html,
      threadId: original.threadId, inReplyTo: original.messageId, references: [...chain, original.messageId],
      attachments: this.decodeAttachments(input.attachments),
    }, options);
    await this.logs.record({
      orgId: identity.orgId, identityId, action: 'mail.replied', category: 'mail', description: `Replied: ${logSubject(message.subject)}`,
      targetType: 'message', targetId: message.messageId,
      metadata: { threadId: message.threadId, inReplyTo: original.messageId, to, cc, replyAll: !!input.replyAll },
    });
    return message;
  }

  /**
   * Forwards a message with all its attachments, under a note, as a new conversation: a new thread, and
   * no In-Reply-To or References, so the recipients' mail programs do not file it into the old one.
   */
  async forward(identityId: string, originalId: string, input: ForwardInput, options: SendOptions = {}): Promise<MessageDoc> {
    const identity = await this.store.inboxOf(identityId);
    const original = await this.store.getMessage(identityId, originalId);
    const from = await this.fromAddress(identity, input.from);
    const carried = await Promise.all((original.attachments ?? []).map(async (a) => ({
      filename: a.filename, contentType: a.contentType, content: await this.store.attachments.read(a.attachmentId),
      ...(a.inline && a.contentId ? { contentId: a.contentId, inline: true } : {}),
    })));
    const attachments = this.decodeAttachments(input.attachments, carried);
    const header = forwardedHeader(original);
    const note = input.text ?? '';
    const text = `${note}${note ? '\n\n' : ''}${header.join('\n')}\n\n${original.text}`;
    const html = original.html !== undefined || input.html !== undefined
      ? `${input.html ?? (note ? `<p>${escapeHtml(note).replace(/\n/g, '<br>')}</p>` : '')}<div>${header.map(escapeHtml).join('<br>')}</div><br>${original.html ?? `<pre>${escapeHtml(original.text)}</pre>`}`
      : undefined;
    const message = await this.storeOutgoing(identity, from, {
      to: input.to, cc: input.cc ?? [], bcc: input.bcc ?? [], subject: forwardSubject(original.subject), text, html,
      threadId: newThreadId(), references: [], attachments,
    }, options);
    await this.logs.record({
      orgId: identity.orgId, identityId, action: 'mail.forwarded', category: 'mail', description: `Forwarded: ${logSubject(message.subject)}`,
      targetType: 'message', targetId: message.messageId,
      metadata: { threadId: message.threadId, original: original.messageId, to: message.to, cc: message.cc, bccCount: message.bcc.length, attachments: attachments.length },
    });
    return message;
  }

  /**
   * A message a mail client submitted (SMTP submission, submission.ts), sent as a send is: the client's
   * envelope recipients (those on neither To nor Cc go as Bcc), its attachments, and its threading: a
   * reply to a message of the inbox (In-Reply-To) joins that message's thread.
   */
  async submit(identityId: string, from: string, mail: {
    to: string[]; cc: string[]; bcc: string[]; subject: string; text: string; html?: string;
    inReplyTo?: string; references: string[]; attachments: AttachmentContent[];
  }, options: SendOptions = {}): Promise<MessageDoc> {
    const identity = await this.store.inboxOf(identityId);
    const original = mail.inReplyTo ? await this.store.getMessage(identityId, mail.inReplyTo).catch(() => undefined) : undefined;
    // The caps a send's attachments are held to (count, decoded size), on the client's parts as they are.
    const attachments = this.decodeAttachments(undefined, mail.attachments);
    const message = await this.storeOutgoing(identity, from, { ...mail, attachments, threadId: original?.threadId ?? newThreadId() }, options);
    await this.logs.record({
      orgId: identity.orgId, identityId, action: 'mail.sent', category: 'mail', description: `Mail sent over SMTP submission: ${logSubject(message.subject)}`,
      targetType: 'message', targetId: message.messageId,
      metadata: { threadId: message.threadId, to: message.to, cc: message.cc, bccCount: message.bcc.length, attachments: message.attachments?.length ?? 0, ...(original ? { inReplyTo: original.messageId } : {}) },
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
      description: `Not sent ("${logSubject(subject)}"): ${refused.map((r) => r.address).join(', ')} blocked by the send lists`,
      targetType: 'message', metadata: { recipients: refused.map((r) => r.address) },
    });
    throw new AppError(403, 'recipient_blocked', `Not sent: ${refused.map((r) => r.why).join('; ')}`, { recipients: refused.map((r) => r.address) });
  }

  private async storeOutgoing(identity: IdentityDoc, from: string, mail: {
    to: string[]; cc: string[]; bcc: string[]; subject: string; text: string; html?: string;
    threadId: string; inReplyTo?: string; references: string[]; attachments: AttachmentContent[];
  }, options: SendOptions = {}): Promise<MessageDoc> {
    const recipients = unique([...mail.to, ...mail.cc, ...mail.bcc].map((a) => a.toLowerCase()));
    if (recipients.length > this.config.SMTP_MAX_RECIPIENTS) {
      throw badRequest(`A message can have at most ${this.config.SMTP_MAX_RECIPIENTS} recipients (to, cc and bcc together)`);
    }
    await this.refuseBlockedRecipients(identity, recipients, mail.subject);
    // The org's plan quotas (429 quota_exceeded), before anything is stored or sent.
    const bytes = storedBytes(mail);
    await this.store.meter.enforce(identity.orgId, 'mailSent');
    await this.store.meter.enforce(identity.orgId, 'storageBytes', bytes);
    const id = options.id ?? newId('msg');
    const position = await this.store.nextPosition(identity.emailAddress, id);
    const createdAt = new Date();
    const messageId = this.newMessageId();
    const raw = await composeMessage({
      messageId, from: { name: identity.displayName, address: from }, to: mail.to, cc: mail.cc,
      subject: mail.subject, text: mail.text, html: mail.html, inReplyTo: mail.inReplyTo, references: mail.references, date: createdAt,
      attachments: mail.attachments,
    });
    // The sender's copy lists its attachments too (downloadable, forwardable), stored before anything refers to them.
    const attachments = await Promise.all(mail.attachments.map((a) => this.store.attachments.put(newAttachmentId(), a, { inboxId: identity.emailAddress })));
    const rawFileId = raw.length > RAW_INLINE_BYTES ? await this.store.attachments.putRaw(id, raw) : undefined;
    const doc: MessageDoc = {
      _id: id, messageId, identityId: identity._id, inboxId: identity.emailAddress, threadId: mail.threadId,
      direction: 'sent', from: [from], to: mail.to, cc: mail.cc, bcc: mail.bcc, replyTo: [],
      subject: mail.subject, text: mail.text, html: mail.html, inReplyTo: mail.inReplyTo, references: mail.references,
      labels: ['sent'], ...(attachments.length ? { attachments } : {}), createdAt, sortKey: sortKeyOf(createdAt, id), ...position,
    };
    const delivery = { status: 'queued' as const, attempts: 0, recipients: recipients.map((address) => ({ address, status: 'pending' as const })), updatedAt: createdAt };
    // The outbound record first: a crash before the message is stored leaves only an orphan nobody sends.
    await this.store.outbound.create({ _id: id, from, ...(rawFileId ? { raw: '', rawFileId } : { raw }), ...delivery });
    await this.store.messages.create(doc);
    this.store.meter.record(identity.orgId, 'mailSent');
    this.store.meter.record(identity.orgId, 'storageBytes', bytes);
    await this.store.noteChange(doc.inboxId);
    await this.store.search.index(doc);
    await this.store.touchThread(identity, mail.threadId, mail.subject, createdAt);
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
    const message = await this.store.messages.findById(id, LIST_FIELDS).lean();
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
}
