import { z } from 'zod';
import { limitParam } from '../platform/pagination.js';

/** Inputs of the mail API, shared by the HTTP routes and the MCP tools so both accept exactly the same. */

export const MAX_LABEL_LENGTH = 64;

/** Labels that keep a message out of default lists, threads, unread and search: read only by asking for the label. */
export const HIDDEN_LABELS = ['blocked', 'unauthenticated'] as const;
export const MAX_LABELS_PER_MESSAGE = 50;

const address = z.string().trim().max(254).pipe(z.email('must be an email address'));
const addressList = z.array(address).max(100);
/** Who a message is from: one of the sender's own addresses (its inbox address, or one on a verified domain of its org). */
export const fromAddress = address.transform((a) => a.toLowerCase());

export const label = z.string().trim().min(1).max(MAX_LABEL_LENGTH)
  // A comma could never be filtered on (labels=a,b is the list syntax); control characters are noise.
  .regex(/^[^,\p{Cc}]+$/u, 'must not contain commas or control characters');

const labelList = z.array(label).max(MAX_LABELS_PER_MESSAGE);

/** At most this many attachments on one message (send, reply, forward). */
export const MAX_ATTACHMENTS = 20;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** One attachment on an outgoing message: its bytes base64-encoded (line breaks allowed, as `base64` wraps them). */
export const attachmentInput = z.object({
  filename: z.string().trim().min(1).max(255).regex(/^[^\p{Cc}]+$/u, 'must not contain control characters'),
  contentType: z.string().trim().toLowerCase().max(255)
    .regex(/^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/, 'must be a media type such as application/pdf').default('application/octet-stream'),
  content: z.string().transform((value) => value.replace(/[\r\n]/g, '')).refine((value) => BASE64.test(value), 'must be base64 (standard alphabet, with = padding)'),
  /** Set to show the attachment inside the HTML body as `<img src="cid:...">`. */
  contentId: z.string().trim().min(1).max(250).regex(/^[^<>\s]+$/, 'give the Content-ID without angle brackets').optional(),
}).strict();
const attachmentList = z.array(attachmentInput).max(MAX_ATTACHMENTS, `at most ${MAX_ATTACHMENTS} attachments per message`);

export const messageIdInput = z.string().trim().min(1).max(998).transform((id) => (id.startsWith('<') ? id : `<${id}>`));
export const threadIdInput = z.string().regex(/^thd_[0-9a-f]{16}$/, 'must be a thread id (thd_ and 16 hex characters)');

export const sendInput = z.object({
  to: addressList.min(1, 'give at least one recipient'),
  subject: z.string().max(998),
  text: z.string(),
  html: z.string().optional(),
  cc: addressList.optional(),
  bcc: addressList.optional(),
  attachments: attachmentList.optional(),
  /** One of the sender's addresses on a verified domain of its org; default: its inbox address. */
  from: fromAddress.optional(),
}).strict();

export const replyInput = z.object({
  text: z.string(),
  html: z.string().optional(),
  /** Also to everyone else the original went to (its To and Cc), on Cc, except this inbox itself. */
  replyAll: z.boolean().optional(),
  attachments: attachmentList.optional(),
  /** Default: the address of the sender's the original was sent to (on a custom domain), else its inbox address. */
  from: fromAddress.optional(),
}).strict();

export const forwardInput = z.object({
  to: addressList.min(1, 'give at least one recipient'),
  cc: addressList.optional(),
  bcc: addressList.optional(),
  /** A note above the forwarded message. */
  text: z.string().optional(),
  html: z.string().optional(),
  /** Files added to the ones the original carries (those are always forwarded). */
  attachments: attachmentList.optional(),
  from: fromAddress.optional(),
}).strict();

export const attachmentIdInput = z.string().regex(/^att_[0-9a-f]{24}$/, 'must be an attachment id (att_ and 24 hex characters)');

export const labelsInput = z.object({
  addLabels: labelList.optional(),
  removeLabels: labelList.optional(),
}).strict().refine((b) => b.addLabels !== undefined || b.removeLabels !== undefined, 'give addLabels, removeLabels or both');

/** `labels` arrives comma-separated in a query string and as an array from MCP; both become a list. */
const labelFilter = z.union([z.string(), z.array(z.string())])
  .transform((value) => (Array.isArray(value) ? value : value.split(',')).map((l) => l.trim()).filter(Boolean))
  .pipe(z.array(label).max(20));

export const listMessagesInput = z.object({
  limit: limitParam(50, 100),
  labels: labelFilter.optional(),
  pageToken: z.string().optional(),
});

export const listThreadsInput = z.object({
  limit: limitParam(50, 100),
  pageToken: z.string().optional(),
});

export type SendInput = z.output<typeof sendInput>;
export type AttachmentInput = z.output<typeof attachmentInput>;
export type ReplyInput = z.output<typeof replyInput>;
export type ForwardInput = z.output<typeof forwardInput>;
export type LabelsInput = z.output<typeof labelsInput>;
