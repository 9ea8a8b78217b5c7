import type { ActivityLog } from '../platform/activity-log.js';
import type { IdentityDoc } from '../identities/identity-model.js';
import { isDuplicateKey } from '../platform/errors.js';
import { newId, newThreadId } from '../platform/ids.js';
import { sortKeyOf } from '../platform/pagination.js';
import type { MessageDoc } from './message-model.js';
import { inboundAttachmentId, type AttachmentContent } from './attachment-store.js';
import type { DeliveryReport } from './delivery-report.js';
import type { MailLists } from './mail-lists.js';
import type { MailEventLog } from './mail-events.js';
import { presentMessage } from './present.js';
import type { Authentication } from './mail-auth.js';
import type { MailSettingsStore } from './mail-settings.js';
import { LIST_FIELDS, logSubject, storedBytes, unique, type MailStore } from './mail-store.js';

// Mail that arrives for a local inbox over SMTP (smtp-listener.ts parses it, inbound.ts reads it): stored
// once per Message-ID, filed into the thread it answers, kept out of sight when its sender is blocked, and
// a delivery status notification about a message this inbox sent announced as that message's bounce.

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
  /** Who really sent it (mail-auth.ts); absent only for mail stored by a path that checks nothing. */
  authentication?: Authentication;
  /** The sender's org, for mail over the trusted path from another inbox of this server. */
  senderOrgId?: string;
}

/** A delivery report about a message this inbox sent, and the failures it reports for that message's recipients. */
interface Bounce { original: MessageDoc; failed: DeliveryReport['failed'] }

/** The verdict of mail that reached receive() without being checked: nothing is known, so nothing is verified. */
const UNCHECKED: Authentication = {
  spf: { result: 'none', domain: null }, dkim: { result: 'none', domain: null }, dmarc: { result: 'none', domain: null }, arc: { result: 'none', domain: null }, verified: false,
};

export class IncomingMail {
  constructor(private readonly store: MailStore, private readonly lists: MailLists, private readonly settings: MailSettingsStore,
    private readonly logs: ActivityLog, private readonly events: MailEventLog) {}

  /**
   * The message this inbox sent that a delivery status notification reports on, and the failures it
   * reports for that message's own recipients only: any recipient sees a Message-ID, and a report about
   * an address the message never went to is no bounce of ours.
   */
  private async bounceOf(identity: IdentityDoc, mail: InboundMail): Promise<Bounce | undefined> {
    const report = mail.deliveryReport;
    if (!report?.originalMessageId) return undefined;
    const original = await this.store.messages.findOne({ inboxId: identity.emailAddress, messageId: report.originalMessageId, direction: 'sent' }, LIST_FIELDS).lean();
    if (!original) return undefined;
    // Bcc is not among the list fields: the outbound record names every recipient the message went to.
    const sentTo = new Set(((await this.store.outbound.findById(original._id, { recipients: 1 }).lean())?.recipients ?? []).map((r) => r.address.toLowerCase()));
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
      description: `"${logSubject(original.subject)}" bounced for ${reported.map((f) => f.address).join(', ')}`, targetType: 'message', targetId: original.messageId,
      metadata: { recipients: reported.map((f) => f.address), bounceMessageId: mail.messageId },
    });
  }

  /** Stores a message that arrived over SMTP for one local inbox; a redelivery of the same id is a no-op. */
  async receive(identity: IdentityDoc, mail: InboundMail): Promise<{ stored: boolean; threadId: string; blocked: boolean; unauthenticated: boolean }> {
    const inboxId = identity.emailAddress;
    // Who really sent it: mail nobody checked is treated as unverified.
    const authentication = mail.authentication ?? UNCHECKED;
    const verified = authentication.verified;
    // Unverified mail is kept, but out of sight under `unauthenticated` (unless the identity or its org
    // admits it); mail from a blocked sender, or from outside a non-empty allow list, under `blocked`.
    // Either is left out of default lists, threads and unread, and announced only to who asks for it.
    // Whether unverified mail is admitted matters for unverified mail only: verified mail reads no settings.
    const [policy, admitted] = await Promise.all([
      this.lists.policyFor(identity), verified || this.settings.effective(identity).then((s) => s.admitUnverified),
    ]);
    const refusal = (mail.from.length ? mail.from : ['']).map((a) => policy.refusesFrom(a, verified)).find((why) => why !== null) ?? null;
    const blocked = refusal !== null;
    const unauthenticated = !admitted;
    const hidden = blocked || unauthenticated;
    // A bounce joins the thread of the message that bounced, so the conversation shows why it stopped.
    const bounce = mail.deliveryReport ? await this.bounceOf(identity, mail) : undefined;
    const bouncedThread = bounce?.original.threadId;
    const threadId = bouncedThread ?? (await this.threadOfReferences(inboxId, [...mail.references, ...(mail.inReplyTo ? [mail.inReplyTo] : [])])) ?? newThreadId();
    const id = newId('msg');
    const position = await this.store.nextPosition(inboxId, id);
    const createdAt = new Date();
    const attachments = await Promise.all(mail.attachments.map((a, i) => this.store.attachments.put(inboundAttachmentId(mail.messageId, i, a.content), a, { inboxId })));
    const stored: MessageDoc = {
      _id: id, messageId: mail.messageId, identityId: identity._id, inboxId, threadId, direction: 'received',
      from: mail.from, to: mail.to, cc: mail.cc, bcc: [], replyTo: mail.replyTo, subject: mail.subject, text: mail.text,
      html: mail.html, extractedText: mail.extractedText, inReplyTo: mail.inReplyTo, references: mail.references,
      labels: ['received', ...(hidden ? [] : ['unread']), ...(blocked ? ['blocked'] : []), ...(unauthenticated ? ['unauthenticated'] : []), ...(bouncedThread ? ['bounce'] : [])],
      ...(attachments.length ? { attachments } : {}), createdAt, sortKey: sortKeyOf(createdAt, id), ...position,
      authentication, ...(mail.senderOrgId ? { senderOrgId: mail.senderOrgId } : {}),
    };
    try {
      await this.store.messages.create(stored);
    } catch (err) {
      if (isDuplicateKey(err)) return { stored: false, threadId, blocked, unauthenticated };
      throw err;
    }
    this.store.meter.record(identity.orgId, 'mailReceived');
    this.store.meter.record(identity.orgId, 'storageBytes', storedBytes(mail));
    await this.store.noteChange(inboxId);
    await this.store.search.index(stored);
    if (!hidden) await this.store.touchThread(identity, threadId, mail.subject, createdAt);
    const verdict = `spf ${authentication.spf.result}, dkim ${authentication.dkim.result}, dmarc ${authentication.dmarc.result}`;
    this.logs.recordSoon(blocked ? {
      orgId: identity.orgId, identityId: identity._id, action: 'mail.received_blocked', category: 'mail', severity: 'warning',
      description: `${identity.emailAddress} received "${mail.subject.slice(0, 80)}" from ${mail.from}, blocked: ${refusal}`, targetType: 'message', targetId: id,
    } : unauthenticated ? {
      orgId: identity.orgId, identityId: identity._id, action: 'mail.received_unauthenticated', category: 'mail', severity: 'warning',
      description: `${identity.emailAddress} received "${mail.subject.slice(0, 80)}" claiming to be from ${mail.from}, not verified (${verdict})`, targetType: 'message', targetId: id,
    } : {
      orgId: identity.orgId, identityId: identity._id, action: 'mail.received', category: 'mail',
      description: `${identity.emailAddress} received "${mail.subject.slice(0, 80)}" from ${mail.from}`, targetType: 'message', targetId: id,
    });
    const event = blocked ? 'message.received.blocked' : unauthenticated ? 'message.received.unauthenticated' : 'message.received';
    await this.events.emit(identity, event, { message: presentMessage(stored) });
    if (bounce) await this.announceBounce(identity, mail, bounce);
    return { stored: true, threadId, blocked, unauthenticated };
  }

  /** A reply joins the thread of the newest message in this inbox that it names. */
  private async threadOfReferences(inboxId: string, ids: string[]): Promise<string | undefined> {
    if (!ids.length) return undefined;
    const known = await this.store.messages.findOne({ inboxId, messageId: { $in: unique(ids).slice(-100) } }, { threadId: 1 })
      .sort({ createdAt: -1 }).lean();
    return known?.threadId;
  }
}
