import { z } from 'zod';
import { limitParam } from '../platform/pagination.js';

/** Channel ids as the platform writes them (C…, G…, D…); names are not accepted, so a rename cannot redirect a post. */
const channelId = z.string().regex(/^[CGD][A-Z0-9]{2,30}$/, 'must be a channel id such as C0123ABCD (see GET /v0/chat/channels)');
/** Platform message timestamps: seconds, a dot, microseconds. */
const ts = z.string().regex(/^\d{9,11}\.\d{6}$/, 'must be a message ts such as 1700000000.000100');

export const sendBody = z.object({
  channel: channelId,
  text: z.string().trim().min(1, 'must not be empty').max(40_000),
  threadTs: ts.optional(),
}).strict();

export const listMessagesQuery = z.object({
  channel: channelId.optional(),
  since: z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time, e.g. the receivedAt of the newest message you have' })
    .transform((value) => new Date(value)).optional(),
  limit: limitParam(50, 100),
  pageToken: z.string().optional(),
}).strict();

export const installParams = z.object({ state: z.string().regex(/^[A-Za-z0-9_-]{32}$/) });

export const callbackQuery = z.object({
  state: z.string().regex(/^[A-Za-z0-9_-]{32}$/),
  code: z.string().min(1).max(500).optional(),
  error: z.string().max(200).optional(),
});
