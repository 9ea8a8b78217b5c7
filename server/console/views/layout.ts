import { html, type SafeHtml } from '../html.js';
import type { LiveSession } from '../sessions.js';

export type Section = 'payments' | 'channels' | 'webhooks' | 'endpoints' | 'keys' | 'approvals' | 'domains' | 'activity' | 'usage' | 'none';

const NAV: Array<{ section: Section; href: string; label: string; adminOnly?: boolean }> = [
  { section: 'payments', href: '/console/payments', label: 'Payments' },
  { section: 'channels', href: '/console/channels', label: 'Channels' },
  { section: 'webhooks', href: '/console/webhooks', label: 'Webhooks' },
  { section: 'endpoints', href: '/console/endpoints', label: 'Endpoints' },
  { section: 'keys', href: '/console/seller-keys', label: 'Seller keys', adminOnly: true },
  { section: 'approvals', href: '/console/drafts', label: 'Approvals', adminOnly: true },
  { section: 'domains', href: '/console/domains', label: 'Mail domains', adminOnly: true },
  { section: 'activity', href: '/console/activity', label: 'Activity' },
  { section: 'usage', href: '/console/usage', label: 'Usage' },
];

/** The hidden field every console form carries (see access.ts: requireCsrfToken). */
export const csrfField = (session: LiveSession) => html`<input type="hidden" name="_csrf" value="${session.csrfToken}">`;

/** The page frame: a skip link, the nav bar with who is signed in, and the page's main content. */
export function page(input: { title: string; section: Section; session?: LiveSession; body: SafeHtml }): SafeHtml {
  const { session } = input;
  const nav = session ? html`
    <nav class="nav" aria-label="Console">
      <a class="brand" href="/console/payments">agentgate <span>console</span></a>
      <ul>${NAV.filter((n) => !n.adminOnly || session.role === 'admin').map((n) => html`
        <li><a href="${n.href}"${n.section === input.section ? html` aria-current="page"` : ''}>${n.label}</a></li>`)}
      </ul>
      <div class="who">
        <span class="badge badge-neutral" title="Organisation ${session.orgId}">${session.role === 'admin' ? 'Platform key' : 'Seller key · read-only'}</span>
        <form method="post" action="/console/sign-out">${csrfField(session)}<button type="submit" class="button-quiet">Sign out</button></form>
      </div>
    </nav>` : html`<div class="nav"><span class="brand">agentgate <span>console</span></span></div>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${input.title} · agentgate console</title>
<link rel="icon" href="/console/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/console/assets/console.css">
<script src="/console/assets/console.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">${nav}</header>
<main id="main" tabindex="-1">
${input.body}
</main>
</body>
</html>`;
}

/** A refusal or failure, as a page a person can act on (the status code says the same to a machine). */
export function errorPage(input: { status: number; title: string; message: string; session?: LiveSession }): SafeHtml {
  const action = input.status === 401 || !input.session
    ? html`<a class="button" href="/console/sign-in">Sign in</a>`
    : html`<a class="button" href="/console/payments">Back to payments</a>`;
  return page({
    title: input.title, section: 'none', session: input.session,
    body: html`<section class="card narrow" aria-labelledby="error-title">
      <p class="eyebrow">Error ${input.status}</p>
      <h1 id="error-title">${input.title}</h1>
      <p role="alert">${input.message}</p>
      <p>${action}</p>
    </section>`,
  });
}
