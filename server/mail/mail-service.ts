import type { Connection, Model } from 'mongoose';
import type { Readable } from 'node:stream';
import type { ServiceEvents } from '../platform/events.js';
import type { Config } from '../platform/config.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { IdentityService } from '../identities/identity-service.js';
import type { IdentityDoc } from '../identities/identity-model.js';
import type { JobQueue } from '../platform/jobs.js';
import type { Logger } from '../platform/logger.js';
import type { MessageDoc, OutboundDoc, ThreadDoc } from './message-model.js';
import type { AttachmentInput, ForwardInput, LabelsInput, ReplyInput, SendInput } from './mail-schemas.js';
import type { InboxChanges } from './inbox-changes.js';
import type { InboxSequence } from './inbox-sequence.js';
import type { MailDelivery } from './delivery.js';
import type { AttachmentContent, AttachmentRef, AttachmentStore } from './attachment-store.js';
import type { PageCache } from './page-cache.js';
import { MailLists } from './mail-lists.js';
import type { MailEventLog } from './mail-events.js';
import { MailStore } from './mail-store.js';
import { MailReader, type MessagePage } from './mail-reader.js';
import { OutgoingMail, type SendOptions } from './outgoing-mail.js';
import { IncomingMail, type InboundMail } from './incoming-mail.js';
import { MailLabels } from './mail-labels.js';
import { MailAuthenticator } from './mail-auth.js';
import { MailSettingsStore } from './mail-settings.js';
import { MailDrafts, type DraftView } from './drafts.js';
import { loadMessages, type MailSearch, type SearchHit, type SearchInput } from './mail-search.js';
import { assignMissingPositions, assignPositionsOnce } from './position-backfill.js';
import { indexUnsearched } from './search-backfill.js';
import type { Meter } from '../usage/index.js';
import type { MailDomains } from './domains/domain-service.js';
import type { MailSendLimits } from './send-limits.js';

export type { MessagePage } from './mail-reader.js';

/** What a send under the approval policy did: sent, or held as a draft for the org admin. */
export type Outcome = { sent: MessageDoc } | { held: DraftView };
const outcomeOf = (view: DraftView): Outcome => (view.sent ? { sent: view.sent } : { held: view });
export type { InboundMail } from './incoming-mail.js';
export { forwardSubject, replySubject } from './outgoing-mail.js';

/**
 * Every mail operation; the HTTP routes, the MCP tools and the SMTP listener all call into this. It only
 * composes the rooms that do the work: the store every path shares (mail-store.ts), reading an inbox
 * (mail-reader.ts), sending (outgoing-mail.ts), receiving (incoming-mail.ts), labels (mail-labels.ts),
 * the send and receive lists (mail-lists.ts) and the identities' mail events (mail-events.ts).
 */
export class MailService {
  readonly messages: Model<MessageDoc>;
  readonly threads: Model<ThreadDoc>;
  readonly outbound: Model<OutboundDoc>;
  readonly delivery: MailDelivery;
  readonly sequence: InboxSequence;
  readonly changes: InboxChanges;
  readonly attachments: AttachmentStore;
  /** The word index search reads (mail-search.ts); the bench fills it in bulk. */
  readonly searchIndex: MailSearch;
  readonly lists: MailLists;
  /** Who really sent received mail (SPF, DKIM, DMARC, ARC) and the trusted path between our inboxes. */
  readonly authenticator: MailAuthenticator;
  /** Per identity and per org: whether unverified mail is admitted to the inbox. */
  readonly settings: MailSettingsStore;
  /** Drafts, scheduled sends and sends waiting for the org admin's approval. */
  readonly drafts: MailDrafts;
  /** The orgs' own mail domains and the addresses identities take on them. */
  readonly domains: MailDomains;
  private readonly store: MailStore;
  private readonly reader: MailReader;
  private readonly outgoing: OutgoingMail;
  private readonly incoming: IncomingMail;
  private readonly labels: MailLabels;
  private readonly identities: IdentityService;
  private readonly ourDomain: string;

  /** `pages` keeps message-list pages, each valid while its inbox's change token is (see MailReader.listMessages). */
  constructor(conn: Connection, config: Config, identities: IdentityService,
    logs: ActivityLog, jobs: JobQueue, pages: PageCache<MessagePage>,
    private readonly log: Logger, readonly events: MailEventLog, domains: MailDomains, private readonly sendLimits: MailSendLimits, meter: Meter, serviceEvents?: ServiceEvents) {
    this.domains = domains;
    this.identities = identities;
    this.ourDomain = config.MAIL_DOMAIN.toLowerCase();
    this.store = new MailStore(conn, identities, log, meter);
    this.lists = new MailLists(conn, logs);
    this.authenticator = new MailAuthenticator(config, log);
    this.settings = new MailSettingsStore(conn, logs, config.MAIL_ADMIT_UNVERIFIED);
    this.reader = new MailReader(this.store, pages);
    this.outgoing = new OutgoingMail(this.store, config, identities, this.lists, logs, jobs, log, events, this.authenticator, domains, serviceEvents);
    this.incoming = new IncomingMail(this.store, this.lists, this.settings, logs, events);
    this.labels = new MailLabels(this.store, logs);
    this.drafts = new MailDrafts(conn, this.store, this.outgoing, this.settings, events, logs, jobs, log);
    this.messages = this.store.messages;
    this.threads = this.store.threads;
    this.outbound = this.store.outbound;
    this.sequence = this.store.sequence;
    this.changes = this.store.changes;
    this.attachments = this.store.attachments;
    this.searchIndex = this.store.search;
    this.delivery = this.outgoing.delivery;
  }

  /**
   * Why an inbox of the org takes no more mail now: its plan's quota of mail received this month, or of
   * storage, is reached (the SMTP listener answers RCPT with a temporary refusal, so the sender retries).
   */
  async receivingRefusal(orgId: string): Promise<string | undefined> {
    const refusal = (await this.store.meter.refusal(orgId, 'mailReceived')) ?? (await this.store.meter.refusal(orgId, 'storageBytes', 1));
    return refusal && (refusal.metric === 'mailReceived' ? 'mailbox quota reached: mail received this month' : 'mailbox quota reached: storage full');
  }

  /**
   * The live identity whose inbox mail to `address` goes to: an inbox address of the service's domain,
   * or an address taken on a custom domain verified now; null for any other.
   */
  async mailboxOf(address: string): Promise<IdentityDoc | null> {
    const lower = address.toLowerCase();
    if (lower.slice(lower.lastIndexOf('@') + 1) === this.ourDomain) return this.identities.findLiveByEmail(lower);
    const owner = await this.domains.ownerOf(lower);
    return owner ? this.identities.getLive(owner.identityId) : null;
  }

  /** A live identity (its inbox); 404 otherwise. */
  identityOf(identityId: string): Promise<IdentityDoc> {
    return this.store.inboxOf(identityId);
  }

  newMessageId(): string {
    return this.outgoing.newMessageId();
  }

  /** Positions for messages stored before they existed, once per database (position-backfill.ts). */
  assignPositionsOnce(): Promise<void> {
    return assignPositionsOnce(this.store);
  }

  assignMissingPositions(): Promise<number> {
    return assignMissingPositions(this.store);
  }

  /** Search postings for mail stored before search existed or left unindexed by a crash (search-backfill.ts). */
  indexUnsearched(now?: number): Promise<number> {
    return indexUnsearched(this.store, this.log, now);
  }

  // --- reading -----------------------------------------------------------------------------------

  listMessages(identityId: string, query: { limit: number; labels?: string[]; pageToken?: string }): Promise<MessagePage> {
    return this.reader.listMessages(identityId, query);
  }

  /** Ranked search over the inbox's subject, body, sender and recipients (mail-search.ts). */
  async search(identityId: string, query: SearchInput): Promise<{ items: SearchHit[]; nextPageToken?: string }> {
    const { emailAddress: inboxId } = await this.store.inboxOf(identityId);
    const top = await this.store.sequence.top(inboxId);
    return this.store.search.search(inboxId, top, query, loadMessages(this.store.messages));
  }

  getMessage(identityId: string, messageId: string): Promise<MessageDoc> {
    return this.store.getMessage(identityId, messageId);
  }

  readMessage(identityId: string, messageId: string): Promise<MessageDoc> {
    return this.reader.readMessage(identityId, messageId);
  }

  openAttachment(identityId: string, messageId: string, attachmentId: string): Promise<{ attachment: AttachmentRef; open: () => Readable }> {
    return this.reader.openAttachment(identityId, messageId, attachmentId);
  }

  listThreads(identityId: string, query: { limit: number; pageToken?: string }) {
    return this.reader.listThreads(identityId, query);
  }

  getThread(identityId: string, threadId: string): Promise<{ thread: ThreadDoc; messages: MessageDoc[] }> {
    return this.reader.getThread(identityId, threadId);
  }

  // --- sending -----------------------------------------------------------------------------------

  send(identityId: string, input: SendInput, options?: SendOptions): Promise<MessageDoc> {
    return this.outgoing.send(identityId, input, options);
  }

  reply(identityId: string, originalId: string, input: ReplyInput, options?: SendOptions): Promise<MessageDoc> {
    return this.outgoing.reply(identityId, originalId, input, options);
  }

  forward(identityId: string, originalId: string, input: ForwardInput, options?: SendOptions): Promise<MessageDoc> {
    return this.outgoing.forward(identityId, originalId, input, options);
  }

  /**
   * Send, reply and forward as the routes and tools call them: through the identity's approval policy
   * (drafts.ts), which may turn the send into a draft waiting for the org admin (`held`).
   */
  async sendChecked(identityId: string, input: SendInput): Promise<Outcome> {
    await this.takeSend(identityId);
    const held = await this.drafts.throughPolicy(identityId, { to: input.to, cc: input.cc, bcc: input.bcc, subject: input.subject, text: input.text, html: input.html, from: input.from }, !!input.attachments?.length);
    return held ? outcomeOf(held) : { sent: await this.send(identityId, input) };
  }

  async replyChecked(identityId: string, originalId: string, input: ReplyInput): Promise<Outcome> {
    await this.takeSend(identityId);
    const held = await this.drafts.throughPolicy(identityId, { inReplyTo: originalId, text: input.text, html: input.html, replyAll: input.replyAll, from: input.from }, !!input.attachments?.length);
    return held ? outcomeOf(held) : { sent: await this.reply(identityId, originalId, input) };
  }

  async forwardChecked(identityId: string, originalId: string, input: ForwardInput): Promise<Outcome> {
    await this.takeSend(identityId);
    const held = await this.drafts.throughPolicy(identityId, { forwardOf: originalId, to: input.to, cc: input.cc, bcc: input.bcc, text: input.text, html: input.html, from: input.from }, !!input.attachments?.length);
    return held ? outcomeOf(held) : { sent: await this.forward(identityId, originalId, input) };
  }

  /**
   * A message a mail client submitted over SMTP, through the identity's approval policy as a send is
   * (a held one waits as a draft; drafts carry no attachments, so a held message with some is refused).
   */
  async submitChecked(identityId: string, from: string, mail: Parameters<OutgoingMail['submit']>[2], options?: SendOptions): Promise<Outcome> {
    await this.takeSend(identityId);
    const held = await this.drafts.throughPolicy(identityId, { to: mail.to, cc: mail.cc, bcc: mail.bcc, subject: mail.subject, text: mail.text, html: mail.html, from }, mail.attachments.length > 0);
    return held ? outcomeOf(held) : { sent: await this.outgoing.submit(identityId, from, mail, options) };
  }

  /** A draft asked to be sent (now, at its sendAt, or once approved), counted against the send limits as a send is. */
  async requestDraftSend(identityId: string, draftId: string, input: { sendAt?: string }): Promise<DraftView> {
    await this.takeSend(identityId);
    return this.drafts.requestSend(identityId, draftId, input);
  }

  /** One send against the identity's and its org's limits (send-limits.ts): 429 mail_rate_limited over either. */
  private async takeSend(identityId: string): Promise<void> {
    await this.sendLimits.take(await this.store.inboxOf(identityId));
  }

  /** The From a message of the identity's may carry (outgoing-mail.ts fromAddress); 403 from_not_allowed otherwise. */
  async fromAddress(identityId: string, asked: string): Promise<string> {
    return this.outgoing.fromAddress(await this.store.inboxOf(identityId), asked);
  }

  decodeAttachments(input: AttachmentInput[] | undefined, carried: AttachmentContent[] = []): AttachmentContent[] {
    return this.outgoing.decodeAttachments(input, carried);
  }

  // --- receiving and labels ----------------------------------------------------------------------

  receive(identity: IdentityDoc, mail: InboundMail): Promise<{ stored: boolean; threadId: string; blocked: boolean; unauthenticated: boolean }> {
    return this.incoming.receive(identity, mail);
  }

  updateLabels(identityId: string, messageId: string, change: LabelsInput): Promise<MessageDoc> {
    return this.labels.updateLabels(identityId, messageId, change);
  }
}
