import { html, type SafeHtml } from '../html.js';
import type { ApiKeyDoc } from '../../platform/auth/api-keys.js';
import type { LiveSession } from '../sessions.js';
import { csrfField, page } from './layout.js';
import { badge, time } from './format.js';

export function sellerKeysPage(input: { session: LiveSession; keys: Array<ApiKeyDoc & { lastUsedAt?: Date }> }): SafeHtml {
  return page({
    title: 'Seller keys', section: 'keys', session: input.session,
    body: html`<div class="page-head"><h1>Seller keys</h1><p class="muted">Keys (<code>loid-…</code>) the seller middleware redeems payments with. A seller key also opens this console read-only.</p></div>
    <div class="card table-card">
      <table class="stack-narrow">
        <caption class="sr-only">Seller keys, newest first</caption>
        <thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">State</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>${input.keys.length === 0 ? html`<tr><td colspan="6" class="empty">No seller keys yet.</td></tr>` : input.keys.map((k) => html`<tr>
          <td data-label="Name">${k.name ?? ''}</td><td data-label="Key"><code>${k.prefix}…</code></td><td data-label="Created">${time(k.createdAt)}</td><td data-label="Last used">${time(k.lastUsedAt)}</td>
          <td data-label="State">${k.revokedAt ? html`${badge('revoked')} ${time(k.revokedAt)}` : badge('active')}</td>
          <td>${k.revokedAt ? '' : html`<a href="/console/seller-keys/${k._id}/revoke" class="button-danger" aria-label="Revoke key ${k.prefix}">Revoke…</a>`}</td>
        </tr>`)}</tbody>
      </table>
    </div>
    <section class="card" aria-labelledby="new-key-title">
      <h2 id="new-key-title">Create a seller key</h2>
      <form method="post" action="/console/seller-keys" class="grid-form">
        ${csrfField(input.session)}
        <div class="field"><label for="k-name">Name</label><input id="k-name" name="name" maxlength="64" placeholder="production API"></div>
        <div class="field actions"><button type="submit" class="button">Create key</button></div>
      </form>
    </section>`,
  });
}

/** Revoking asks first: whatever uses the key stops redeeming payments at once, and its console sessions end. */
export function revokeKeyPage(input: { session: LiveSession; key: ApiKeyDoc }): SafeHtml {
  const k = input.key;
  return page({
    title: `Revoke ${k.prefix}…`, section: 'keys', session: input.session,
    body: html`<p class="crumbs"><a href="/console/seller-keys">← Seller keys</a></p>
    <section class="card narrow" aria-labelledby="revoke-title">
      <h1 id="revoke-title">Revoke this seller key?</h1>
      <p><code>${k.prefix}…</code>${k.name ? html` · ${k.name}` : ''} · created ${time(k.createdAt)}</p>
      <p>Sellers using it stop redeeming payments at once (their buyers are refused), and console sessions opened with it end. This cannot be undone.</p>
      <form method="post" action="/console/seller-keys/${k._id}/revoke" class="field actions">
        ${csrfField(input.session)}
        <button type="submit" class="button-danger">Revoke key</button>
        <a class="button-quiet" href="/console/seller-keys">Cancel</a>
      </form>
    </section>`,
  });
}
