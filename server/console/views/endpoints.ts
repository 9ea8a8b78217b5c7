import { html, type SafeHtml } from '../html.js';
import type { EndpointDoc } from '../../payments/models.js';
import type { LiveSession } from '../sessions.js';
import { csrfField, page } from './layout.js';
import { badge, copyButton, time } from './format.js';

export interface EndpointFormValues { url?: string; priceUsdc?: string; description?: string; webhookUrl?: string | null; discoverable?: boolean; skipUrlCheck?: boolean }

const alert = (error: string | undefined) => (error ? html`<p class="alert" role="alert" id="form-error">${error}</p>` : '');
const checked = (on: boolean | undefined) => (on ? html` checked` : '');

export function endpointsPage(input: { session: LiveSession; endpoints: EndpointDoc[]; devMode: boolean; form?: EndpointFormValues; error?: string; notice?: string }): SafeHtml {
  const admin = input.session.role === 'admin';
  const form = input.form ?? {};
  return page({
    title: 'Endpoints', section: 'endpoints', session: input.session,
    body: html`<div class="page-head"><h1>Endpoints</h1><p class="muted">Resources this organisation sells, with their price and webhook.</p></div>
    ${input.notice ? html`<p class="notice" role="status">${input.notice}</p>` : ''}
    <ul class="card-list" aria-label="Registered endpoints">${input.endpoints.length === 0 ? html`<li class="card empty">No endpoints yet.</li>` : input.endpoints.map((e) => html`<li class="card endpoint" id="${e._id}">
      <div class="endpoint-head">
        <h2 class="endpoint-url"><span class="break">${e.url}</span></h2>
        <p class="endpoint-price"><strong>${e.pricing === 'dynamic' ? 'up to ' : ''}${e.priceUsdc}</strong> <span class="unit">USDC</span> ${badge(e.discoverable ? 'listed' : 'unlisted')}</p>
      </div>
      ${e.description ? html`<p class="muted small">${e.description}</p>` : ''}
      <dl class="fields compact">
        <div><dt>Webhook URL</dt><dd>${e.webhookUrl ? html`<span class="break">${e.webhookUrl}</span>` : html`<span class="muted">none</span>`}</dd></div>
        <div><dt>Created</dt><dd>${time(e.createdAt)}</dd></div>
        <div><dt>Id</dt><dd><code>${e._id}</code></dd></div>
      </dl>
      <p class="row-actions"><a href="/console/payments?endpoint=${e._id}">Payments</a> <a href="/console/webhooks?endpoint=${e._id}">Webhooks</a>
        ${admin ? html`<a href="/console/endpoints/${e._id}/edit" aria-label="Edit ${e.url}">Edit</a> <a href="/console/endpoints/${e._id}/delete" class="danger-link" aria-label="Delete ${e.url}">Delete</a>` : ''}</p>
    </li>`)}</ul>
    ${admin ? html`<section class="card" aria-labelledby="new-endpoint-title">
      <h2 id="new-endpoint-title">Register an endpoint</h2>
      ${alert(input.error)}
      <form method="post" action="/console/endpoints" class="grid-form">
        ${csrfField(input.session)}
        <div class="field wide"><label for="e-url">Resource URL</label><input id="e-url" name="url" required maxlength="2048" value="${form.url ?? ''}" placeholder="https://api.example.com/weather" spellcheck="false"></div>
        <div class="field"><label for="e-price">Price (USDC)</label><input id="e-price" name="priceUsdc" required maxlength="32" value="${form.priceUsdc ?? ''}" placeholder="0.01" inputmode="decimal"></div>
        <div class="field wide"><label for="e-desc">Description</label><input id="e-desc" name="description" maxlength="500" value="${form.description ?? ''}"></div>
        <div class="field wide"><label for="e-hook">Webhook URL (optional)</label><input id="e-hook" name="webhookUrl" maxlength="2048" value="${form.webhookUrl ?? ''}" placeholder="https://…" spellcheck="false"></div>
        <div class="field check"><input id="e-disc" name="discoverable" type="checkbox"${checked(form.discoverable)}><label for="e-disc">Listed in discovery</label></div>
        ${input.devMode ? html`<div class="field check"><input id="e-skip" name="skipUrlCheck" type="checkbox"${checked(form.skipUrlCheck)}><label for="e-skip">Skip the URL check (dev mode only)</label></div>` : ''}
        <div class="field actions"><button type="submit" class="button">Register</button></div>
      </form>
    </section>` : ''}`,
  });
}

export function endpointEditPage(input: { session: LiveSession; endpoint: EndpointDoc; form?: EndpointFormValues; error?: string }): SafeHtml {
  const e = input.endpoint;
  const form = input.form ?? { priceUsdc: e.priceUsdc, description: e.description, webhookUrl: e.webhookUrl ?? '', discoverable: e.discoverable };
  return page({
    title: `Edit ${e.url}`, section: 'endpoints', session: input.session,
    body: html`<p class="crumbs"><a href="/console/endpoints">← Endpoints</a></p>
    <section class="card" aria-labelledby="edit-title">
      <h1 id="edit-title">Edit endpoint</h1>
      <p class="muted"><code>${e._id}</code> · ${e.url}</p>
      ${alert(input.error)}
      <form method="post" action="/console/endpoints/${e._id}" class="grid-form">
        ${csrfField(input.session)}
        <div class="field"><label for="e-price">Price (USDC)</label><input id="e-price" name="priceUsdc" required maxlength="32" value="${form.priceUsdc ?? ''}" inputmode="decimal"></div>
        <div class="field wide"><label for="e-desc">Description</label><input id="e-desc" name="description" maxlength="500" value="${form.description ?? ''}"></div>
        <div class="field wide"><label for="e-hook">Webhook URL (empty removes the webhook)</label><input id="e-hook" name="webhookUrl" maxlength="2048" value="${form.webhookUrl ?? ''}" spellcheck="false"></div>
        <div class="field check"><input id="e-disc" name="discoverable" type="checkbox"${checked(form.discoverable)}><label for="e-disc">Listed in discovery</label></div>
        <div class="field actions"><button type="submit" class="button">Save</button><a class="button-quiet" href="/console/endpoints">Cancel</a></div>
      </form>
    </section>`,
  });
}

/** After a change that made a webhook secret: it is shown this once, as the API returns it once. */
export function secretOncePage(input: { session: LiveSession; title: string; label: string; secret: string; back: string; backLabel: string }): SafeHtml {
  return page({
    title: input.title, section: input.back.includes('seller-keys') ? 'keys' : 'endpoints', session: input.session,
    body: html`<section class="card narrow" aria-labelledby="once-title">
      <h1 id="once-title">${input.title}</h1>
      <p class="notice" role="status">Copy it now: it is shown only once and cannot be read again.</p>
      <p><strong>${input.label}</strong></p>
      <div class="secret-box"><code id="secret" class="secret" data-secret>${input.secret}</code>${copyButton('secret', `Copy ${input.label.toLowerCase()}`)}</div>
      <p class="muted small" role="status" id="copy-status" aria-live="polite"></p>
      <p><a class="button" href="${input.back}">${input.backLabel}</a></p>
    </section>`,
  });
}

/** Deleting an endpoint asks first: its payments stay, its buyers get 402 resource_not_registered from then on. */
export function endpointDeletePage(input: { session: LiveSession; endpoint: EndpointDoc }): SafeHtml {
  const e = input.endpoint;
  return page({
    title: `Delete ${e.url}`, section: 'endpoints', session: input.session,
    body: html`<p class="crumbs"><a href="/console/endpoints">← Endpoints</a></p>
    <section class="card narrow" aria-labelledby="delete-title">
      <h1 id="delete-title">Delete this endpoint?</h1>
      <p class="break"><strong>${e.url}</strong> · ${e.priceUsdc} USDC</p>
      <p>Paid requests to it are refused from now on (the middleware answers <code>resource_not_registered</code>), and its pending webhook deliveries fail. Its payments and receipts stay. This cannot be undone; registering the URL again makes a new endpoint with a new webhook secret.</p>
      <form method="post" action="/console/endpoints/${e._id}/delete" class="field actions">
        ${csrfField(input.session)}
        <button type="submit" class="button-danger">Delete endpoint</button>
        <a class="button-quiet" href="/console/endpoints">Cancel</a>
      </form>
    </section>`,
  });
}
