import { formatUsdc } from '../../../middleware/price.js';
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
  verified: 'warn', pending: 'warn', warning: 'warn', skipped: 'neutral', dispatched: 'neutral', 'read-only': 'neutral', admin: 'neutral',
  failed: 'bad', invalid: 'bad', failure: 'bad', error: 'bad', revoked: 'bad',
};

/** A status as a word in a coloured pill; the word carries the meaning, the colour only repeats it. */
export const badge = (status: string) => html`<span class="badge badge-${BADGE_TONE[status] ?? 'neutral'}">${status}</span>`;
