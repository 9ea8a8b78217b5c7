import type { Locator, Page } from 'playwright-core';

// Layout checks from the browser's own boxes (getBoundingClientRect, scrollWidth), not from pictures:
// what a person would have to scroll sideways to see, or would not see at all.
// (Expressions as strings where they run in the page: the test's TypeScript has no DOM types.)

/** Whether the page itself scrolls sideways. */
export const scrollsSideways = (p: Page) => p.evaluate('document.scrollingElement.scrollWidth > window.innerWidth') as Promise<boolean>;

/** What sticks out past the right edge, when something does (for the failure message); tables may scroll inside their card. */
export const overflowing = (p: Page) => p.evaluate(`Array.from(document.querySelectorAll('body *')).filter((el) => el.getBoundingClientRect().right > window.innerWidth + 0.5 && !(el.parentElement && el.parentElement.closest('.table-card, .table-scroll')))
  .slice(0, 5).map((el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : '') + ' ' + Math.round(el.getBoundingClientRect().right))`) as Promise<string[]>;

/** Whether a box's content is wider than the box (it scrolls inside, or is clipped). */
export const contentWiderThan = (box: Locator) => box.evaluate((el) => el.scrollWidth > el.clientWidth);

/**
 * How `inner` fails to lie whole inside `outer` and inside the viewport's width, as readable lines;
 * [] when it does. Half a pixel of slack for sub-pixel layout.
 */
export async function outside(inner: Locator, outer: Locator): Promise<string[]> {
  const [a, b] = await Promise.all([inner.boundingBox(), outer.boundingBox()]);
  if (!a) return ['not rendered'];
  if (!b) return ['its box is not rendered'];
  const width = inner.page().viewportSize()!.width;
  const r = (n: number) => Math.round(n);
  const problems: string[] = [];
  if (a.x < b.x - 0.5) problems.push(`starts at x=${r(a.x)}, left of its box (x=${r(b.x)})`);
  if (a.x + a.width > b.x + b.width + 0.5) problems.push(`ends at x=${r(a.x + a.width)}, right of its box (x=${r(b.x + b.width)})`);
  if (a.y < b.y - 0.5 || a.y + a.height > b.y + b.height + 0.5) problems.push(`y ${r(a.y)}–${r(a.y + a.height)} outside its box (${r(b.y)}–${r(b.y + b.height)})`);
  if (a.x < -0.5 || a.x + a.width > width + 0.5) problems.push(`x ${r(a.x)}–${r(a.x + a.width)} outside the ${width} px viewport`);
  return problems;
}

/** The same time format every console page writes (views/format.ts: time, unixTime). */
export const CONSOLE_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/;
/** An ISO 8601 timestamp as the API writes it, which a console page should not show raw. */
export const RAW_ISO = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/;

/**
 * Card headings whose text touches their card's left edge (under 8 px inside it): a heading in a card
 * without padding (a table's card) reads as cut off. Answers "text (px)" for each; [] when none.
 */
export const flushHeadings = (p: Page) => p.evaluate(`Array.from(document.querySelectorAll('.card h1, .card h2')).map((h) => {
    const range = document.createRange(); range.selectNodeContents(h);
    return [h.textContent.trim(), range.getBoundingClientRect().left - h.closest('.card').getBoundingClientRect().left];
  }).filter(([, inset]) => inset < 8).map(([text, inset]) => text + ' (' + Math.round(inset) + ' px)')`) as Promise<string[]>;
