import { createHash } from 'node:crypto';
import { Schema, type Connection, type Model } from 'mongoose';
import { z } from 'zod';
import type { ActivityLog } from '../platform/activity-log.js';
import { AppError, isDuplicateKey, notFound } from '../platform/errors.js';
import { randomHex } from '../platform/ids.js';
import type { JobQueue } from '../platform/jobs.js';
import type { Logger } from '../platform/logger.js';
import { decodeCursor, pageOf, sortKeyOf } from '../platform/pagination.js';
import { limitParam } from '../platform/pagination.js';
import type { MailEventLog } from './mail-events.js';
import { fromAddress, messageIdInput } from './mail-schemas.js';
import { needingApproval, type MailSettingsStore } from './mail-settings.js';
import type { MailStore } from './mail-store.js';
import type { MessageDoc } from './message-model.js';
import type { OutgoingMail } from './outgoing-mail.js';
import { presentSent } from './present.js';

// Drafts: mail composed now and sent later, by the agent, at a time it sets (`sendAt`), or once the org
// admin approves it. A draft document is the author's: only their requests write it. Everything that must
// happen once is a unique insert elsewhere: the decision on a draft (`mail_draft_decisions`, by draft id)
// and the send itself (the sent message's id is derived from the draft's, and its outbound record is
// inserted under that id first), so two processes sending one draft, a scheduled run and a person at
// once, or a job run twice, send it once.

export const SEND_DRAFT_JOB = 'mail.send-draft';

const address = z.string().trim().max(254).pipe(z.email('must be an email address'));
const addressList = z.array(address).max(100);
const sendAt = z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time, e.g. 2030-01-01T09:00:00Z' });

export const draftIdInput = z.string().regex(/^drf_[0-9a-f]{24}$/, 'must be a draft id (drf_ and 24 hex characters)');
export const draftParams = z.object({ draftId: draftIdInput });

export const createDraftInput = z.object({
  to: addressList.optional(),
  cc: addressList.optional(),
  bcc: addressList.optional(),
  subject: z.string().max(998).optional(),
  text: z.string().max(1_000_000).optional(),
  html: z.string().max(2_000_000).optional(),
  /** A reply to this message of the inbox (its sender, and with replyAll everyone else on it). */
  inReplyTo: messageIdInput.optional(),
  replyAll: z.boolean().optional(),
  /** A forward of this message of the inbox, with its attachments. */
  forwardOf: messageIdInput.optional(),
  /** When to send it once `send` is asked (or approved); absent: at once. */
  sendAt: sendAt.optional(),
  /** One of the author's addresses on a verified domain of its org; default as for a send. */
  from: fromAddress.optional(),
}).strict().refine((d) => !(d.inReplyTo && d.forwardOf), 'a draft is a reply (inReplyTo) or a forward (forwardOf), not both');

export const updateDraftInput = z.object({
  to: addressList.optional(),
  cc: addressList.optional(),
  bcc: addressList.optional(),
  subject: z.string().max(998).optional(),
  text: z.string().max(1_000_000).optional(),
  html: z.string().max(2_000_000).nullable().optional(),
  replyAll: z.boolean().optional(),
  sendAt: sendAt.nullable().optional(),
}).strict().refine((b) => Object.keys(b).length > 0, 'give at least one field to change');

export const sendDraftInput = z.object({ sendAt: sendAt.optional() }).strict();
export const decisionInput = z.object({ reason: z.string().trim().max(500).optional() }).strict();

export const DRAFT_STATUSES = ['draft', 'scheduled', 'pending_approval', 'approved', 'rejected', 'sent'] as const;
export type DraftStatus = (typeof DRAFT_STATUSES)[number];
export const listDraftsInput = z.object({
  limit: limitParam(50, 100),
  status: z.enum(DRAFT_STATUSES).optional(),
  pageToken: z.string().optional(),
});

export type CreateDraftInput = z.output<typeof createDraftInput>;
export type UpdateDraftInput = z.output<typeof updateDraftInput>;

export interface DraftDoc {
  _id: string;
  identityId: string;
  orgId: string;
  inboxId: string;
  kind: 'new' | 'reply' | 'forward';
  original?: string;
  replyAll?: boolean;
  to: string[];
  cc: string[];
  bcc: string[];
  subject: string;
  text: string;
  html?: string;
  /** The From address asked for (absent: the default of a send). */
  from?: string;
  sendAt?: Date;
  /** Set when the author asked to send it: now (or at sendAt), or once approved. */
  sendRequestedAt?: Date;
  /** The recipients the approval policy held it for, when it was asked to be sent. */
  approvalFor?: string[];
  createdAt: Date;
  updatedAt: Date;
  sortKey: string;
}

const draftSchema = new Schema<DraftDoc>({
  _id: String,
  identityId: { type: String, required: true },
  orgId: { type: String, required: true },
  inboxId: { type: String, required: true },
  kind: { type: String, required: true },
  original: String,
  replyAll: Boolean,
  to: [String],
  cc: [String],
  bcc: [String],
  subject: { type: String, default: '' },
  text: { type: String, default: '' },
  html: String,
  from: String,
  sendAt: Date,
  sendRequestedAt: Date,
  approvalFor: { type: [String], default: undefined },
  createdAt: { type: Date, required: true },
  updatedAt: { type: Date, required: true },
  sortKey: { type: String, required: true },
}, { versionKey: false });
draftSchema.index({ identityId: 1, sortKey: -1 });
draftSchema.index({ orgId: 1, sortKey: -1 });

interface DecisionDoc { _id: string; decision: 'approved' | 'rejected'; orgId: string; reason?: string; at: Date }
const decisionSchema = new Schema<DecisionDoc>({
  _id: String, decision: { type: String, required: true }, orgId: { type: String, required: true }, reason: String, at: { type: Date, required: true },
}, { versionKey: false });

/** The id of the message a draft becomes: the same for every process, so its outbound insert is the once. */
export const sentIdOf = (draftId: string) => `msg_${createHash('sha256').update(`draft:${draftId}`).digest('hex').slice(0, 24)}`;

export interface DraftView { draft: DraftDoc; status: DraftStatus; decision?: DecisionDoc; sent?: MessageDoc }

export class MailDrafts {
  readonly drafts: Model<DraftDoc>;
  private readonly decisions: Model<DecisionDoc>;

  constructor(conn: Connection, private readonly store: MailStore, private readonly outgoing: OutgoingMail,
    private readonly settings: MailSettingsStore, private readonly events: MailEventLog, private readonly logs: ActivityLog,
    private readonly jobs: JobQueue, private readonly log: Logger) {
    this.drafts = conn.models.MailDraft ?? conn.model<DraftDoc>('MailDraft', draftSchema, 'mail_drafts');
    this.decisions = conn.models.MailDraftDecision ?? conn.model<DecisionDoc>('MailDraftDecision', decisionSchema, 'mail_draft_decisions');
    jobs.define<{ draftId: string }>(SEND_DRAFT_JOB, (data) => this.sendWhenDue(data.draftId), { retryDelaysMs: [1_000, 10_000, 60_000, 300_000] });
  }

  /** Its status, from what is on record: the sent message, the decision, the author's request. */
  private async view(draft: DraftDoc): Promise<DraftView> {
    const [sent, decision] = await Promise.all([
      this.store.messages.findById(sentIdOf(draft._id), { html: 0 }).lean(),
      this.decisions.findById(draft._id).lean(),
    ]);
    const status: DraftStatus = sent ? 'sent'
      : decision?.decision === 'rejected' ? 'rejected'
        : !draft.sendRequestedAt ? 'draft'
          : draft.approvalFor?.length && !decision ? 'pending_approval'
            : draft.sendAt && draft.sendAt.getTime() > Date.now() ? 'scheduled'
              : decision ? 'approved' : 'scheduled';
    return { draft, status, ...(decision ? { decision } : {}), ...(sent ? { sent } : {}) };
  }

  private async own(identityId: string, draftId: string): Promise<DraftDoc> {
    const draft = await this.drafts.findOne({ _id: draftId, identityId }).lean();
    if (!draft) throw notFound('Draft not found');
    return draft;
  }

  private async ofOrg(orgId: string, draftId: string): Promise<DraftDoc> {
    const draft = await this.drafts.findOne({ _id: draftId, orgId }).lean();
    if (!draft) throw notFound('Draft not found');
    return draft;
  }

  async create(identityId: string, input: CreateDraftInput): Promise<DraftView> {
    const identity = await this.store.inboxOf(identityId);
    let kind: DraftDoc['kind'] = 'new';
    let subject = input.subject ?? '';
    if (input.inReplyTo || input.forwardOf) {
      const original = await this.store.getMessage(identityId, (input.inReplyTo ?? input.forwardOf)!); // 404 when not in this inbox
      kind = input.inReplyTo ? 'reply' : 'forward';
      if (!input.subject) subject = original.subject;
    }
    const now = new Date();
    const id = `drf_${randomHex(12)}`;
    const draft: DraftDoc = {
      _id: id, identityId, orgId: identity.orgId, inboxId: identity.emailAddress, kind,
      ...(kind !== 'new' ? { original: (input.inReplyTo ?? input.forwardOf)! } : {}),
      ...(input.replyAll ? { replyAll: true } : {}),
      to: input.to ?? [], cc: input.cc ?? [], bcc: input.bcc ?? [], subject, text: input.text ?? '',
      ...(input.html !== undefined ? { html: input.html } : {}),
      ...(input.sendAt ? { sendAt: new Date(input.sendAt) } : {}),
      ...(input.from ? { from: input.from } : {}),
      createdAt: now, updatedAt: now, sortKey: sortKeyOf(now, id),
    };
    await this.drafts.create(draft);
    return this.view(draft);
  }

  get(identityId: string, draftId: string): Promise<DraftView> {
    return this.own(identityId, draftId).then((d) => this.view(d));
  }

  getForOrg(orgId: string, draftId: string): Promise<DraftView> {
    return this.ofOrg(orgId, draftId).then((d) => this.view(d));
  }

  /** The identity's drafts (identity key), or every draft of the org (its platform key), newest first. */
  async list(owner: { orgId: string; identityId?: string }, query: z.output<typeof listDraftsInput>): Promise<{ items: DraftView[]; nextPageToken?: string }> {
    const cursor = query.pageToken ? decodeCursor(query.pageToken) : undefined;
    const filter = { ...(owner.identityId ? { identityId: owner.identityId } : { orgId: owner.orgId }), ...(cursor ? { sortKey: { $lt: sortKeyOf(cursor.at, cursor.id) } } : {}) };
    const views: DraftView[] = [];
    let lastKey: string | undefined;
    // The status is derived, so a status filter reads on until the page is full (in batches).
    for (let round = 0; round < 20 && views.length <= query.limit; round++) {
      const rows = await this.drafts.find(lastKey ? { ...filter, sortKey: { $lt: lastKey } } : filter).sort({ sortKey: -1 }).limit(100).lean();
      if (!rows.length) break;
      for (const row of rows) {
        const view = await this.view(row);
        if (!query.status || view.status === query.status) views.push(view);
        if (views.length > query.limit) break;
      }
      lastKey = rows[rows.length - 1]!.sortKey;
      if (rows.length < 100) break;
    }
    return pageOf(views, query.limit, (v) => ({ at: v.draft.createdAt, id: v.draft._id }));
  }

  /** Editable until it is asked to be sent (then it waits for a send or a person; a rejected one is final: requestSend refuses it). */
  async update(identityId: string, draftId: string, input: UpdateDraftInput): Promise<DraftView> {
    const draft = await this.own(identityId, draftId);
    const { status } = await this.view(draft);
    if (status === 'sent') throw new AppError(409, 'draft_sent', 'This draft was sent; it can no longer change');
    if (status === 'rejected') throw new AppError(409, 'draft_rejected', 'This draft was rejected; create a new draft to try again');
    if (status === 'pending_approval' || status === 'scheduled' || status === 'approved') {
      throw new AppError(409, 'draft_locked', `This draft is ${status.replace('_', ' ')}; it cannot change now`);
    }
    const set: Record<string, unknown> = { updatedAt: new Date() };
    const unset: Record<string, 1> = {};
    for (const field of ['to', 'cc', 'bcc', 'subject', 'text', 'replyAll'] as const) if (input[field] !== undefined) set[field] = input[field];
    if (input.html === null) unset.html = 1; else if (input.html !== undefined) set.html = input.html;
    if (input.sendAt === null) unset.sendAt = 1; else if (input.sendAt !== undefined) set.sendAt = new Date(input.sendAt);
    await this.drafts.updateOne({ _id: draftId, identityId }, { $set: set, ...(Object.keys(unset).length ? { $unset: unset } : {}) });
    return this.get(identityId, draftId);
  }

  async remove(identityId: string, draftId: string): Promise<void> {
    const draft = await this.own(identityId, draftId);
    if ((await this.view(draft)).status === 'sent') throw new AppError(409, 'draft_sent', 'This draft was sent; the sent message stays in the inbox');
    await this.drafts.deleteOne({ _id: draftId, identityId });
  }

  /**
   * The author asks to send it: held for approval when the policy says so (a person decides), scheduled
   * when sendAt is ahead (a job sends it then, in whichever process runs it, after a restart too), sent
   * now otherwise.
   */
  async requestSend(identityId: string, draftId: string, input: { sendAt?: string }): Promise<DraftView> {
    const draft = await this.own(identityId, draftId);
    const current = await this.view(draft);
    if (current.status === 'sent') return current;
    if (current.status === 'pending_approval' || current.status === 'scheduled' || current.status === 'approved') {
      throw new AppError(409, 'draft_locked', `This draft is ${current.status.replace('_', ' ')} already`);
    }
    if (current.status === 'rejected') throw new AppError(409, 'draft_rejected', 'This draft was rejected; create a new draft to try again');
    if (!draft.to.length && draft.kind !== 'reply') throw new AppError(400, 'validation_error', 'The draft has no recipients (to)');
    const identity = await this.store.inboxOf(identityId);
    const held = needingApproval(await this.settings.effective(identity), await this.recipientsOf(draft));
    const when = input.sendAt ? new Date(input.sendAt) : draft.sendAt;
    const now = new Date();
    const asked = { sendRequestedAt: now, updatedAt: now, ...(when ? { sendAt: when } : {}) };
    await this.drafts.updateOne({ _id: draftId, identityId }, held.length
      ? { $set: { ...asked, approvalFor: held } }
      : { $set: asked, $unset: { approvalFor: 1 } });
    if (held.length) {
      await this.logs.record({
        orgId: identity.orgId, identityId, action: 'mail.draft_approval_requested', category: 'mail',
        description: `"${draft.subject.slice(0, 80)}" waits for approval (${held.join(', ')})`, targetType: 'draft', targetId: draftId,
      });
      return this.get(identityId, draftId);
    }
    return this.sendOrSchedule(draftId, when);
  }

  /** Everyone the draft would go to: a reply's are its original's sender (and, replying to all, the rest). */
  private async recipientsOf(draft: DraftDoc): Promise<string[]> {
    const listed = [...draft.to, ...draft.cc, ...draft.bcc];
    if (draft.kind === 'reply') {
      const original = await this.store.getMessage(draft.identityId, draft.original!);
      const to = original.direction === 'received' ? (original.replyTo.length ? original.replyTo : original.from) : original.to;
      listed.push(...to, ...(draft.replyAll ? [...original.to, ...(original.cc ?? [])] : []));
    }
    const self = draft.inboxId.toLowerCase();
    return [...new Set(listed.map((a) => a.toLowerCase()))].filter((a) => a !== self);
  }

  /**
   * A direct send, reply or forward under an approval policy: null when the identity's policy is
   * `never` (the caller sends as usual); otherwise it becomes a draft asked to be sent, which goes at
   * once when no recipient needs approval, and waits for the org admin when one does.
   */
  async throughPolicy(identityId: string, input: CreateDraftInput, hasAttachments: boolean): Promise<DraftView | null> {
    const identity = await this.store.inboxOf(identityId);
    if ((await this.settings.effective(identity)).approval === 'never') return null;
    if (hasAttachments) throw new AppError(400, 'validation_error', 'This identity\'s sends go through approval, and drafts carry no attachments yet: send without attachments, or ask the org admin to change the approval setting');
    const view = await this.create(identityId, input);
    return this.requestSend(identityId, view.draft._id, {});
  }

  /** Sends now, or queues the send for `when` (a persisted job; the send is once whoever runs it). */
  private async sendOrSchedule(draftId: string, when: Date | undefined): Promise<DraftView> {
    if (when && when.getTime() > Date.now()) {
      await this.jobs.schedule(when, SEND_DRAFT_JOB, { draftId });
      const draft = await this.drafts.findById(draftId).lean();
      return this.view(draft!);
    }
    return this.send(draftId);
  }

  /**
   * The scheduled job: sends the draft if it is still asked for, due, and approved where it must be.
   * Run twice, in two processes at once, or after a restart: the once is the outbound insert in send().
   */
  async sendWhenDue(draftId: string): Promise<void> {
    const draft = await this.drafts.findById(draftId).lean();
    if (!draft) return;
    const { status } = await this.view(draft);
    if (status !== 'scheduled' && status !== 'approved') return;
    if (draft.sendAt && draft.sendAt.getTime() > Date.now()) return; // moved later: the job for the new time sends it
    await this.send(draftId);
  }

  /** Sends the draft once: its message id is derived from the draft's, and a second insert is refused. */
  private async send(draftId: string): Promise<DraftView> {
    const draft = (await this.drafts.findById(draftId).lean())!;
    const options = { id: sentIdOf(draftId) };
    const from = draft.from ? { from: draft.from } : {};
    try {
      if (draft.kind === 'reply') {
        await this.outgoing.reply(draft.identityId, draft.original!, { text: draft.text, html: draft.html, replyAll: draft.replyAll, ...from }, options);
      } else if (draft.kind === 'forward') {
        await this.outgoing.forward(draft.identityId, draft.original!, { to: draft.to, cc: draft.cc, bcc: draft.bcc, text: draft.text, html: draft.html, ...from }, options);
      } else {
        await this.outgoing.send(draft.identityId, { to: draft.to, cc: draft.cc, bcc: draft.bcc, subject: draft.subject, text: draft.text, html: draft.html, ...from }, options);
      }
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      this.log.info({ draftId }, 'draft already sent by another run');
    }
    return this.view(draft);
  }

  /**
   * The org admin's decision, once (a unique insert per draft): approved sends it (now, or at its
   * sendAt), rejected keeps it unsent; the author hears draft.approved or draft.rejected.
   */
  async decide(orgId: string, draftId: string, decision: 'approved' | 'rejected', reason?: string): Promise<DraftView> {
    const draft = await this.ofOrg(orgId, draftId);
    const current = await this.view(draft);
    if (current.status !== 'pending_approval') {
      throw new AppError(409, 'not_pending_approval', `This draft is ${current.status.replace('_', ' ')}, not waiting for approval`);
    }
    try {
      await this.decisions.create({ _id: draftId, decision, orgId, ...(reason ? { reason } : {}), at: new Date() });
    } catch (err) {
      if (isDuplicateKey(err)) throw new AppError(409, 'already_decided', 'This draft was decided already');
      throw err;
    }
    const identity = await this.store.inboxOf(draft.identityId).catch(() => null);
    if (identity) {
      await this.events.emit(identity, decision === 'approved' ? 'draft.approved' : 'draft.rejected', {
        draftId, subject: draft.subject, to: draft.to, ...(reason ? { reason } : {}),
      }, `draft-decision:${draftId}`);
    }
    await this.logs.record({
      orgId, identityId: draft.identityId, action: `mail.draft_${decision}`, category: 'mail',
      description: `"${draft.subject.slice(0, 80)}" ${decision}${reason ? `: ${reason}` : ''}`, targetType: 'draft', targetId: draftId,
    });
    if (decision === 'approved') return this.sendOrSchedule(draftId, draft.sendAt);
    return this.view(draft);
  }
}

export function presentDraft(view: DraftView) {
  const { draft } = view;
  return {
    draftId: draft._id,
    status: view.status,
    kind: draft.kind,
    ...(draft.original ? { [draft.kind === 'reply' ? 'inReplyTo' : 'forwardOf']: draft.original } : {}),
    ...(draft.replyAll ? { replyAll: true } : {}),
    inboxId: draft.inboxId,
    to: draft.to, cc: draft.cc, bcc: draft.bcc, subject: draft.subject, text: draft.text,
    ...(draft.html !== undefined ? { html: draft.html } : {}),
    ...(draft.from ? { from: draft.from } : {}),
    sendAt: draft.sendAt?.toISOString() ?? null,
    ...(draft.approvalFor?.length ? { approvalFor: draft.approvalFor } : {}),
    ...(view.decision ? { decision: { decision: view.decision.decision, reason: view.decision.reason ?? null, at: view.decision.at.toISOString() } } : {}),
    ...(view.sent ? { message: presentSent(view.sent) } : {}),
    createdAt: draft.createdAt.toISOString(),
    updatedAt: draft.updatedAt.toISOString(),
  };
}
