import { z } from 'zod';
import { limitParam } from '../platform/pagination.js';

/** Inputs of the mail API, shared by the HTTP routes and the MCP tools so both accept exactly the same. */

export const MAX_LABEL_LENGTH = 64;
export const MAX_LABELS_PER_MESSAGE = 50;

const address = z.string().trim().max(254).pipe(z.email('must be an email address'));
const addressList = z.array(address).max(100);

export const label = z.string().trim().min(1).max(MAX_LABEL_LENGTH)
  // A comma could never be filtered on (labels=a,b is the list syntax); control characters are noise.
  .regex(/^[^,\p{Cc}]+$/u, 'must not contain commas or control characters');

const labelList = z.array(label).max(MAX_LABELS_PER_MESSAGE);

export const messageIdInput = z.string().trim().min(1).max(998).transform((id) => (id.startsWith('<') ? id : `<${id}>`));
export const threadIdInput = z.string().regex(/^thd_[0-9a-f]{16}$/, 'must be a thread id (thd_ and 16 hex characters)');

export const sendInput = z.object({
  to: addressList.min(1, 'give at least one recipient'),
  subject: z.string().max(998),
  text: z.string(),
  html: z.string().optional(),
  cc: addressList.optional(),
  bcc: addressList.optional(),
}).strict();

export const replyInput = z.object({
  text: z.string(),
  html: z.string().optional(),
}).strict();

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
export type ReplyInput = z.output<typeof replyInput>;
export type LabelsInput = z.output<typeof labelsInput>;
