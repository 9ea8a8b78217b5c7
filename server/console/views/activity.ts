import { html, type SafeHtml } from '../html.js';
import type { LogEntry } from '../../platform/activity-log.js';
import type { LiveSession } from '../sessions.js';
import { page } from './layout.js';
import { badge, time } from './format.js';
import { pager, showing, type PageWindow } from './pager.js';

function target(e: LogEntry): SafeHtml | '' {
  if (!e.targetId) return '';
  if (e.targetType === 'payment') return html`<a href="/console/payments/${e.targetId}"><code class="break">${e.targetId}</code></a>`;
  if (e.targetType === 'endpoint') return html`<span class="muted">endpoint</span> <a href="/console/endpoints#${e.targetId}"><code class="break">${e.targetId}</code></a>`;
  return html`<span class="muted">${e.targetType ?? ''}</span> <code class="break">${e.targetId}</code>`;
}

export function activityPage(input: { session: LiveSession; entries: LogEntry[]; window: PageWindow }): SafeHtml {
  return page({
    title: 'Activity', section: 'activity', session: input.session,
    body: html`<div class="page-head"><h1>Activity</h1><p class="muted">The organisation's activity log, newest first.</p></div>
    <div class="list-head">${showing(input.window, 'entries')}</div>
    <div class="card table-card">
      <table class="activity stack-narrow">
        <caption class="sr-only">Activity log, newest first</caption>
        <thead><tr><th scope="col">Time</th><th scope="col">Action</th><th scope="col">Result</th><th scope="col">Description</th><th scope="col">Target</th></tr></thead>
        <tbody>${input.entries.length === 0 ? html`<tr><td colspan="5" class="empty">Nothing logged yet.</td></tr>` : input.entries.map((e) => html`<tr>
          <td data-label="Time" class="nowrap">${time(e.createdAt)}</td><td data-label="Action"><code class="break">${e.action}</code></td>
          <td data-label="Result">${badge(e.status)}${e.severity !== 'info' ? html` ${badge(e.severity)}` : ''}</td>
          <td data-label="Description" class="description">${e.description}</td>
          <td data-label="Target" class="target">${target(e)}</td>
        </tr>`)}</tbody>
      </table>
    </div>
    ${pager(input.window, (n) => `/console/activity${n === 1 ? '' : `?page=${n}`}`)}`,
  });
}
