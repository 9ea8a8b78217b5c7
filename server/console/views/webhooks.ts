import { html, type SafeHtml } from '../html.js';
import type { EndpointDoc } from '../../payments/models.js';
import type { DeliveryDoc } from '../../webhooks/models.js';
import { DELIVERY_STATES, deliveryState } from '../../webhooks/state.js';
import type { LiveSession } from '../sessions.js';
import { page } from './layout.js';
import { badge, time } from './format.js';
import { dayInput, endpointSelect, fieldError, filterAlert, invalid, selected, type FieldErrors } from './filters.js';
import { pager, queryString, showing, type PageWindow } from './pager.js';
import { retryForm } from './payment.js';

export interface DeliveryFilterValues { state?: string; endpoint?: string; payment?: string; from?: string; to?: string }

export const deliveryFilterQueryString = (values: DeliveryFilterValues, extra: Record<string, string | number> = {}) =>
  queryString({ state: values.state, endpoint: values.endpoint, payment: values.payment, from: values.from, to: values.to, ...extra });

const STATE_HELP: Record<string, string> = {
  pending: 'not attempted yet in this round', failing: 'an attempt failed; the next one is scheduled', failed: 'every attempt of the schedule failed', delivered: 'the receiver answered 2xx',
};

export function webhooksPage(input: {
  session: LiveSession; values: DeliveryFilterValues; errors: FieldErrors; endpoints: EndpointDoc[];
  deliveries: Array<Omit<DeliveryDoc, 'body'>>; window: PageWindow; counts?: Record<string, number>;
}): SafeHtml {
  const { values, errors } = input;
  const refused = Object.keys(errors).length > 0;
  const urlOf = new Map(input.endpoints.map((e) => [e._id, e.url]));
  const here = `/console/webhooks${deliveryFilterQueryString(values, { page: input.window.page })}`;
  return page({
    title: 'Webhooks', section: 'webhooks', session: input.session,
    body: html`<div class="page-head"><h1>Webhooks</h1><p class="muted"><code>payment.received</code> deliveries to your endpoints' webhook URLs, newest first.</p></div>
    ${input.counts ? html`<nav class="state-tabs" aria-label="Deliveries by state">
      <a href="/console/webhooks${deliveryFilterQueryString({ ...values, state: undefined })}"${!values.state ? html` aria-current="page"` : ''}>All</a>
      ${DELIVERY_STATES.map((s) => html`<a href="/console/webhooks${deliveryFilterQueryString({ ...values, state: s })}" title="${STATE_HELP[s]}"${values.state === s ? html` aria-current="page"` : ''}>${s} <span class="count" data-state-count="${s}">${input.counts![s] ?? 0}</span></a>`)}
    </nav>` : ''}
    <form method="get" action="/console/webhooks" class="card filters" aria-label="Filter deliveries" novalidate>
      ${filterAlert(errors)}
      <div class="field"><label for="w-state">State</label>
        <select id="w-state" name="state"${invalid(errors, 'state')}>
          <option value="">Any</option>
          ${DELIVERY_STATES.map((s) => html`<option value="${s}"${selected(values.state, s)}>${s}</option>`)}
        </select>${fieldError(errors, 'state')}</div>
      ${endpointSelect({ id: 'w-endpoint', value: values.endpoint, endpoints: input.endpoints, errors })}
      <div class="field"><label for="w-payment">Payment id</label>
        <input id="w-payment" name="payment" value="${values.payment ?? ''}" placeholder="pay_…" spellcheck="false" maxlength="70"${invalid(errors, 'payment')}>
        ${fieldError(errors, 'payment')}</div>
      ${dayInput({ id: 'w-from', name: 'from', label: 'From (UTC)', value: values.from, errors })}
      ${dayInput({ id: 'w-to', name: 'to', label: 'To (UTC, inclusive)', value: values.to, errors })}
      <div class="field actions"><button type="submit" class="button">Apply</button><a href="/console/webhooks" class="button-quiet">Clear</a></div>
    </form>
    <div class="list-head">${refused ? html`<p class="muted">Nothing is listed until the filter is fixed.</p>` : showing(input.window, 'deliveries')}</div>
    <div class="card table-card">
      <table class="stack-narrow">
        <caption class="sr-only">Webhook deliveries, newest first</caption>
        <thead><tr><th scope="col">Created</th><th scope="col">State</th><th scope="col">Payment</th><th scope="col">Endpoint</th><th scope="col">Next attempt / last error</th>${input.session.role === 'admin' ? html`<th scope="col"><span class="sr-only">Actions</span></th>` : ''}</tr></thead>
        <tbody>${input.deliveries.length === 0 ? html`<tr><td colspan="6" class="empty">No deliveries match.</td></tr>` : input.deliveries.map((d) => html`<tr data-delivery-id="${d._id}" data-state="${deliveryState(d)}">
          <td data-label="Created" class="nowrap">${time(d.createdAt)}</td>
          <td data-label="State" class="nowrap">${badge(deliveryState(d))}<div class="muted small">${d.attemptCount} attempt${d.attemptCount === 1 ? '' : 's'}</div></td>
          <td data-label="Payment"><a href="/console/payments/${d.paymentId}#webhook-title"><code>${d.paymentId}</code></a></td>
          <td data-label="Endpoint" class="resource endpoint-cell">${urlOf.get(d.endpointId) ?? html`<code>${d.endpointId}</code> <span class="muted">(deleted)</span>`}</td>
          <td class="next-cell">${d.status === 'pending' && d.nextAttemptAt ? html`next ${time(d.nextAttemptAt)}` : ''}${d.lastError ? html`<div class="muted small">${d.lastError}</div>` : ''}</td>
          ${input.session.role === 'admin' ? html`<td>${retryForm(input.session, d, here)}</td>` : ''}
        </tr>`)}</tbody>
      </table>
    </div>
    ${pager(input.window, (n) => `/console/webhooks${deliveryFilterQueryString(values, { page: n })}`)}`,
  });
}
