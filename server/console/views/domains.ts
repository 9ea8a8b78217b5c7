import { html, type SafeHtml } from '../html.js';
import type { LiveSession } from '../sessions.js';
import type { presentAddress, presentDomain } from '../../mail/domains/present.js';
import { csrfField, page } from './layout.js';

type Domain = ReturnType<typeof presentDomain>;
type Address = ReturnType<typeof presentAddress>;

/** A domain's standing or a record's state as a pill: the word carries the meaning, the colour repeats it. */
const TONE: Record<string, string> = { verified: 'ok', ok: 'ok', pending: 'warn', unknown: 'warn', failing: 'bad', missing: 'bad', wrong: 'bad' };
const standing = (status: string) => html`<span class="badge badge-${TONE[status] ?? 'neutral'}">${status}</span>`;

/** The org's mail domains with their standing, and the form that adds one. */
export function domainsPage(input: { session: LiveSession; domains: Domain[] }): SafeHtml {
  return page({
    title: 'Mail domains', section: 'domains', session: input.session,
    body: html`<div class="page-head"><h1>Mail domains</h1><p class="muted">Your own domains for your agents' mail: once its DNS records are published and checked, identities take addresses on it, mail to them arrives in their inboxes, and mail from them is signed with the domain's DKIM key.</p></div>
    <div class="card table-card">
      <table class="stack-narrow">
        <caption class="sr-only">Mail domains</caption>
        <thead><tr><th scope="col">Domain</th><th scope="col">Standing</th><th scope="col">Last checked</th></tr></thead>
        <tbody>${input.domains.length === 0 ? html`<tr><td colspan="3" class="empty">No domains yet.</td></tr>` : input.domains.map((d) => html`<tr>
          <td data-label="Domain"><a href="/console/domains/${d.domainId}">${d.domain}</a></td><td data-label="Standing">${standing(d.status)}</td>
          <td data-label="Last checked">${d.checkedAt ?? html`<span class="muted">not yet</span>`}</td></tr>`)}</tbody>
      </table>
    </div>
    <section class="card" aria-labelledby="new-domain-title">
      <h2 id="new-domain-title">Add a domain</h2>
      <form method="post" action="/console/domains" class="grid-form">
        ${csrfField(input.session)}
        <div class="field"><label for="d-name">Domain</label><input id="d-name" name="domain" required maxlength="253" placeholder="itscompany.com"></div>
        <div class="field actions"><button type="submit" class="button">Add domain</button></div>
      </form>
    </section>`,
  });
}

/** One domain, its records as DNS showed them just now, its addresses, and what can be done with it. */
export function domainPage(input: { session: LiveSession; domain: Domain; addresses: Address[]; identities: { identityId: string; name: string }[] }): SafeHtml {
  const d = input.domain;
  return page({
    title: d.domain, section: 'domains', session: input.session,
    body: html`<p class="crumbs"><a href="/console/domains">← Mail domains</a></p>
    <div class="page-head"><h1>${d.domain} ${standing(d.status)}</h1>
      <p class="muted">Checked through DNS ${d.checkedAt ?? 'just now'}.${d.verifiedAt ? ` Verified since ${d.verifiedAt}.` : ''}${d.failingSince ? ` Failing since ${d.failingSince}: its addresses neither send nor receive until every required record is right again.` : ''}</p>
      ${d.problem ? html`<p class="notice">${d.problem}</p>` : ''}</div>
    <div class="card table-card">
      <table class="stack-narrow">
        <caption>Records to publish</caption>
        <thead><tr><th scope="col">Purpose</th><th scope="col">Type</th><th scope="col">Name</th><th scope="col">Value</th><th scope="col">In DNS</th></tr></thead>
        <tbody>${d.records.map((r) => html`<tr>
          <th scope="row" data-label="Purpose">${r.purpose}${r.required ? '' : html` <span class="muted">(not required yet)</span>`}</th><td data-label="Type">${r.type}</td>
          <td data-label="Name"><code>${r.name}</code></td><td data-label="Value"><code class="wrap">${'priority' in r ? `${r.priority} ` : ''}${r.value}</code></td>
          <td data-label="In DNS">${r.status ? standing(r.status) : html`<span class="muted">unchecked</span>`}${r.status === 'wrong' ? html`<br><span class="muted">found: <code class="wrap">${(r.found ?? []).join(' | ')}</code></span>` : ''}</td></tr>`)}</tbody>
      </table>
    </div>
    <p><a class="button-quiet" href="/console/domains/${d.domainId}">Check again</a></p>
    <h2>Addresses</h2>
    <div class="card table-card">
      <table class="stack-narrow">
        <caption class="sr-only">Addresses on ${d.domain}</caption>
        <thead><tr><th scope="col">Address</th><th scope="col">Identity</th></tr></thead>
        <tbody>${input.addresses.length === 0 ? html`<tr><td colspan="2" class="empty">No addresses yet.</td></tr>` : input.addresses.map((a) => html`<tr>
          <td data-label="Address"><code>${a.address}</code></td><td data-label="Identity"><code>${a.identityId}</code></td></tr>`)}</tbody>
      </table>
    </div>
    ${d.status === 'verified' ? html`<section class="card" aria-labelledby="new-address-title">
      <h2 id="new-address-title">Add an address</h2>
      <form method="post" action="/console/domains/${d.domainId}/addresses" class="grid-form">
        ${csrfField(input.session)}
        <div class="field"><label for="a-local">Address</label><input id="a-local" name="localPart" required maxlength="64" placeholder="support"> <span class="muted">@${d.domain}</span></div>
        <div class="field"><label for="a-identity">Identity</label><select id="a-identity" name="identityId">${input.identities.map((i) => html`<option value="${i.identityId}">${i.name} (${i.identityId})</option>`)}</select></div>
        <div class="field actions"><button type="submit" class="button">Add address</button></div>
      </form>
    </section>` : html`<p class="muted">Addresses can be added once the domain is verified.</p>`}
    <section class="card" aria-labelledby="manage-title">
      <h2 id="manage-title">Manage</h2>
      <form method="post" action="/console/domains/${d.domainId}/rotate" class="field actions">
        ${csrfField(input.session)}
        <button type="submit" class="button-quiet">Rotate the DKIM key</button>
        <span class="muted">A new key under a new selector; the current one signs until DNS shows the new one.</span>
      </form>
      <form method="post" action="/console/domains/${d.domainId}/delete" class="field actions">
        ${csrfField(input.session)}
        <button type="submit" class="button-danger">Delete the domain and its addresses</button>
      </form>
    </section>`,
  });
}
