// A reader who follows a link lands somewhere: every relative link of README.md and docs/**/*.md names a
// file of the repository, and a link to a heading (`page.md#heading`, `#heading`) names a heading that
// page has, spelled as GitHub spells its anchors. Pages move as the docs are reorganised; this catches a
// link left behind.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { docPages } from '../support/doc-pages.js';

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes; repeats get -1, -2. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const prose = markdown.replace(/^```[\s\S]*?^```$/gm, '');
  for (const [, heading] of prose.matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const slug = heading!.toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, '').replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** The relative links of a page (images included), outside code blocks and code spans. */
function linksOf(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```$/gm, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((target) => !/^[a-z]+:/i.test(target));
}

const pages = docPages();

test('the docs are found at every depth', () => {
  expect(pages).toEqual(expect.arrayContaining(['README.md', join('docs', 'README.md'), join('docs', 'sellers', 'middleware.md'), join('docs', 'performance.md')]));
});

test('every relative link of the docs leads to a file, and every anchor to a heading of it', () => {
  const broken: string[] = [];
  for (const page of pages) {
    for (const link of linksOf(readFileSync(page, 'utf8'))) {
      const [path, anchor] = link.split('#') as [string, string | undefined];
      const target = path === '' ? page : normalize(join(dirname(page), decodeURIComponent(path)));
      if (!existsSync(target)) { broken.push(`${page}: ${link} (no such file)`); continue; }
      if (anchor === undefined) continue;
      if (statSync(target).isDirectory() || !target.endsWith('.md')) { broken.push(`${page}: ${link} (an anchor into a non-page)`); continue; }
      if (!anchorsOf(readFileSync(target, 'utf8')).has(anchor)) broken.push(`${page}: ${link} (no such heading)`);
    }
  }
  expect(broken).toEqual([]);
});

test('the anchor rule spells headings as GitHub does', () => {
  expect([...anchorsOf('# Sell by usage (x402 `upto`)\n## Register your routes: `syncEndpoints`\n## Tests\n## Tests\n')])
    .toEqual(['sell-by-usage-x402-upto', 'register-your-routes-syncendpoints', 'tests', 'tests-1']);
});
