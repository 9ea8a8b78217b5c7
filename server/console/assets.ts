import { createHash } from 'node:crypto';

// The console's only stylesheet and script, kept as modules rather than files so `npm run build`
// (tsc) ships them in dist/ with no copy step, and served from the backend so the console works
// offline: no CDN, no web fonts (the system font stack).

export const CONSOLE_CSS = `
:root { --bg:#f5f6f8; --card:#fff; --line:#dfe3e8; --text:#1b2230; --muted:#566070; --accent:#2f44c2; --accent-dark:#23339a;
  --ok-bg:#e2f4e9; --ok:#0d5f33; --warn-bg:#fff1d1; --warn:#6b4300; --bad-bg:#fde6e6; --bad:#9b1419; --neutral-bg:#eceff3; --neutral:#39424f;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--text); background: var(--bg); }
* { box-sizing: border-box; }
body { margin: 0; line-height: 1.5; font-size: 15px; }
a { color: var(--accent); }
a:hover { color: var(--accent-dark); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; border-radius: 4px; }
code, pre, .secret { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 0.88em; }
.skip { position: absolute; left: -999px; top: 0; background: var(--card); padding: .5rem 1rem; z-index: 10; }
.skip:focus { left: 1rem; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.top { background: #141b2d; color: #fff; }
.nav { display: flex; align-items: center; gap: 1.5rem; max-width: 1200px; margin: 0 auto; padding: .75rem 1.5rem; flex-wrap: wrap; }
.brand { color: #fff; font-weight: 700; text-decoration: none; letter-spacing: .01em; }
.brand span { font-weight: 400; color: #b9c2e8; }
.nav ul { display: flex; gap: .25rem; list-style: none; margin: 0; padding: 0; flex: 1; }
.nav ul a { color: #dfe4f7; text-decoration: none; padding: .4rem .75rem; border-radius: 6px; display: inline-block; }
.nav ul a:hover { background: #25304d; color: #fff; }
.nav ul a[aria-current="page"] { background: #fff; color: #141b2d; font-weight: 600; }
.nav :focus-visible { outline-color: #9fb0ff; }
.who { display: flex; align-items: center; gap: .75rem; }
.who form { margin: 0; }
.who .button-quiet { color: #dfe4f7; border-color: #3a4563; }
main { max-width: 1200px; margin: 0 auto; padding: 1.5rem; }
main:focus { outline: none; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; display: flex; align-items: center; gap: .75rem; }
h2 { font-size: 1.1rem; margin: 0 0 1rem; }
h3 { font-size: 1rem; margin: 1.5rem 0 .5rem; }
.page-head { margin-bottom: 1rem; }
.muted { color: var(--muted); }
.small { font-size: .85em; }
.eyebrow { color: var(--muted); text-transform: uppercase; letter-spacing: .06em; font-size: .8rem; margin: 0; }
.crumbs { margin: 0 0 .75rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 1.25rem 1.5rem; margin-bottom: 1.25rem; box-shadow: 0 1px 2px rgba(20,27,45,.04); }
.card.narrow { max-width: 460px; margin: 3rem auto; }
.table-card { padding: 0; overflow-x: auto; position: relative; } /* relative: an sr-only label in a cell is clipped with the table, not left to widen the page */
/* A heading or a line of text in a table's card (which has no padding, so the table meets its edges) keeps the card's inset. */
.table-card > h2 { padding: 1.25rem 1.5rem 0; }
.table-card > p { padding: 0 1.5rem; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: .65rem 1rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); background: #fafbfc; }
tbody tr:last-child td { border-bottom: 0; }
tbody tr:hover { background: #f8f9fc; }
tr.is-new { animation: arrive 2s ease-out; }
@keyframes arrive { from { background: #e6ebff; } to { background: transparent; } }
@media (prefers-reduced-motion: reduce) { tr.is-new { animation: none; } }
.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.unit { color: var(--muted); font-size: .85em; }
.resource { max-width: 28rem; overflow-wrap: anywhere; }
.empty { text-align: center; color: var(--muted); padding: 2rem; }
.badge { display: inline-block; padding: .1rem .55rem; border-radius: 999px; font-size: .78rem; font-weight: 600; line-height: 1.5; }
.badge-ok { background: var(--ok-bg); color: var(--ok); }
.badge-warn { background: var(--warn-bg); color: var(--warn); }
.badge-bad { background: var(--bad-bg); color: var(--bad); }
.badge-neutral { background: var(--neutral-bg); color: var(--neutral); }
label { font-weight: 600; font-size: .9rem; }
input, select { font: inherit; padding: .5rem .65rem; border: 1px solid #aab2bf; border-radius: 6px; background: #fff; color: var(--text); width: 100%; }
input[type="checkbox"] { width: auto; }
.stack { display: flex; flex-direction: column; gap: .5rem; }
.filters, .grid-form { display: flex; flex-wrap: wrap; gap: 1rem; align-items: flex-end; }
.field { display: flex; flex-direction: column; gap: .3rem; min-width: 10rem; flex: 1; }
.field.wide { flex-basis: 100%; }
.field.check { flex-direction: row; align-items: center; gap: .5rem; flex: 0 0 auto; }
.field.actions { flex-direction: row; gap: .75rem; flex: 0 0 auto; align-items: center; }
.button, .button-quiet, .button-danger { font: inherit; font-weight: 600; border-radius: 6px; padding: .5rem 1rem; cursor: pointer; text-decoration: none; display: inline-block; border: 1px solid transparent; }
.button { background: var(--accent); color: #fff; }
.button:hover { background: var(--accent-dark); color: #fff; }
.button-quiet { background: transparent; border-color: var(--line); color: var(--text); }
.button-danger { background: #fff; color: var(--bad); border-color: #e4a5a7; }
.button-danger:hover { background: var(--bad-bg); }
.alert { background: var(--bad-bg); color: var(--bad); padding: .65rem .9rem; border-radius: 6px; }
.notice { background: #e9edff; color: #1e2c80; padding: .65rem .9rem; border-radius: 6px; }
.pager { display: flex; gap: 1.5rem; justify-content: flex-end; }
.fields { display: grid; grid-template-columns: repeat(auto-fill, minmax(22rem, 1fr)); gap: .25rem 2rem; margin: 0; }
.fields div { padding: .45rem 0; border-bottom: 1px solid var(--line); }
.fields dt { font-size: .8rem; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
.fields dd { margin: .15rem 0 0; overflow-wrap: anywhere; }
pre { background: #f3f5f9; border: 1px solid var(--line); border-radius: 6px; padding: 1rem; overflow-x: auto; }
.verification { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem; }
.delivery-head { display: flex; justify-content: space-between; align-items: center; gap: 1rem; flex-wrap: wrap; }
.delivery-head form { margin: 0; }
.secret { margin: .5rem 0 1rem; }
.nowrap { white-space: nowrap; }
.break { overflow-wrap: anywhere; }
h4 { font-size: .85rem; margin: 1rem 0 .35rem; color: var(--muted); text-transform: uppercase; letter-spacing: .05em; }
pre.wrap, .jws pre { white-space: pre-wrap; overflow-wrap: anywhere; }
.jws { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(20rem, 100%), 1fr)); gap: 0 1rem; }
details summary { cursor: pointer; color: var(--accent); margin: .5rem 0; }
.nav ul { flex-wrap: wrap; }
.fields { grid-template-columns: repeat(auto-fill, minmax(min(22rem, 100%), 1fr)); }
.fields.compact { grid-template-columns: repeat(auto-fill, minmax(min(14rem, 100%), 1fr)); gap: 0 1.5rem; }
.field-error { color: var(--bad); font-size: .85rem; margin: 0; }
input[aria-invalid="true"], select[aria-invalid="true"] { border-color: var(--bad); box-shadow: 0 0 0 1px var(--bad); }
.date-wrap { display: flex; gap: .4rem; }
.date-wrap input[data-date-picker] { flex: 1; min-width: 0; }
.date-native { position: absolute; width: 1px; height: 1px; opacity: 0; pointer-events: none; }
.date-button { padding: .35rem .6rem; }
.summary { padding-bottom: .75rem; }
.totals { display: grid; grid-template-columns: repeat(auto-fit, minmax(8rem, 1fr)); gap: .5rem 1.5rem; margin: 0 0 1rem; }
.totals dt { font-size: .8rem; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
.totals dd { margin: 0; font-size: 1.4rem; font-weight: 650; font-variant-numeric: tabular-nums; }
.chart { margin: 0; }
.chart figcaption { display: flex; justify-content: space-between; flex-wrap: wrap; gap: .5rem; font-size: .85rem; font-weight: 600; margin-bottom: .35rem; }
.chart svg { display: block; width: 100%; height: 7.5rem; background: #fafbfc; border-radius: 4px; }
.chart-bar { fill: var(--accent); }
.chart-bar:hover { fill: var(--accent-dark); }
.chart-axis { stroke: var(--line); stroke-width: 1; }
.chart-range { display: flex; justify-content: space-between; }
.list-head { display: flex; justify-content: space-between; align-items: center; flex-wrap: wrap; gap: .5rem 1rem; margin: 0 0 .5rem; }
.list-head p { margin: 0; }
.pager { align-items: center; flex-wrap: wrap; gap: .5rem 1rem; margin: 0 0 1.5rem; }
.pager ol { display: flex; flex-wrap: wrap; gap: .25rem; list-style: none; margin: 0; padding: 0; }
.pager ol a { display: inline-block; min-width: 2rem; text-align: center; padding: .2rem .45rem; border-radius: 6px; text-decoration: none; }
.pager ol a[aria-current="page"] { background: var(--accent); color: #fff; font-weight: 600; }
.state-tabs { display: flex; flex-wrap: wrap; gap: .4rem; margin: 0 0 1rem; }
.state-tabs a { text-decoration: none; padding: .3rem .75rem; border: 1px solid var(--line); border-radius: 999px; background: var(--card); color: var(--text); text-transform: capitalize; }
.state-tabs a[aria-current="page"] { background: #141b2d; color: #fff; border-color: #141b2d; }
.state-tabs .count { color: var(--muted); font-variant-numeric: tabular-nums; margin-left: .2rem; }
.state-tabs a[aria-current="page"] .count { color: #c9d1ec; }
.badge-link { text-decoration: none; }
.inline-form { margin: 0; }
.card-list { list-style: none; margin: 0 0 1.25rem; padding: 0; }
.endpoint-head { display: flex; justify-content: space-between; align-items: baseline; flex-wrap: wrap; gap: .25rem 1rem; }
.endpoint-url { font-size: 1rem; margin: 0; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-weight: 600; min-width: 0; }
.endpoint-price { margin: 0; }
.endpoint:target { border-color: var(--accent); box-shadow: 0 0 0 2px #c9d1ff; }
.row-actions { display: flex; flex-wrap: wrap; gap: .5rem 1.25rem; margin: .75rem 0 0; }
.danger-link { color: var(--bad); }
.secret-box { display: flex; flex-wrap: wrap; gap: .5rem; align-items: flex-start; margin: .25rem 0 .5rem; }
code.secret { display: block; flex: 1 1 16rem; min-width: 0; margin: 0; padding: .6rem .75rem; background: #f3f5f9; border: 1px solid var(--line); border-radius: 6px; overflow-wrap: anywhere; user-select: all; }
.table-scroll { overflow-x: auto; position: relative; }
.activity .description { min-width: 14rem; overflow-wrap: anywhere; }
td.resource { min-width: 14rem; }
td.endpoint-cell { min-width: 12rem; }
td.next-cell { overflow-wrap: anywhere; }
td .button, td .button-quiet, td .button-danger { white-space: nowrap; }
td code[title] { white-space: nowrap; }
.date-button svg { display: block; width: 1.1rem; height: 1.1rem; }
.activity .target { min-width: 10rem; }
/* The refund form: each label over its field, the amount's help under it, at most a readable width. */
.refund-form { display: flex; flex-direction: column; align-items: flex-start; gap: .4rem; max-width: 32rem; margin-top: 1rem; }
.refund-form label { display: flex; flex-direction: column; gap: .3rem; width: 100%; }
.refund-form label + .muted { font-size: .85em; margin-bottom: .4rem; }
/* Approvals: one card per held send; the decision gets a row of its own that wraps, never a clipped column. */
.draft-head { margin-bottom: .5rem; }
.draft-head p { margin: .15rem 0 0; }
.draft-subject { font-size: 1.05rem; margin: 0; overflow-wrap: anywhere; }
.fields.draft-fields { grid-template-columns: repeat(auto-fit, minmax(min(20rem, 100%), 1fr)); gap: 0 1.5rem; }
.draft-text { max-height: 20rem; overflow-y: auto; margin: .75rem 0; }
.draft-actions { display: flex; flex-wrap: wrap; align-items: flex-end; gap: .75rem 1.5rem; margin-top: 1rem; padding-top: 1rem; border-top: 1px solid var(--line); }
.draft-actions form { margin: 0; }
.reject-form { display: flex; flex-wrap: wrap; align-items: flex-end; gap: .5rem .75rem; flex: 1 1 20rem; min-width: 0; }
.reject-form .field { flex: 1 1 14rem; min-width: 0; }
@media (max-width: 720px) {
  main { padding: 1rem .75rem; }
  .card { padding: 1rem; }
  .nav { padding: .6rem .75rem; gap: .5rem 1rem; justify-content: space-between; }
  .nav ul { order: 3; flex-basis: 100%; }
  td.resource { min-width: 0; }
  .table-card { padding: 0; }
  .table-card > h2 { padding: 1rem 1rem 0; }
  .table-card > p { padding: 0 1rem; }
  table.stack-narrow thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  table.stack-narrow tr { display: block; border-bottom: 1px solid var(--line); padding: .5rem 0; }
  table.stack-narrow td { display: block; border: 0; padding: .2rem 1rem; text-align: left; }
  table.stack-narrow td.empty { text-align: center; }
  table.stack-narrow td.resource { overflow-wrap: anywhere; max-width: none; }
  table.stack-narrow td[data-label]::before { content: attr(data-label); display: block; font-size: .75rem; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
  .activity .description, .activity .target { min-width: 0; }
}
`;

/**
 * Live refresh: every element with data-live="<url>" is re-fetched every few seconds and its content
 * replaced when the server's fragment changed. A signed-out session (401) stops the polling and says so.
 */
export const CONSOLE_JS = `(() => {
  'use strict';
  const INTERVAL_MS = 2000;
  const watch = (el) => {
    const url = el.getAttribute('data-live');
    const status = el.dataset.liveStatus && document.getElementById(el.dataset.liveStatus);
    let last = el.innerHTML.trim();
    let busy = false;
    const tick = async () => {
      if (busy || document.hidden) return;
      busy = true;
      try {
        const res = await fetch(url, { credentials: 'same-origin', headers: { 'x-console-live': '1', accept: 'text/html' }, cache: 'no-store' });
        if (res.status === 401) { clearInterval(timer); if (status) status.textContent = 'Signed out: live updates stopped.'; return; }
        if (!res.ok) return;
        const text = (await res.text()).trim();
        if (text === last) return;
        const before = new Set(Array.from(el.querySelectorAll('[data-payment-id]')).map((r) => r.getAttribute('data-payment-id')));
        const active = document.activeElement && el.contains(document.activeElement) ? document.activeElement.getAttribute('href') : null;
        el.innerHTML = text;
        last = text;
        let fresh = 0;
        el.querySelectorAll('[data-payment-id]').forEach((r) => { if (!before.has(r.getAttribute('data-payment-id'))) { r.classList.add('is-new'); fresh++; } });
        if (active) { const again = el.querySelector('[href="' + CSS.escape(active) + '"]'); if (again) again.focus(); }
        if (status && fresh) status.textContent = fresh === 1 ? '1 new payment.' : fresh + ' new payments.';
      } catch (_) {
        // Offline or the server restarting: try again at the next tick.
      } finally {
        busy = false;
      }
    };
    const timer = setInterval(tick, INTERVAL_MS);
  };
  document.querySelectorAll('[data-live]').forEach(watch);
  // Copy buttons (one-time secrets): the Clipboard API, else select the text and copy it the old way.
  document.querySelectorAll('[data-copy]').forEach((button) => {
    const target = document.getElementById(button.getAttribute('data-copy'));
    if (!target) return;
    button.hidden = false;
    button.addEventListener('click', async () => {
      const status = document.getElementById('copy-status');
      const text = target.textContent.trim();
      let done = false;
      try { if (navigator.clipboard) { await navigator.clipboard.writeText(text); done = true; } } catch (_) { done = false; }
      if (!done) {
        const range = document.createRange();
        range.selectNodeContents(target);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        try { done = document.execCommand('copy'); } catch (_) { done = false; }
      }
      button.textContent = done ? 'Copied' : 'Select and copy by hand';
      button.setAttribute('data-copied', done ? 'yes' : 'no');
      if (status) status.textContent = done ? 'Copied to the clipboard.' : 'Copying was refused here: the text is selected, press Ctrl+C (or Cmd+C).';
    });
  });
  // Date fields keep the tables' YYYY-MM-DD; a calendar button fills them from the browser's own picker.
  document.querySelectorAll('input[data-date-picker]').forEach((input) => {
    const native = document.createElement('input');
    native.type = 'date';
    native.className = 'date-native';
    native.tabIndex = -1;
    native.setAttribute('aria-hidden', 'true');
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'button-quiet date-button';
    // A calendar drawn inline (an emoji needs a font the machine may not have).
    button.innerHTML = '<svg viewBox="0 0 20 20" aria-hidden="true" focusable="false"><rect x="2.5" y="4" width="15" height="13.5" rx="2" fill="none" stroke="currentColor" stroke-width="1.6"/><path d="M2.5 8h15M6.5 2v4M13.5 2v4" stroke="currentColor" stroke-width="1.6"/></svg>';
    const label = document.querySelector('label[for="' + input.id + '"]');
    button.setAttribute('aria-label', 'Choose a date for ' + (label ? label.textContent : input.name));
    const wrap = document.createElement('div');
    wrap.className = 'date-wrap';
    input.parentNode.insertBefore(wrap, input);
    wrap.appendChild(input);
    wrap.appendChild(button);
    wrap.appendChild(native);
    button.addEventListener('click', () => {
      if (/^[0-9]{4}-[0-9]{2}-[0-9]{2}$/.test(input.value)) native.value = input.value;
      try { native.showPicker(); } catch (_) { input.focus(); }
    });
    native.addEventListener('change', () => { if (native.value) input.value = native.value; });
  });
})();
`;

/** The tab icon (browsers asked for /favicon.ico on every page and logged a 404): a gate in the nav's colours. */
export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#141b2d"/><path d="M8 25V12a8 8 0 0 1 16 0v13" fill="none" stroke="#b9c2e8" stroke-width="3"/><rect x="12" y="17" width="8" height="8" rx="1.5" fill="#2f44c2"/></svg>
`;

export const assetEtag = (text: string) => `"${createHash('sha256').update(text).digest('base64url').slice(0, 16)}"`;
