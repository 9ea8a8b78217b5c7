import { z } from 'zod';
import { PAYMENT_STATUSES } from '../payments/models.js';
import { anyNetworkName } from '../platform/network-name.js';
import { DELIVERY_STATES } from '../webhooks/state.js';

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

const pageNumber = optional(z.coerce.number().int().min(1).max(100_000));

/** What the payments search box accepts: a payment id, a transaction hash, or a payer address. */
export type PaymentSearch = { kind: 'payment'; value: string } | { kind: 'tx'; value: string } | { kind: 'payer'; value: string };
export function classifySearch(text: string): PaymentSearch | undefined {
  if (/^pay_[a-z0-9]{1,64}$/.test(text)) return { kind: 'payment', value: text };
  if (/^0x[0-9a-fA-F]{64}$/.test(text)) return { kind: 'tx', value: text };
  if (/^0x[0-9a-fA-F]{40}$/.test(text)) return { kind: 'payer', value: text };
  return undefined;
}

const dateRange = { from: optional(day), to: optional(day) };

/** Rows per numbered page of the payments and webhooks lists. */
export const PAGE_SIZE = 25;
export const DAY_MS = 24 * 60 * 60 * 1000;

/** A From/To pair of UTC days as a half-open time range: "To" is inclusive of its whole day. */
export function dayBounds(range: { from?: string; to?: string }): { from?: Date; until?: Date } {
  return {
    from: range.from ? new Date(`${range.from}T00:00:00.000Z`) : undefined,
    until: range.to ? new Date(Date.parse(`${range.to}T00:00:00.000Z`) + DAY_MS) : undefined,
  };
}
const rangeInOrder = (q: { from?: string; to?: string }) => !q.from || !q.to || q.from <= q.to;
const rangeMessage = { message: 'must not be before "From"', path: ['to'] };

export const paymentsQuery = z.object({
  status: optional(z.enum(PAYMENT_STATUSES)),
  network: optional(anyNetworkName),
  endpoint: optional(id),
  payer: optional(z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed address')),
  q: optional(z.string().trim().max(100, 'is too long').refine((text) => text === '' || !!classifySearch(text), 'enter a payment id (pay_…), a transaction hash (0x + 64 hex digits) or a payer address (0x + 40 hex digits)')),
  ...dateRange,
  page: pageNumber,
}).refine(rangeInOrder, rangeMessage);
export type PaymentsQuery = z.output<typeof paymentsQuery>;

export const deliveriesQuery = z.object({
  state: optional(z.enum(DELIVERY_STATES)),
  endpoint: optional(id),
  payment: optional(id),
  ...dateRange,
  page: pageNumber,
}).refine(rangeInOrder, rangeMessage);
export type DeliveriesQuery = z.output<typeof deliveriesQuery>;

export const activityQuery = z.object({ page: pageNumber });

/** The channels and channel-calls pages: older rows from a page token the previous page gave. */
export const cursorQuery = z.object({ cursor: optional(z.string().max(512).regex(/^[A-Za-z0-9_-]+$/, 'is not a page link this console made')) });
export const channelIdParam = z.object({ channelId: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a channel id (0x and 64 hex digits)').transform((v) => v.toLowerCase()) });

/** The form's own fields: the values as typed (for showing them again) when a filter is refused. */
export const rawFilters = (query: Record<string, unknown>): Record<string, string> =>
  Object.fromEntries(Object.entries(query).filter(([, v]) => typeof v === 'string').map(([k, v]) => [k, (v as string).slice(0, 200)]));

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
