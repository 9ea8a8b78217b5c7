import { html, type SafeHtml } from '../html.js';
import type { VolumeBucket } from '../../payments/payment-totals.js';
import { isoDay, usdc } from './format.js';

const WIDTH = 600;
const HEIGHT = 120;

/**
 * Settled volume per bucket as an inline SVG bar chart: drawn on the server (no chart library, nothing
 * loaded from elsewhere; presentation attributes rather than inline styles, which the CSP refuses). Every
 * bar has a title with its day, volume and count, and the same numbers are in a table for screen readers.
 */
export function volumeChart(buckets: VolumeBucket[], bucketDays: number): SafeHtml {
  if (buckets.length === 0) return html``;
  const max = buckets.reduce((m, b) => (b.volumeAtomic > m ? b.volumeAtomic : m), 0n);
  const slot = WIDTH / buckets.length;
  const gap = Math.min(2, slot * 0.2);
  const label = (b: VolumeBucket) => (bucketDays === 1 ? isoDay(b.from) : `${isoDay(b.from)} – ${isoDay(new Date(b.until.getTime() - 1))}`);
  const total = buckets.reduce((sum, b) => sum + b.volumeAtomic, 0n);
  const per = bucketDays === 1 ? 'day' : `${bucketDays} days`;
  return html`<figure class="chart" data-buckets="${buckets.length}">
    <figcaption><span>Settled volume per ${per}, UTC</span><span class="muted">peak ${usdc(max.toString())} USDC</span></figcaption>
    <svg viewBox="0 0 ${WIDTH} ${HEIGHT}" preserveAspectRatio="none" role="img" aria-label="Settled volume per ${per} from ${isoDay(buckets[0]!.from)} to ${isoDay(new Date(buckets.at(-1)!.until.getTime() - 1))}: ${usdc(total.toString())} USDC in all" focusable="false">
      <line x1="0" y1="${HEIGHT - 0.5}" x2="${WIDTH}" y2="${HEIGHT - 0.5}" class="chart-axis"></line>
      ${buckets.map((b, i) => {
        // Whole pixels of a 120-high box; a day with any volume shows at least 1.
        const h = max === 0n ? 0 : Math.max(b.volumeAtomic > 0n ? 1 : 0, Number((b.volumeAtomic * BigInt(HEIGHT - 4)) / max));
        return html`<rect class="chart-bar" x="${(i * slot + gap / 2).toFixed(2)}" y="${HEIGHT - h}" width="${(slot - gap).toFixed(2)}" height="${h}" data-day="${isoDay(b.from)}" data-volume="${usdc(b.volumeAtomic.toString())}"><title>${label(b)}: ${usdc(b.volumeAtomic.toString())} USDC, ${b.count} payment${b.count === 1 ? '' : 's'}</title></rect>`;
      })}
    </svg>
    <div class="chart-range muted small"><span>${isoDay(buckets[0]!.from)}</span><span>${isoDay(new Date(buckets.at(-1)!.until.getTime() - 1))}</span></div>
    <table class="sr-only"><caption>Settled volume per ${per}</caption><thead><tr><th scope="col">Day</th><th scope="col">USDC</th><th scope="col">Payments</th></tr></thead>
      <tbody>${buckets.filter((b) => b.count > 0).map((b) => html`<tr><td>${label(b)}</td><td>${usdc(b.volumeAtomic.toString())}</td><td>${b.count}</td></tr>`)}</tbody></table>
  </figure>`;
}
