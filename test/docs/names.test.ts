// The names the docs use are the ones a reader has: a package named in prose is one they can install,
// and a shell variable in a snippet is one the same page sets or introduces (each page stands on its own:
// a reader may land on any of them). The README's quick start exports $BASE, $KEY and $PLATFORM_KEY.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { docPages } from '../support/doc-pages.js';

const docs = docPages();
const ours = [JSON.parse(readFileSync('package.json', 'utf8')).name, JSON.parse(readFileSync('seller/package.json', 'utf8')).name];

test('code the docs say comes "from `<package>`" comes from a package of ours by its npm name', () => {
  const named = docs.flatMap((file) => [...readFileSync(file, 'utf8').matchAll(/\bfrom `(agentgate[\w-]*)`/g)].map((m) => `${file}: ${m[1]}`));
  expect(named.filter((line) => !ours.some((name) => line.endsWith(`: ${name}`)))).toEqual([]);
});

test('the README exports the variables its quick start promises', () => {
  const readme = readFileSync('README.md', 'utf8');
  const exported = new Set([...readme.matchAll(/^export ([A-Z_]+)=/gm)].map((m) => m[1]!));
  expect([...exported]).toEqual(expect.arrayContaining(['BASE', 'KEY', 'PLATFORM_KEY']));
});

test('every shell variable a snippet uses is set or introduced by the same page', () => {
  const unknown: string[] = [];
  for (const file of docs) {
    const text = readFileSync(file, 'utf8');
    const blocks = [...text.matchAll(/^```(?:sh|bash)[^\n]*\n([\s\S]*?)^```$/gm)].map((m) => m[1]!).join('\n');
    const used = new Set([...blocks.matchAll(/\$\{?([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]!));
    for (const name of used) {
      const setHere = new RegExp(`(^|[\\s;(])(export )?${name}=|\`\\$${name}\``, 'm').test(text);
      if (!setHere) unknown.push(`${file}: $${name}`);
    }
  }
  expect(unknown).toEqual([]);
});

test('every source file the contributor docs name exists (a file moved or renamed takes its docs along)', () => {
  const tracked = execFileSync('git', ['ls-files'], { encoding: 'utf8' }).split('\n').filter(Boolean);
  const names = new Set(tracked.map((file) => file.split('/').pop()!));
  // adding-a-route.md walks through a new area, server/notes/, that is written as the reader follows it.
  const example = 'server/notes/';
  const missing: string[] = [];
  for (const file of docs.filter((page) => page.startsWith('docs/contributors/'))) {
    for (const [, named] of readFileSync(file, 'utf8').matchAll(/`([\w./-]+\.(?:ts|sol|js))`/g)) {
      const found = named!.includes('/') ? tracked.some((path) => path.endsWith(named!)) : names.has(named!);
      if (!found && !named!.startsWith(example)) missing.push(`${file}: ${named}`);
    }
  }
  expect(missing).toEqual([]);
});
