import { z } from 'zod';
import { authenticatedRouter, principalOf, requireTier, type AuthDeps } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { badRequest } from '../platform/errors.js';
import { monthInput, monthOf, monthsFrom } from './months.js';
import { presentUsage, usageCsv } from './report.js';
import type { UsageMeter } from './usage-meter.js';

/** The longest range one export covers. */
export const MAX_EXPORT_MONTHS = 24;

export const usageQuery = z.strictObject({ month: monthInput.optional() });
export const usageExportQuery = z.strictObject({ from: monthInput.optional(), to: monthInput.optional() });

export interface UsageRouteDeps extends AuthDeps {
  meter: UsageMeter;
}

/**
 * The org's usage (platform and seller keys): GET /v0/usage for one month with its plan's quotas, and
 * GET /v0/usage/export for months as CSV. An identity key sees none of it: usage is the org's account.
 */
export function usageRoutes({ keys, identities, meter }: UsageRouteDeps) {
  const router = authenticatedRouter({ keys, identities });
  const orgOnly = requireTier('platform', 'seller');

  router.get('/v0/usage', orgOnly, async (ctx) => {
    const { month } = parseInput(usageQuery, ctx.query, 'query');
    ctx.body = presentUsage(await meter.report(principalOf(ctx).orgId, month ?? monthOf()));
  });

  router.get('/v0/usage/export', orgOnly, async (ctx) => {
    const query = parseInput(usageExportQuery, ctx.query, 'query');
    const to = query.to ?? monthOf();
    const from = query.from ?? to;
    if (from > to) throw badRequest(`query.from: ${from} is after query.to ${to}`);
    const months = monthsFrom(from, to);
    if (months.length > MAX_EXPORT_MONTHS) throw badRequest(`query: at most ${MAX_EXPORT_MONTHS} months per export (${from} to ${to} is ${months.length})`);
    const orgId = principalOf(ctx).orgId;
    ctx.type = 'text/csv; charset=utf-8';
    ctx.set('Content-Disposition', `attachment; filename="usage-${orgId}-${from}-${to}.csv"`);
    ctx.body = await usageCsv(meter, orgId, months);
  });
  return router;
}
