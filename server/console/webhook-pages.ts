import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { PaymentService } from '../payments/payment-service.js';
import { parseInput } from '../platform/validate.js';
import type { DeliveryFilter, WebhookService } from '../webhooks/webhook-service.js';
import { DELIVERY_STATES } from '../webhooks/state.js';
import { sessionOf, type ConsoleGuards } from './access.js';
import { dayBounds, deliveriesQuery, idParam, PAGE_SIZE, rawFilters } from './schemas.js';
import { webhooksPage, type DeliveryFilterValues } from './views/webhooks.js';
import { errorsByField } from './views/filters.js';
import { offsetOf } from './views/pager.js';
import { sendHtml, seeOther } from './render.js';


/** Where a retry form returns to: a console page of ours only (never an address from elsewhere). */
const retryForm = z.object({
  back: z.string().max(600).regex(/^\/console\/(webhooks|payments\/[a-z]+_[a-z0-9]{1,64})(\?[A-Za-z0-9_=&%.:+-]*)?$/, 'must be a console page').optional(),
  // What the page showed: a click that lands after the delivery moved on sends nothing again.
  round: z.coerce.number().int().min(0).max(1_000_000).optional(),
  attempt: z.coerce.number().int().min(0).max(1_000_000).optional(),
});

export interface WebhookPageDeps {
  webhooks: WebhookService;
  /** The org's endpoints, for the filter. */
  payments: { endpoints: Pick<PaymentService['endpoints'], 'list'> };
}

/** Webhook deliveries: the list by state with filters and numbered pages, and "retry now". */
export function webhookPages(router: Router, { webhooks, payments }: WebhookPageDeps, guards: ConsoleGuards): void {
  const orgOf = (ctx: Context) => sessionOf(ctx).orgId;

  router.get('/webhooks', guards.session, async (ctx) => {
    const orgId = orgOf(ctx);
    const parsed = deliveriesQuery.safeParse(ctx.query);
    const endpoints = await payments.endpoints.list(orgId);
    if (!parsed.success) {
      const values = rawFilters(ctx.query) as DeliveryFilterValues;
      return sendHtml(ctx, webhooksPage({ session: sessionOf(ctx), values, errors: errorsByField(parsed.error.issues), endpoints, deliveries: [], window: { page: 1, pageSize: PAGE_SIZE, total: 0 } }), 400);
    }
    const query = parsed.data;
    const filter: DeliveryFilter = { state: query.state, endpointId: query.endpoint, paymentId: query.payment, ...dayBounds(query) };
    const pageNumber = query.page ?? 1;
    // The tabs count each state under the other filters (counted in the database, one query each).
    const [deliveries, byState] = await Promise.all([
      webhooks.listPage(orgId, filter, offsetOf(pageNumber, PAGE_SIZE), PAGE_SIZE),
      webhooks.countByState(orgId, filter),
    ]);
    const total = query.state ? byState[query.state] : DELIVERY_STATES.reduce((sum, state) => sum + byState[state], 0);
    sendHtml(ctx, webhooksPage({ session: sessionOf(ctx), values: query, errors: {}, endpoints, deliveries, counts: byState, window: { page: pageNumber, pageSize: PAGE_SIZE, total } }));
  });

  router.post('/deliveries/:id/retry', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const raw = ctx.request.body as Record<string, unknown>;
    const { back, round, attempt } = parseInput(retryForm, { back: raw.back || undefined, round: raw.round || undefined, attempt: raw.attempt || undefined }, 'body');
    const seen = round !== undefined && attempt !== undefined ? { round, attemptCount: attempt } : undefined;
    const { delivery } = await webhooks.retryNow(orgOf(ctx), id, seen);
    seeOther(ctx, back ? (back.startsWith('/console/payments/') ? `${back}#webhook-title` : back) : `/console/payments/${delivery.paymentId}#webhook-title`);
  });
}
