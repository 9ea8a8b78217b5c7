import { Readable } from 'node:stream';
import type Router from '@koa/router';
import type { Context } from 'koa';
import type { ChainService } from '../chain/chain-service.js';
import type { DidService } from '../did/did-service.js';
import type { Logger } from '../platform/logger.js';
import { parseInput } from '../platform/validate.js';
import type { PaymentService } from '../payments/payment-service.js';
import type { PaymentFilter } from '../payments/records.js';
import type { PaymentDoc } from '../payments/models.js';
import type { DeliveryDoc } from '../webhooks/models.js';
import type { WebhookService } from '../webhooks/webhook-service.js';
import { deliveryState } from '../webhooks/state.js';
import { formatUsdc, parseCharge } from 'agentgate-x402-wire';
import { sessionOf, type ConsoleGuards } from './access.js';
import { classifySearch, dayBounds, DAY_MS, idParam, PAGE_SIZE, paymentsQuery, rawFilters, type PaymentsQuery } from './schemas.js';
import { checkOfferReceipt, checkSignedReceipt } from './receipt-check.js';
import { explorerTxUrl, solanaExplorerTxUrl } from './explorer.js';
import { csvLine } from '../platform/csv.js';
import { paymentRows, paymentsPage, type PaymentFilterValues } from './views/payments.js';
import { deliverySection, paymentPage, refundConfirmPage } from './views/payment.js';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AppError } from '../platform/errors.js';
import { errorsByField } from './views/filters.js';
import { offsetOf } from './views/pager.js';
import { isoDay } from './views/format.js';
import { sendHtml, seeOther } from './render.js';

/** The chart draws at most this many bars; a longer range puts several days in one bar. */
const MAX_BARS = 62;
/** Without a date filter, the chart shows the last 30 days. */
const DEFAULT_CHART_DAYS = 30;

function filterOf(query: PaymentsQuery): PaymentFilter {
  const search = query.q ? classifySearch(query.q) : undefined;
  return {
    status: query.status, network: query.network, endpointId: query.endpoint, payerAddress: query.payer,
    ...dayBounds(query),
    ...(search?.kind === 'payment' ? { paymentId: search.value } : {}),
    ...(search?.kind === 'tx' ? { txHash: search.value } : {}),
    ...(search?.kind === 'payer' ? { searchPayer: search.value } : {}),
  };
}

/** The chart's days: the filter's range, else the last 30 days; at most MAX_BARS bars. */
function chartBuckets(query: PaymentsQuery, now = new Date()): { buckets: Array<{ from: Date; until: Date }>; bucketDays: number } {
  const today = Date.parse(`${isoDay(now)}T00:00:00.000Z`);
  const { from, until } = dayBounds(query);
  const end = until?.getTime() ?? today + DAY_MS;
  const start = from?.getTime() ?? end - DEFAULT_CHART_DAYS * DAY_MS;
  const days = Math.max(1, Math.round((end - start) / DAY_MS));
  const bucketDays = Math.ceil(days / MAX_BARS);
  const buckets: Array<{ from: Date; until: Date }> = [];
  for (let at = start; at < end; at += bucketDays * DAY_MS) buckets.push({ from: new Date(at), until: new Date(Math.min(at + bucketDays * DAY_MS, end)) });
  return { buckets, bucketDays };
}

/** The payment's delivery, if the outbox has become one (another org's id cannot be reached: get is by org). */
async function deliveryOf(webhooks: WebhookService, payment: PaymentDoc): Promise<DeliveryDoc | undefined> {
  const id = payment.webhook?.deliveryId;
  return id ? webhooks.get(payment.orgId, id).catch(() => undefined) : undefined;
}


export interface PaymentPageDeps {
  payments: PaymentService;
  webhooks: WebhookService;
  /** The service's DID document, which the receipts are checked against. */
  did: DidService;
  /** The default network's chain; undefined when no chain is configured. */
  chain: ChainService | undefined;
  log: Logger;
}

/**
 * Payments: the filtered list with totals, a volume chart and numbered pages (its first page refreshes
 * itself); a CSV export of the same filter; one payment with receipts and webhook.
 */
export function paymentPages(router: Router, deps: PaymentPageDeps, guards: ConsoleGuards): void {
  const orgOf = (ctx: Context) => sessionOf(ctx).orgId;
  /** The networks this backend settles on, for the filter (v1 names, the default one first). */
  const networksOf = () => [...deps.payments.networks.map((n) => n.chain.network), ...deps.payments.solana.map((s) => s.scheme.chain.network)];

  router.get('/', guards.session, (ctx) => seeOther(ctx, '/console/payments'));

  router.get('/payments', guards.session, async (ctx) => {
    const orgId = orgOf(ctx);
    const parsed = paymentsQuery.safeParse(ctx.query);
    const endpoints = await deps.payments.endpoints.list(orgId);
    if (!parsed.success) {
      // A filter a person can fix (From after To, a malformed search) is shown on the form, not as an error page.
      const values = rawFilters(ctx.query) as PaymentFilterValues;
      return sendHtml(ctx, paymentsPage({ session: sessionOf(ctx), values, errors: errorsByField(parsed.error.issues), endpoints, networks: networksOf(), payments: [], deliveries: new Map(), window: { page: 1, pageSize: PAGE_SIZE, total: 0 } }), 400);
    }
    const query = parsed.data;
    const filter = filterOf(query);
    const pageNumber = query.page ?? 1;
    const chart = chartBuckets(query);
    // The totals read the records: this process's record updates first (records.ts).
    await deps.payments.records.recordsWritten();
    const [payments, { totals, volume: buckets }] = await Promise.all([
      deps.payments.records.listPage(orgId, filter, offsetOf(pageNumber, PAGE_SIZE), PAGE_SIZE),
      deps.payments.totals.of(orgId, filter, chart.buckets),
    ]);
    const deliveries = await deps.webhooks.summaryReader(orgId)(payments);
    sendHtml(ctx, paymentsPage({
      session: sessionOf(ctx), values: query, errors: {}, endpoints, networks: networksOf(), payments, deliveries, totals,
      window: { page: pageNumber, pageSize: PAGE_SIZE, total: totals.count }, chart: { buckets, bucketDays: chart.bucketDays },
    }));
  });

  // The live refresh: the newest page's rows under the same filters, as an HTML fragment.
  router.get('/payments/rows', guards.session, async (ctx) => {
    const query = parseInput(paymentsQuery, ctx.query, 'query');
    const payments = await deps.payments.records.listPage(orgOf(ctx), filterOf(query), 0, PAGE_SIZE);
    sendHtml(ctx, paymentRows(payments, await deps.webhooks.summaryReader(orgOf(ctx))(payments)));
  });

  // Every payment the filters match, newest first, streamed from a database cursor (never all in memory).
  router.get('/payments.csv', guards.session, async (ctx) => {
    const orgId = orgOf(ctx);
    const query = parseInput(paymentsQuery, ctx.query, 'query');
    const cursor = deps.payments.records.cursor(orgId, filterOf(query));
    const log = deps.log.child({ area: 'console' });
    const summaries = deps.webhooks.summaryReader(orgId);
    async function* lines() {
      yield csvLine(['payment_id', 'created_at', 'status', 'amount_usdc', 'amount_atomic', 'payer', 'recipient', 'resource', 'endpoint_id', 'network', 'tx_hash', 'settled_at', 'failure_reason', 'webhook']);
      let batch: PaymentDoc[] = [];
      const flush = async function* () {
        const deliveries = await summaries(batch);
        for (const p of batch) {
          const delivery = p.webhook?.deliveryId ? deliveries.get(p.webhook.deliveryId) : undefined;
          yield csvLine([p._id, p.createdAt.toISOString(), p.status, formatUsdc(BigInt(p.amountUsdcRaw)), p.amountUsdcRaw, p.payerAddress, p.recipientAddress, p.resourceUrl,
            p.endpointId, p.network, p.txHash, p.settledAt?.toISOString(), p.failureReason, delivery ? deliveryState(delivery) : p.webhook?.status]);
        }
        batch = [];
      };
      try {
        for await (const payment of cursor) {
          batch.push(payment);
          if (batch.length >= 200) yield* flush();
        }
        yield* flush();
      } catch (err) {
        // The headers are gone by now: the file ends short, and the log says why.
        log.error({ err, orgId }, 'payments CSV export failed');
        throw err;
      }
    }
    ctx.status = 200;
    ctx.type = 'text/csv; charset=utf-8';
    ctx.set('Content-Disposition', `attachment; filename="payments-${isoDay(new Date())}.csv"`);
    ctx.body = Readable.from(lines());
  });

  router.get('/payments/:id', guards.session, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const payment = await deps.payments.records.get(orgOf(ctx), id);
    const document = deps.did.serviceDocument();
    const [receiptCheck, offerReceiptCheck, delivery, endpoint] = await Promise.all([
      checkSignedReceipt(payment, document), checkOfferReceipt(payment, document), deliveryOf(deps.webhooks, payment),
      payment.endpointId ? deps.payments.endpoints.endpoints.findOne({ _id: payment.endpointId, orgId: payment.orgId }).lean() : null,
    ]);
    const [refunds, refundable] = await Promise.all([deps.payments.refunds.list(orgOf(ctx), id), deps.payments.refunds.refundable(payment)]);
    sendHtml(ctx, paymentPage({ session: sessionOf(ctx), payment, explorerUrl: payment.svm ? solanaExplorerTxUrl(deps.payments.solana.find((s) => s.scheme.chain.network === payment.network)?.scheme.chain, payment.txHash) : explorerTxUrl(deps.payments.network(payment.network)?.chain, payment.txHash), receiptCheck, offerReceiptCheck, delivery, endpoint: endpoint ?? undefined, refunds, refundable }));
  });

  // A refund: the form's submit shows what would go back to whom; only the confirmation page's button refunds.
  const refundForm = z.object({ amount: z.string().trim().max(32).optional(), reason: z.string().trim().min(1, 'give a reason').max(500), idempotencyKey: z.string().regex(/^[a-f0-9-]{36}$/).optional() });
  const readRefundForm = (ctx: Context) => {
    const raw = ctx.request.body as Record<string, unknown>;
    return parseInput(refundForm, { amount: raw.amount || undefined, reason: raw.reason, idempotencyKey: raw.idempotencyKey || undefined }, 'body');
  };
  const refusedPage = async (ctx: Context, id: string, message: string, status: number) => {
    const payment = await deps.payments.records.get(orgOf(ctx), id);
    sendHtml(ctx, paymentPage({ session: sessionOf(ctx), payment, refunds: await deps.payments.refunds.list(orgOf(ctx), id), refundable: await deps.payments.refunds.refundable(payment), refundError: message }), status);
  };
  router.post('/payments/:id/refund', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const payment = await deps.payments.records.get(orgOf(ctx), id);
    let form;
    try { form = readRefundForm(ctx); } catch (err) { return refusedPage(ctx, id, (err as Error).message, 400); }
    const left = BigInt(payment.amountUsdcRaw) - BigInt(payment.refundedUsdcRaw ?? '0');
    let amountUsdcRaw = left;
    if (form.amount) {
      try { amountUsdcRaw = parseCharge(form.amount); } catch { return refusedPage(ctx, id, `${form.amount} is not a USDC amount`, 400); }
    }
    if (payment.status !== 'settled' || !(await deps.payments.refunds.refundable(payment))) return refusedPage(ctx, id, 'This payment cannot be refunded: only a captured auth-capture payment, or an exact one paid to an agentgate wallet of this org, can', 409);
    if (amountUsdcRaw <= 0n || amountUsdcRaw > left) return refusedPage(ctx, id, `At most ${formatUsdc(left)} USDC can be refunded`, 409);
    sendHtml(ctx, refundConfirmPage({ session: sessionOf(ctx), payment, amountUsdcRaw: amountUsdcRaw.toString(), ...(form.amount ? { amount: form.amount } : {}), reason: form.reason, idempotencyKey: randomUUID() }));
  });
  router.post('/payments/:id/refund/confirm', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    let form;
    try { form = readRefundForm(ctx); } catch (err) { return refusedPage(ctx, id, (err as Error).message, 400); }
    try {
      await deps.payments.refunds.refund(orgOf(ctx), id, { reason: form.reason, ...(form.amount ? { amount: form.amount } : {}), ...(form.idempotencyKey ? { idempotencyKey: form.idempotencyKey } : {}) });
    } catch (err) {
      if (err instanceof AppError && err.status < 500 && err.status !== 404) return refusedPage(ctx, id, `Refund refused: ${err.message}`, err.status);
      throw err;
    }
    seeOther(ctx, `/console/payments/${id}#refunds-title`);
  });

  router.get('/payments/:id/delivery', guards.session, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const payment = await deps.payments.records.get(orgOf(ctx), id);
    sendHtml(ctx, deliverySection(sessionOf(ctx), payment, await deliveryOf(deps.webhooks, payment)));
  });
}
