import type Router from '@koa/router';
import type { Context } from 'koa';
import type { AppContext } from '../context.js';
import { parseInput } from '../platform/validate.js';
import { decodeCursor } from '../platform/pagination.js';
import type { PaymentFilter } from '../payments/payment-service.js';
import type { PaymentDoc } from '../payments/models.js';
import type { DeliveryDoc } from '../webhooks/models.js';
import { sessionOf, type ConsoleGuards } from './access.js';
import { idParam, paymentsQuery, type PaymentsQuery } from './schemas.js';
import { checkOfferReceipt, checkSignedReceipt } from './receipt-check.js';
import { explorerTxUrl } from './explorer.js';
import { paymentRows, paymentsPage } from './views/payments.js';
import { deliverySection, paymentPage } from './views/payment.js';
import { sendHtml, seeOther } from './render.js';

const PAGE_SIZE = 25;
const DAY_MS = 24 * 60 * 60 * 1000;

function filterOf(query: PaymentsQuery): PaymentFilter {
  return {
    status: query.status, endpointId: query.endpoint, payerAddress: query.payer,
    from: query.from ? new Date(`${query.from}T00:00:00.000Z`) : undefined,
    // "To" is inclusive of its whole day.
    until: query.to ? new Date(Date.parse(`${query.to}T00:00:00.000Z`) + DAY_MS) : undefined,
  };
}

/** The payment's delivery, if the outbox has become one (another org's id cannot be reached: get is by org). */
async function deliveryOf(app: AppContext, payment: PaymentDoc): Promise<DeliveryDoc | undefined> {
  const id = payment.webhook?.deliveryId;
  return id ? app.webhooks.get(payment.orgId, id).catch(() => undefined) : undefined;
}

/** Payments: the filtered, paged list with its live-refreshed first page; one payment with receipts and webhook. */
export function paymentPages(router: Router, app: AppContext, guards: ConsoleGuards): void {
  const orgOf = (ctx: Context) => sessionOf(ctx).orgId;

  router.get('/', guards.session, (ctx) => seeOther(ctx, '/console/payments'));

  router.get('/payments', guards.session, async (ctx) => {
    const query = parseInput(paymentsQuery, ctx.query, 'query');
    const [page, endpoints] = await Promise.all([
      app.payments.list(orgOf(ctx), PAGE_SIZE, query.pageToken ? decodeCursor(query.pageToken) : undefined, filterOf(query)),
      app.payments.listEndpoints(orgOf(ctx)),
    ]);
    sendHtml(ctx, paymentsPage({ session: sessionOf(ctx), query, payments: page.items, nextPageToken: page.nextPageToken, endpoints }));
  });

  // The live refresh: the newest page's rows under the same filters, as an HTML fragment.
  router.get('/payments/rows', guards.session, async (ctx) => {
    const query = parseInput(paymentsQuery, ctx.query, 'query');
    const page = await app.payments.list(orgOf(ctx), PAGE_SIZE, undefined, filterOf(query));
    sendHtml(ctx, paymentRows(page.items));
  });

  router.get('/payments/:id', guards.session, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const payment = await app.payments.get(orgOf(ctx), id);
    const document = app.did.serviceDocument();
    const [receiptCheck, offerReceiptCheck, delivery] = await Promise.all([
      checkSignedReceipt(payment, document), checkOfferReceipt(payment, document), deliveryOf(app, payment),
    ]);
    sendHtml(ctx, paymentPage({ session: sessionOf(ctx), payment, explorerUrl: explorerTxUrl(app.chain, payment.txHash), receiptCheck, offerReceiptCheck, delivery }));
  });

  router.get('/payments/:id/delivery', guards.session, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const payment = await app.payments.get(orgOf(ctx), id);
    sendHtml(ctx, deliverySection(sessionOf(ctx), payment, await deliveryOf(app, payment)));
  });

  router.post('/deliveries/:id/retry', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const delivery = await app.webhooks.retry(orgOf(ctx), id);
    seeOther(ctx, `/console/payments/${delivery.paymentId}#webhook-title`);
  });
}
