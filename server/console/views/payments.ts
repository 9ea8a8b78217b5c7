import { html, type SafeHtml } from '../html.js';
import type { PaymentDoc, EndpointDoc } from '../../payments/models.js';
import type { PaymentTotals, VolumeBucket } from '../../payments/payment-totals.js';
import type { DeliveryDoc } from '../../webhooks/models.js';
import { deliveryState } from '../../webhooks/state.js';
import type { LiveSession } from '../sessions.js';
import { page } from './layout.js';
import { badge, shortHex, time, usdc } from './format.js';
import { dayInput, endpointSelect, fieldError, filterAlert, invalid, selected, type FieldErrors } from './filters.js';
import { PAYMENT_STATUSES } from '../../payments/models.js';
import { pager, queryString, showing, type PageWindow } from './pager.js';
import { volumeChart } from './chart.js';
import { findNetwork } from 'agentgate-x402-wire';

/** The payments filters as the form sent them (strings; checked or not). */
export interface PaymentFilterValues { status?: string; network?: string; endpoint?: string; payer?: string; q?: string; from?: string; to?: string }

const FILTER_NAMES = ['q', 'status', 'network', 'endpoint', 'payer', 'from', 'to'] as const;

/** A network as people read it ("Polygon Amoy"), from its v1 name. */
const networkLabel = (name: string) => findNetwork(name)?.label ?? name;

/** The filters as a query string, so paging, the live refresh and the CSV export keep them. */
export function filterQueryString(values: PaymentFilterValues, extra: Record<string, string | number> = {}): string {
  return queryString({ ...Object.fromEntries(FILTER_NAMES.map((n) => [n, values[n]])), ...extra });
}

export type DeliverySummary = Pick<DeliveryDoc, '_id' | 'status' | 'lastError' | 'attemptCount' | 'nextAttemptAt'>;

/** The webhook column: the delivery's state, or why there is none. */
function webhookCell(p: PaymentDoc, deliveries: Map<string, DeliverySummary>): SafeHtml {
  const id = p.webhook?.deliveryId;
  const delivery = id ? deliveries.get(id) : undefined;
  if (delivery) return html`<a href="/console/payments/${p._id}#webhook-title" class="badge-link">${badge(deliveryState(delivery))}</a>`;
  if (p.webhook?.status === 'pending') return badge('pending');
  if (p.webhook?.status === 'skipped') return html`<span class="muted" title="The endpoint had no webhook URL when it was dispatched">skipped</span>`;
  return html`<span class="muted" title="No webhook for this payment">—</span>`;
}

/** The table body alone: the live refresh fetches and swaps exactly this. */
export function paymentRows(payments: PaymentDoc[], deliveries: Map<string, DeliverySummary>): SafeHtml {
  if (payments.length === 0) return html`<tr><td colspan="8" class="empty">No payments match.</td></tr>`;
  return html`${payments.map((p) => html`<tr data-payment-id="${p._id}">
    <td data-label="Time" class="nowrap"><a href="/console/payments/${p._id}">${time(p.createdAt)}</a></td>
    <td data-label="Amount" class="num">${usdc(p.amountUsdcRaw)} <span class="unit">USDC</span></td>
    <td data-label="Payer">${shortHex(p.payerAddress)}</td>
    <td data-label="Resource" class="resource" title="${p.resourceUrl}">${p.resourceUrl}</td>
    <td data-label="Network" class="nowrap">${networkLabel(p.network)}</td>
    <td data-label="Status">${badge(p.status)}</td>
    <td data-label="Webhook" data-webhook>${webhookCell(p, deliveries)}</td>
    <td data-label="Transaction">${shortHex(p.txHash)}</td>
  </tr>`)}`;
}

export interface PaymentsPageInput {
  session: LiveSession;
  values: PaymentFilterValues;
  errors: FieldErrors;
  endpoints: EndpointDoc[];
  /** The networks this backend settles on (v1 names): the filter's choices. */
  networks: string[];
  payments: PaymentDoc[];
  deliveries: Map<string, DeliverySummary>;
  window: PageWindow;
  totals?: PaymentTotals;
  chart?: { buckets: VolumeBucket[]; bucketDays: number };
}

export function paymentsPage(input: PaymentsPageInput): SafeHtml {
  const { values, errors, totals } = input;
  const firstPage = input.window.page === 1;
  const refused = Object.keys(errors).length > 0;
  const qs = filterQueryString(values);
  return page({
    title: 'Payments', section: 'payments', session: input.session,
    body: html`<div class="page-head">
      <h1>Payments</h1>
      <p class="muted" id="live-status" role="status" aria-live="polite">${refused ? '' : firstPage ? 'Live: new payments appear here by themselves.' : 'Showing older payments; live updates are paused on this page.'}</p>
    </div>
    <form method="get" action="/console/payments" class="card filters" aria-label="Filter payments" novalidate>
      ${filterAlert(errors)}
      <div class="field wide"><label for="f-q">Search</label>
        <input id="f-q" name="q" type="search" value="${values.q ?? ''}" placeholder="Payment id (pay_…), transaction hash or payer" spellcheck="false" maxlength="100" autocomplete="off"${invalid(errors, 'q')}>
        ${fieldError(errors, 'q')}</div>
      <div class="field"><label for="f-status">Status</label>
        <select id="f-status" name="status"${invalid(errors, 'status')}>
          <option value="">Any</option>
          ${PAYMENT_STATUSES.map((s) => html`<option value="${s}"${selected(values.status, s)}>${s}</option>`)}
        </select>${fieldError(errors, 'status')}</div>
      <div class="field"><label for="f-network">Network</label>
        <select id="f-network" name="network"${invalid(errors, 'network')}>
          <option value="">Any</option>
          ${[...new Set([...input.networks, ...(values.network ? [values.network] : [])])].map((n) => html`<option value="${n}"${selected(values.network, n)}>${networkLabel(n)}</option>`)}
        </select>${fieldError(errors, 'network')}</div>
      ${endpointSelect({ id: 'f-endpoint', value: values.endpoint, endpoints: input.endpoints, errors })}
      <div class="field"><label for="f-payer">Payer address</label>
        <input id="f-payer" name="payer" value="${values.payer ?? ''}" placeholder="0x…" spellcheck="false" maxlength="42"${invalid(errors, 'payer')}>
        ${fieldError(errors, 'payer')}</div>
      ${dayInput({ id: 'f-from', name: 'from', label: 'From (UTC)', value: values.from, errors })}
      ${dayInput({ id: 'f-to', name: 'to', label: 'To (UTC, inclusive)', value: values.to, errors })}
      <div class="field actions"><button type="submit" class="button">Apply</button><a href="/console/payments" class="button-quiet">Clear</a></div>
    </form>
    ${totals ? html`<section class="card summary" aria-label="Totals for these filters">
      <dl class="totals">
        <div><dt>Payments</dt><dd data-total="count">${totals.count}</dd></div>
        <div><dt>Volume (settled)</dt><dd data-total="volume">${usdc(totals.volumeAtomic.toString())} <span class="unit">USDC</span></dd></div>
        <div><dt>Settled</dt><dd data-total="settled">${totals.settled}</dd></div>
        <div><dt>Failed</dt><dd data-total="failed">${totals.failed}</dd></div>
      </dl>
      ${totals.byNetwork.length > 1 ? html`<table class="network-totals" aria-label="Totals per network">
        <thead><tr><th scope="col">Network</th><th scope="col" class="num">Payments</th><th scope="col" class="num">Volume (settled)</th><th scope="col" class="num">Settled</th><th scope="col" class="num">Failed</th></tr></thead>
        <tbody>${totals.byNetwork.map((n) => html`<tr data-network="${n.network}"><th scope="row">${networkLabel(n.network)}</th><td class="num">${n.count}</td><td class="num">${usdc(n.volumeAtomic.toString())} <span class="unit">USDC</span></td><td class="num">${n.settled}</td><td class="num">${n.failed}</td></tr>`)}</tbody>
      </table>` : ''}
      ${input.chart ? volumeChart(input.chart.buckets, input.chart.bucketDays) : ''}
    </section>` : ''}
    <div class="list-head">
      ${refused ? html`<p class="muted">Nothing is listed until the filter is fixed.</p>` : showing(input.window, 'payments')}
      ${refused ? '' : html`<a class="button-quiet" href="/console/payments.csv${qs}" download>Export CSV</a>`}
    </div>
    <div class="card table-card">
      <table class="stack-narrow">
        <caption class="sr-only">Payments, newest first</caption>
        <thead><tr><th scope="col">Time</th><th scope="col" class="num">Amount</th><th scope="col">Payer</th><th scope="col">Resource</th><th scope="col">Network</th><th scope="col">Status</th><th scope="col">Webhook</th><th scope="col">Transaction</th></tr></thead>
        <tbody id="payment-rows"${firstPage && !refused ? html` data-live="/console/payments/rows${qs}" data-live-status="live-status"` : ''}>
          ${paymentRows(input.payments, input.deliveries)}
        </tbody>
      </table>
    </div>
    ${pager(input.window, (n) => `/console/payments${filterQueryString(values, { page: n })}`)}`,
  });
}
