import { html, type SafeHtml } from '../html.js';
import type { PaymentDoc, EndpointDoc } from '../../payments/models.js';
import type { LiveSession } from '../sessions.js';
import type { PaymentsQuery } from '../schemas.js';
import { page } from './layout.js';
import { badge, shortHex, time, usdc } from './format.js';

/** The filters as a query string, so paging and live refresh keep them. */
export function filterQueryString(query: PaymentsQuery, extra: Record<string, string> = {}): string {
  const params = new URLSearchParams();
  for (const name of ['status', 'endpoint', 'payer', 'from', 'to'] as const) {
    const value = query[name];
    if (value) params.set(name, value);
  }
  for (const [name, value] of Object.entries(extra)) params.set(name, value);
  const text = params.toString();
  return text ? `?${text}` : '';
}

/** The table body alone: the live refresh fetches and swaps exactly this. */
export function paymentRows(payments: PaymentDoc[]): SafeHtml {
  if (payments.length === 0) return html`<tr><td colspan="6" class="empty">No payments match.</td></tr>`;
  return html`${payments.map((p) => html`<tr data-payment-id="${p._id}">
    <td><a href="/console/payments/${p._id}">${time(p.createdAt)}</a></td>
    <td class="num">${usdc(p.amountUsdcRaw)} <span class="unit">USDC</span></td>
    <td>${shortHex(p.payerAddress)}</td>
    <td class="resource" title="${p.resourceUrl}">${p.resourceUrl}</td>
    <td>${badge(p.status)}</td>
    <td>${shortHex(p.txHash)}</td>
  </tr>`)}`;
}

export function paymentsPage(input: { session: LiveSession; query: PaymentsQuery; payments: PaymentDoc[]; nextPageToken?: string; endpoints: EndpointDoc[] }): SafeHtml {
  const { query } = input;
  const firstPage = !query.pageToken;
  const selected = (value: string | undefined, option: string) => (value === option ? html` selected` : '');
  return page({
    title: 'Payments', section: 'payments', session: input.session,
    body: html`<div class="page-head">
      <h1>Payments</h1>
      <p class="muted" id="live-status" role="status" aria-live="polite">${firstPage ? 'Live: new payments appear here by themselves.' : 'Showing older payments; live updates are paused on this page.'}</p>
    </div>
    <form method="get" action="/console/payments" class="card filters" aria-label="Filter payments">
      <div class="field"><label for="f-status">Status</label>
        <select id="f-status" name="status">
          <option value="">Any</option>
          ${(['settled', 'held', 'verified', 'failed'] as const).map((s) => html`<option value="${s}"${selected(query.status, s)}>${s}</option>`)}
        </select></div>
      <div class="field"><label for="f-endpoint">Endpoint</label>
        <select id="f-endpoint" name="endpoint">
          <option value="">Any</option>
          ${input.endpoints.map((e) => html`<option value="${e._id}"${selected(query.endpoint, e._id)}>${e.url}</option>`)}
        </select></div>
      <div class="field"><label for="f-payer">Payer address</label>
        <input id="f-payer" name="payer" value="${query.payer ?? ''}" placeholder="0x…" spellcheck="false" pattern="0x[0-9a-fA-F]{40}" maxlength="42"></div>
      <div class="field"><label for="f-from">From (UTC)</label><input id="f-from" name="from" type="date" value="${query.from ?? ''}"></div>
      <div class="field"><label for="f-to">To (UTC, inclusive)</label><input id="f-to" name="to" type="date" value="${query.to ?? ''}"></div>
      <div class="field actions"><button type="submit" class="button">Apply</button><a href="/console/payments" class="button-quiet">Clear</a></div>
    </form>
    <div class="card table-card">
      <table>
        <caption class="sr-only">Payments, newest first</caption>
        <thead><tr><th scope="col">Time</th><th scope="col" class="num">Amount</th><th scope="col">Payer</th><th scope="col">Resource</th><th scope="col">Status</th><th scope="col">Transaction</th></tr></thead>
        <tbody id="payment-rows"${firstPage ? html` data-live="/console/payments/rows${filterQueryString(query)}" data-live-status="live-status"` : ''}>
          ${paymentRows(input.payments)}
        </tbody>
      </table>
    </div>
    <nav class="pager" aria-label="Pages">
      ${firstPage ? '' : html`<a href="/console/payments${filterQueryString(query)}">← Newest</a>`}
      ${input.nextPageToken ? html`<a href="/console/payments${filterQueryString(query, { pageToken: input.nextPageToken })}" rel="next">Older →</a>` : ''}
    </nav>`,
  });
}
