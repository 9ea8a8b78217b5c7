import { z } from 'zod';
import { MAX_MANDATE_CAP_ATOMIC, usdcAmount } from './amounts.js';
import { outgoingHeaderValue } from '../platform/json-input.js';
import { limitParam } from '../platform/pagination.js';
import { anyNetworkName } from '../platform/network-name.js';

const cap = usdcAmount.refine((a) => a > 0n && a <= MAX_MANDATE_CAP_ATOMIC, 'must be more than 0 and at most 1000000');
const hostRule = z.string().trim().toLowerCase().max(253)
  .regex(/^(\*\.)?[a-z0-9-]+(\.[a-z0-9-]+)*(:\d{1,5})?$/, 'must be a host name like api.example.com or *.example.com');

export const mandateBody = z.object({
  maxPerCallUsdc: cap,
  dailyCapUsdc: cap,
  validUntil: z.iso.datetime({ offset: true }).transform((text) => new Date(text)),
  allowedHosts: z.array(hostRule).max(50).optional(),
}).strict();

export type MandateBody = z.output<typeof mandateBody>;

export const mandateIdParam = z.object({ id: z.string().regex(/^mdt_[a-z0-9]{1,64}$/, 'malformed mandate id') });

const headerName = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/, 'must be an HTTP header name');

/** POST /v0/payments/pay and the MCP tool `payments_pay` take the same input. */
export const payBody = z.object({
  url: z.url({ protocol: /^https?$/ }).max(2048),
  method: z.string().toUpperCase().pipe(z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'])).optional(),
  headers: z.record(headerName, outgoingHeaderValue).refine((h) => Object.keys(h).length <= 50, 'at most 50 headers').optional(),
  body: z.union([z.string(), z.record(z.string(), z.unknown()), z.array(z.unknown())]).optional(),
  maxAmountUsdc: usdcAmount.optional(),
  /** DESIGN.md's spelling of maxAmountUsdc. */
  maxAmount: usdcAmount.optional(),
  dryRun: z.boolean().optional(),
  mandateId: z.string().regex(/^mdt_[a-z0-9]{1,64}$/, 'malformed mandate id').optional(),
  /** Pay only on this network; unset: the best offer on a network where the wallet holds the price (docs/agents/wallet.md, "On several networks"). */
  network: anyNetworkName.optional(),
}).strict();

export type PayBody = z.output<typeof payBody>;

/** GET /v0/payments/activity's query and the MCP tool `payments_list_activity`'s input. */
export const activityQuery = z.object({ limit: limitParam(), pageToken: z.string().optional() });

export type ActivityQuery = z.output<typeof activityQuery>;

/** A payment channel's id (bytes32) in a path: /v0/wallet/channels/{id}. */
export const channelIdParam = z.object({ id: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a channel id (0x and 64 hex digits)').transform((id) => id.toLowerCase()) });
