import { html, type SafeHtml } from '../html.js';
import type { LiveSession } from '../sessions.js';
import { METRIC_LABELS, USAGE_METRICS } from '../../usage/metrics.js';
import type { presentUsage } from '../../usage/report.js';
import { page } from './layout.js';

type Usage = ReturnType<typeof presentUsage>;

const cell = (value: number | null) => (value === null ? html`<span class="muted">no quota</span>` : html`${value.toLocaleString('en-US')}`);

/** The org's usage in a month against its plan's quotas, with the month's settlements by scheme and network. */
export function usagePage(input: { session: LiveSession; usage: Usage; months: string[] }): SafeHtml {
  const { usage } = input;
  return page({
    title: `Usage ${usage.month}`, section: 'usage', session: input.session,
    body: html`<div class="page-head"><h1>Usage</h1><p class="muted">${usage.month} (UTC), plan <strong>${usage.plan || 'none'}</strong>. Storage is what the organisation keeps now; everything else counts this month.</p></div>
    <form class="filters" method="get" action="/console/usage">
      <label>Month <select name="month">${input.months.map((m) => html`<option value="${m}"${m === usage.month ? html` selected` : ''}>${m}</option>`)}</select></label>
      <button type="submit" class="button-quiet">Show</button>
      <a class="button-quiet" href="/console/usage.csv" download>Download the last 12 months (CSV)</a>
    </form>
    <div class="card table-card">
      <table class="stack-narrow">
        <caption class="sr-only">Usage against the plan's quotas</caption>
        <thead><tr><th scope="col">Metric</th><th scope="col">Used</th><th scope="col">Quota</th><th scope="col">Left</th></tr></thead>
        <tbody>${USAGE_METRICS.map((metric) => {
          const m = usage.metrics[metric]!;
          const reached = m.quota !== null && m.used >= m.quota;
          return html`<tr><th scope="row" data-label="Metric">${METRIC_LABELS[metric]}</th><td data-label="Used">${cell(m.used)}${reached ? html` <span class="badge badge-bad">quota reached</span>` : ''}</td>
            <td data-label="Quota">${cell(m.quota)}</td><td data-label="Left">${m.remaining === null ? html`<span class="muted">—</span>` : cell(m.remaining)}</td></tr>`;
        })}</tbody>
      </table>
    </div>
    <h2>Settlements by scheme and network</h2>
    <div class="card table-card">
      <table class="stack-narrow">
        <caption class="sr-only">Settlements by scheme and network</caption>
        <thead><tr><th scope="col">Scheme</th><th scope="col">Network</th><th scope="col">Settlements</th></tr></thead>
        <tbody>${usage.settlements.length === 0 ? html`<tr><td colspan="3" class="empty">Nothing settled this month.</td></tr>` : usage.settlements.map((s) => html`<tr>
          <td data-label="Scheme"><code>${s.scheme}</code></td><td data-label="Network"><code>${s.network}</code></td><td data-label="Settlements">${s.count.toLocaleString('en-US')}</td></tr>`)}</tbody>
      </table>
    </div>`,
  });
}
