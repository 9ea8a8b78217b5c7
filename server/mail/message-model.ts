import { Schema } from 'mongoose';
import type { AttachmentRef } from './attachment-store.js';
import type { Authentication } from './mail-auth.js';


export type DeliveryStatus = 'queued' | 'retrying' | 'delivered' | 'partially_failed' | 'failed';

export interface RecipientResult {
  address: string;
  status: 'pending' | 'delivered' | 'failed';
  error?: string;
}

/** Outbound state of a sent message; what the sender sees of the SMTP conversation. */
export interface Delivery {
  status: DeliveryStatus;
  attempts: number;
  recipients: RecipientResult[];
  lastError?: string;
  updatedAt: Date;
}

/**
 * One message in one inbox. The same RFC Message-ID can live in several inboxes (the sender's sent copy
 * and each local recipient's received copy), so the document id is our own and (inboxId, messageId,
 * direction) is unique — which also makes a redelivered SMTP message a no-op.
 */
export interface MessageDoc {
  _id: string;
  messageId: string;
  identityId: string;
  inboxId: string;
  threadId: string;
  direction: 'sent' | 'received';
  from: string[];
  to: string[];
  cc: string[];
  bcc: string[];
  replyTo: string[];
  subject: string;
  text: string;
  html?: string;
  extractedText?: string;
  inReplyTo?: string;
  references: string[];
  labels: string[];
  /** Name, type and size of each attachment; the bytes are in GridFS (attachment-store.ts). */
  attachments?: AttachmentRef[];
  createdAt: Date;
  /** sortKeyOf(createdAt, _id): the list order and the cursor in one indexed field. */
  sortKey: string;
  /** The message's position in its inbox and its page bucket (inbox-sequence.ts): what lists page by. */
  listSeq?: number;
  listBucket?: string;
  /** Received mail: who really sent it (mail-auth.ts), checked once as it arrived. */
  authentication?: Authentication;
  /** Received over the trusted path from another inbox of this server: the sender's org. Never shown. */
  senderOrgId?: string;
  /** Joined from the message's outbound record on single reads of sent mail; never stored on the message. */
  delivery?: Delivery;
}

const attachmentRefSchema = new Schema<AttachmentRef>({
  attachmentId: { type: String, required: true },
  filename: { type: String, required: true },
  contentType: { type: String, required: true },
  size: { type: Number, required: true },
  contentId: String,
  inline: Boolean,
}, { _id: false, versionKey: false });

const recipientSchema = new Schema<RecipientResult>({ address: String, status: String, error: String }, { _id: false });

export const messageSchema = new Schema<MessageDoc>({
  _id: String,
  messageId: { type: String, required: true },
  identityId: { type: String, required: true },
  inboxId: { type: String, required: true },
  threadId: { type: String, required: true },
  direction: { type: String, required: true },
  from: [String],
  to: [String],
  cc: [String],
  bcc: [String],
  replyTo: [String],
  subject: { type: String, default: '' },
  text: { type: String, default: '' },
  html: String,
  extractedText: String,
  inReplyTo: String,
  references: [String],
  labels: [String],
  attachments: { type: [attachmentRefSchema], default: undefined },
  createdAt: { type: Date, required: true },
  sortKey: { type: String, required: true },
  listSeq: Number,
  listBucket: String,
  authentication: { type: Schema.Types.Mixed, default: undefined },
  senderOrgId: String,
}, { versionKey: false });
// The list query: an equality on inboxId and one range on sortKey, so MongoDB walks exactly one page of
// this index whatever the cursor's depth (a (createdAt, _id) cursor needs an $or, which does not bound
// the scan as tightly).
messageSchema.index({ inboxId: 1, sortKey: -1 });
messageSchema.index({ listBucket: 1 });
messageSchema.index({ inboxId: 1, messageId: 1, direction: 1 }, { unique: true });
messageSchema.index({ threadId: 1, createdAt: 1, _id: 1 });

/**
 * The outbound side of one sent message, in its own collection: the delivery worker writes here and only
 * here. On FerretDB 1.x every update rewrites the whole document, so a worker recording an SMTP outcome
 * on the message itself would undo a label edit made meanwhile.
 */
export interface OutboundDoc extends Delivery {
  _id: string; // the sent message's document id
  from: string;
  /** The RFC 5322 bytes handed to SMTP (never with a Bcc header); empty when they are in GridFS (`rawFileId`). */
  raw: string;
  /** A message too large to keep in this document (attachments) is kept in GridFS under this id. */
  rawFileId?: string;
}

export const outboundSchema = new Schema<OutboundDoc>({
  _id: String,
  from: { type: String, required: true },
  raw: { type: String, default: '', select: false },
  rawFileId: String,
  status: { type: String, required: true },
  attempts: { type: Number, required: true },
  recipients: [recipientSchema],
  lastError: String,
  updatedAt: { type: Date, required: true },
}, { versionKey: false });

/** A conversation within one inbox. */
export interface ThreadDoc {
  _id: string; // threadId
  identityId: string;
  inboxId: string;
  subject: string;
  messageCount: number;
  createdAt: Date;
  updatedAt: Date;
  /** sortKeyOf(updatedAt, _id), raised together with updatedAt. */
  sortKey: string;
}

export const threadSchema = new Schema<ThreadDoc>({
  _id: String,
  identityId: { type: String, required: true },
  inboxId: { type: String, required: true },
  subject: { type: String, default: '' },
  messageCount: { type: Number, required: true },
  createdAt: { type: Date, required: true },
  updatedAt: { type: Date, required: true },
  sortKey: { type: String, required: true },
}, { versionKey: false });
threadSchema.index({ inboxId: 1, sortKey: -1 });
