import { z } from 'zod';
import { metadataRecord } from '../platform/json-input.js';

/** A date (all-day events) or a date-time with an offset (timed events). */
export const dateOrDateTime = z.union([z.iso.date(), z.iso.datetime({ offset: true })], { error: 'must be an ISO 8601 date (YYYY-MM-DD) or date-time with offset' });


const fields = {
  title: z.string().trim().min(1).max(500),
  description: z.string().max(10_000),
  startAt: dateOrDateTime,
  endAt: dateOrDateTime,
  isAllDay: z.boolean(),
  location: z.string().max(1_000),
  metadata: metadataRecord,
};

export const createEventBody = z.object({
  title: fields.title,
  description: fields.description.optional(),
  startAt: fields.startAt,
  endAt: fields.endAt.optional(),
  isAllDay: fields.isAllDay.optional(),
  location: fields.location.optional(),
  metadata: fields.metadata.optional(),
}).strict();

export const updateEventBody = z.object({
  title: fields.title.optional(),
  description: fields.description.optional(),
  startAt: fields.startAt.optional(),
  endAt: fields.endAt.optional(),
  isAllDay: fields.isAllDay.optional(),
  location: fields.location.optional(),
  metadata: fields.metadata.optional(),
}).strict().refine((b) => Object.keys(b).length > 0, 'give at least one field to change');

export const listQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50),
  from: dateOrDateTime.optional(),
  to: dateOrDateTime.optional(),
}).refine((q) => !q.from || !q.to || new Date(q.from) < new Date(q.to), { message: 'must be after from', path: ['to'] });

export const eventParams = z.object({ eventId: z.string().regex(/^evt_[a-z0-9]{24}$/, 'must be an event id (evt_...)') });
export const publicBody = z.object({ enabled: z.boolean() }).strict();
export const feedParams = z.object({ token: z.string().regex(/^[A-Za-z0-9_-]{43}$/) });

export type EventInput = z.output<typeof createEventBody>;
