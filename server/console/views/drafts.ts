import { html, type SafeHtml } from '../html.js';
import type { LiveSession } from '../sessions.js';
import { csrfField, page } from './layout.js';
import { time } from './format.js';

export interface DraftRow {
  draftId: string; status: string; inboxId: string; to: string[]; cc: string[]; bcc: string[]; subject: string; text: string; html?: string;
  approvalFor?: string[]; sendAt: string | null; createdAt: string;
}

/** How much of a message's text the page shows; the whole draft is GET /v0/drafts/{draftId}. */
const SHOWN_CHARS = 2000;

const recipients = (d: DraftRow) => [
  ...d.to,
  ...d.cc.map((a) => `${a} (cc)`),
  ...d.bcc.map((a) => `${a} (bcc)`),
].join(', ');

/**
 * One held send as a card rather than a table row: a message, a recipient list and a reason field do not
 * fit beside each other on a phone, and as table cells they pushed the decision out of the card at 1280 px.
 * Here the decision has a row of its own at the card's foot, wrapping when the width runs short.
 */
function draftCard(session: LiveSession, d: DraftRow): SafeHtml {
  const admin = session.role === 'admin';
  const cut = d.text.length > SHOWN_CHARS;
  return html`<li class="card draft" data-draft-id="${d.draftId}" aria-labelledby="subject-${d.draftId}">
    <div class="draft-head">
      <h2 class="draft-subject" id="subject-${d.draftId}">${d.subject || html`<span class="muted">(no subject)</span>`}</h2>
      <p class="muted small">from <code class="break">${d.inboxId}</code> · asked ${time(new Date(d.createdAt))}</p>
    </div>
    <dl class="fields draft-fields">
      <div><dt>To</dt><dd class="break">${recipients(d)}</dd></div>
      <div><dt>Needs approval for</dt><dd class="break">${(d.approvalFor ?? []).join(', ') || html`<span class="muted">—</span>`}</dd></div>
      ${d.sendAt ? html`<div><dt>To be sent at</dt><dd>${time(new Date(d.sendAt))}</dd></div>` : ''}
    </dl>
    <pre class="wrap draft-text" tabindex="0" aria-label="Message text">${d.text.slice(0, SHOWN_CHARS)}</pre>
    ${cut || d.html !== undefined ? html`<p class="muted small">${cut ? `The first ${SHOWN_CHARS} of ${d.text.length} characters. ` : ''}${d.html !== undefined ? 'It also has an HTML part. ' : ''}The whole draft: <code class="break">GET /v0/drafts/${d.draftId}</code>.</p>` : ''}
    ${admin ? html`<div class="draft-actions" role="group" aria-label="Decision">
      <form method="post" action="/console/drafts/${d.draftId}/approve" class="inline-form">${csrfField(session)}<button type="submit" class="button">Approve and send</button></form>
      <form method="post" action="/console/drafts/${d.draftId}/reject" class="reject-form">${csrfField(session)}
        <div class="field"><label for="reason-${d.draftId}">Reason for rejecting (optional)</label><input id="reason-${d.draftId}" name="reason" maxlength="500"></div>
        <button type="submit" class="button-danger">Reject</button>
      </form>
    </div>` : ''}
  </li>`;
}

/** Sends the org's approval policy holds: each with what it says and to whom, and approve / reject for the admin. */
export function draftsPage(input: { session: LiveSession; drafts: DraftRow[]; notice?: string }): SafeHtml {
  return page({
    title: 'Approvals', section: 'approvals', session: input.session,
    body: html`<div class="page-head"><h1>Approvals</h1><p class="muted">Mail your agents asked to send that waits for a person (the approval policy in <code>/v0/mail/settings</code>), oldest first.</p></div>
    ${input.notice ? html`<p class="notice" role="status">${input.notice}</p>` : ''}
    <ul class="card-list" aria-label="Drafts waiting for approval">${input.drafts.length === 0
      ? html`<li class="card empty">Nothing waits for approval.</li>`
      : input.drafts.map((d) => draftCard(input.session, d))}</ul>`,
  });
}
