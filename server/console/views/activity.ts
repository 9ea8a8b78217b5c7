import { html, type SafeHtml } from '../html.js';
import type { LogEntry } from '../../logs/activity-log.js';
import type { LiveSession } from '../sessions.js';
import { page } from './layout.js';
import { badge, time } from './format.js';

export function activityPage(input: { session: LiveSession; entries: LogEntry[] }): SafeHtml {
  return page({
    title: 'Activity', section: 'activity', session: input.session,
    body: html`<div class="page-head"><h1>Activity</h1><p class="muted">The organisation's activity log, newest first (the last ${input.entries.length} entries).</p></div>
    <div class="card table-card">
      <table>
        <caption class="sr-only">Activity log, newest first</caption>
        <thead><tr><th scope="col">Time</th><th scope="col">Action</th><th scope="col">Severity</th><th scope="col">Outcome</th><th scope="col">Description</th><th scope="col">Target</th></tr></thead>
        <tbody>${input.entries.length === 0 ? html`<tr><td colspan="6" class="empty">Nothing logged yet.</td></tr>` : input.entries.map((e) => html`<tr>
          <td>${time(e.createdAt)}</td><td><code>${e.action}</code></td><td>${badge(e.severity)}</td><td>${badge(e.status)}</td>
          <td>${e.description}</td>
          <td>${e.targetType === 'payment' && e.targetId ? html`<a href="/console/payments/${e.targetId}">${e.targetId}</a>` : e.targetId ? html`<span class="muted">${e.targetType}</span> <code>${e.targetId}</code>` : ''}</td>
        </tr>`)}</tbody>
      </table>
    </div>`,
  });
}
