import { html, type SafeHtml } from '../html.js';

/** Query strings of the filters given (empty values left out), with a page number when it is not the first. */
export function queryString(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined && value !== '' && !(name === 'page' && value === 1)) search.set(name, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}

export interface PageWindow { page: number; pageSize: number; total: number }

export const lastPage = (w: PageWindow) => Math.max(1, Math.ceil(w.total / w.pageSize));
export const offsetOf = (page: number | undefined, pageSize: number) => ((page ?? 1) - 1) * pageSize;

/** "Showing 26–50 of 132" (what a person reads first about a list). */
export function showing(w: PageWindow, noun: string): SafeHtml {
  if (w.total === 0) return html`<p class="muted showing" data-total="0">No ${noun}.</p>`;
  if ((w.page - 1) * w.pageSize >= w.total) return html`<p class="muted showing" data-total="${w.total}">Page ${w.page} is past the end: there are <strong>${w.total}</strong> ${noun} (${lastPage(w)} page${lastPage(w) === 1 ? '' : 's'}).</p>`;
  const first = Math.min((w.page - 1) * w.pageSize + 1, w.total);
  const last = Math.min(w.page * w.pageSize, w.total);
  return html`<p class="muted showing" data-total="${w.total}">Showing <strong>${first}–${last}</strong> of <strong>${w.total}</strong> ${noun}</p>`;
}

/** Previous, numbered pages around the current one (with the first and the last), next. */
export function pager(w: PageWindow, href: (page: number) => string): SafeHtml {
  const last = lastPage(w);
  if (last <= 1) return html``;
  const numbers = [...new Set([1, w.page - 2, w.page - 1, w.page, w.page + 1, w.page + 2, last])].filter((n) => n >= 1 && n <= last).sort((a, b) => a - b);
  const items: SafeHtml[] = [];
  numbers.forEach((n, i) => {
    if (i > 0 && n - numbers[i - 1]! > 1) items.push(html`<li aria-hidden="true">…</li>`);
    items.push(n === w.page ? html`<li><a href="${href(n)}" aria-current="page">${n}</a></li>` : html`<li><a href="${href(n)}" aria-label="Page ${n}">${n}</a></li>`);
  });
  return html`<nav class="pager" aria-label="Pages">
    ${w.page > 1 ? html`<a href="${href(w.page - 1)}" rel="prev">← Previous</a>` : html`<span class="muted">← Previous</span>`}
    <ol>${items}</ol>
    ${w.page < last ? html`<a href="${href(w.page + 1)}" rel="next">Next →</a>` : html`<span class="muted">Next →</span>`}
  </nav>`;
}
