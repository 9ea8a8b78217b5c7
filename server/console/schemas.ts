import { z } from 'zod';

/** An HTML form sends every field, empty ones as "": those mean "not given". */
const optional = <S extends z.ZodType>(schema: S) => z.preprocess((v) => (v === '' ? undefined : v), schema.optional());
const day = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date (YYYY-MM-DD)').refine((d) => {
  // Date.parse rolls 2024-02-31 over to March 2; only a date that reads back unchanged is real.
  const at = new Date(`${d}T00:00:00.000Z`);
  return !Number.isNaN(at.getTime()) && at.toISOString().slice(0, 10) === d;
}, 'is not a calendar date');
const id = z.string().regex(/^[a-z]+_[a-z0-9]{1,64}$/, 'malformed id');

export const idParam = z.object({ id });

export const signInForm = z.object({ key: z.string().trim().min(1, 'enter a key').max(200, 'is too long to be a key') });

export const paymentsQuery = z.object({
  status: optional(z.enum(['settled', 'held', 'verified', 'failed'])),
  endpoint: optional(id),
  payer: optional(z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed address')),
  from: optional(day),
  to: optional(day),
  pageToken: optional(z.string().max(512)),
}).refine((q) => !q.from || !q.to || q.from <= q.to, { message: 'must not be before "from"', path: ['to'] });
export type PaymentsQuery = z.output<typeof paymentsQuery>;

export const activityQuery = z.object({ limit: optional(z.coerce.number().int().min(1).max(100)) });

const checkbox = z.preprocess((v) => v === 'on', z.boolean());

/**
 * Endpoint forms, turned into the bodies of POST/PATCH /v0/payments/endpoints so the same schemas
 * (endpointBody, endpointPatch) validate both doors.
 */
export const endpointCreateForm = z.object({
  url: z.string(), priceUsdc: z.string(), description: optional(z.string()), webhookUrl: optional(z.string()),
  discoverable: checkbox, skipUrlCheck: checkbox,
}).transform(({ skipUrlCheck, ...rest }) => ({ ...rest, ...(skipUrlCheck ? { skipUrlCheck } : {}) }));

/** The edit form shows every field, so an emptied webhook URL removes the webhook and an unticked box clears discovery. */
export const endpointEditForm = z.object({
  priceUsdc: z.string(), description: z.string().default(''), webhookUrl: z.string().default(''), discoverable: checkbox,
}).transform((form) => ({ ...form, webhookUrl: form.webhookUrl.trim() === '' ? null : form.webhookUrl.trim() }));

export const sellerKeyForm = z.object({ name: optional(z.string()) });
