import { html, type SafeHtml } from '../html.js';
import type { LiveSession } from '../sessions.js';
import { csrfField, page } from './layout.js';

export interface DraftRow {
  draftId: string; status: string; inboxId: string; to: string[]; cc: string[]; bcc: string[]; subject: string; text: string;
  approvalFor?: string[]; sendAt: string | null; createdAt: string;
}

/** Sends the org's approval policy holds: each with what it says and to whom, and approve / reject for the admin. */
export function draftsPage(input: { session: LiveSession; drafts: DraftRow[]; notice?: string }): SafeHtml {
  const admin = input.session.role === 'admin';
  return page({
    title: 'Approvals', section: 'approvals', session: input.session,
    body: html`<div class="page-head"><h1>Approvals</h1><p class="muted">Mail your agents asked to send that waits for a person (the approval policy in <code>/v0/mail/settings</code>), oldest first.</p></div>
    ${input.notice ? html`<p class="card" role="status">${input.notice}</p>` : ''}
    <div class="card table-card">
      <table class="stack-narrow">
        <caption class="sr-only">Drafts waiting for approval</caption>
        <thead><tr><th scope="col">From</th><th scope="col">To</th><th scope="col">Message</th><th scope="col">Needs approval for</th>${admin ? html`<th scope="col"><span class="sr-only">Decision</span></th>` : ''}</tr></thead>
        <tbody>${input.drafts.length === 0 ? html`<tr><td colspan="5" class="empty">Nothing waits for approval.</td></tr>` : input.drafts.map((d) => html`<tr data-draft-id="${d.draftId}">
          <td data-label="From"><code>${d.inboxId}</code><div class="muted small">${d.createdAt}</div></td>
          <td data-label="To">${[...d.to, ...d.cc, ...d.bcc].join(', ')}</td>
          <td data-label="Message"><strong>${d.subject}</strong><pre class="small">${d.text.slice(0, 2000)}</pre>${d.sendAt ? html`<div class="muted small">to be sent at ${d.sendAt}</div>` : ''}</td>
          <td data-label="Needs approval for">${(d.approvalFor ?? []).join(', ')}</td>
          ${admin ? html`<td data-label="Decision" class="nowrap">
            <form method="post" action="/console/drafts/${d.draftId}/approve">${csrfField(input.session)}<button type="submit" class="button">Approve and send</button></form>
            <form method="post" action="/console/drafts/${d.draftId}/reject">${csrfField(input.session)}<input name="reason" maxlength="500" placeholder="Reason (optional)" aria-label="Reason"><button type="submit" class="button-quiet">Reject</button></form>
          </td>` : ''}
        </tr>`)}</tbody>
      </table>
    </div>`,
  });
}
