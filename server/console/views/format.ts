import { formatUsdc } from 'agentgate-x402-wire';
import { html, type SafeHtml } from '../html.js';

/** Times in UTC, as the API gives them, in a <time> element a screen reader and a script can read. */
export function time(at: Date | undefined | null): SafeHtml {
  if (!at) return html`<span class="muted">—</span>`;
  const iso = at.toISOString();
  return html`<time datetime="${iso}">${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC</time>`;
}

export const usdc = (atomic: string) => formatUsdc(BigInt(atomic));

/** A long hex value shortened for a table cell; the whole value stays in the title and for copy-paste. */
export function shortHex(value: string | undefined | null): SafeHtml {
  if (!value) return html`<span class="muted">—</span>`;
  const short = value.length > 14 ? `${value.slice(0, 8)}…${value.slice(-6)}` : value;
  return html`<code title="${value}">${short}</code>`;
}

const BADGE_TONE: Record<string, string> = {
  settled: 'ok', delivered: 'ok', active: 'ok', listed: 'ok', valid: 'ok', success: 'ok', info: 'neutral',
  verified: 'warn', pending: 'warn', failing: 'warn', warning: 'warn', skipped: 'neutral', dispatched: 'neutral', 'read-only': 'neutral', admin: 'neutral',
  failed: 'bad', invalid: 'bad', failure: 'bad', error: 'bad', revoked: 'bad',
  // batch-settlement channels and their calls.
  open: 'ok', claimed: 'ok', accepted: 'neutral', refunded: 'neutral', withdrawing: 'warn',
};

/** A status as a word in a coloured pill; the word carries the meaning, the colour only repeats it. */
export const badge = (status: string) => html`<span class="badge badge-${BADGE_TONE[status] ?? 'neutral'}">${status}</span>`;

/** A UTC calendar day as the tables and the date fields write it: YYYY-MM-DD. */
export const isoDay = (at: Date) => at.toISOString().slice(0, 10);

/** Unix seconds (an authorization's validAfter / validBefore) as a time; the raw number stays in the title. */
export function unixTime(seconds: string | number): SafeHtml {
  const ms = Number(seconds) * 1000;
  // validBefore may be "never" in practice (a huge number): past what a Date holds, the number is all there is.
  if (!Number.isFinite(ms) || Math.abs(ms) > 8.64e15) return html`<code>${String(seconds)}</code> <span class="muted">(unix seconds)</span>`;
  const iso = new Date(ms).toISOString();
  return html`<time datetime="${iso}" title="unix ${String(seconds)}">${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC</time>`;
}

/** A long value that may break anywhere (URLs, ids, hashes) but keeps whole words where it can. */
export const wrapping = (value: string) => html`<span class="break">${value}</span>`;

/** A button that copies the text of the element `targetId` (console.js wires it; without script it is hidden). */
export const copyButton = (targetId: string, label = 'Copy') =>
  html`<button type="button" class="button-quiet copy" data-copy="${targetId}" hidden>${label}</button>`;
