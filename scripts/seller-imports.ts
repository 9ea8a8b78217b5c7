// The last step of the backend's build (scripts/build.ts runs it on the staged dist/). In the sources the
// backend imports the seller library by relative path (`../../middleware/price.js`), so the checkout runs
// without a build. The published backend (agentgate-x402-server) instead depends on the seller package
// (agentgate-x402) and must load the library from there, not from a second copy of its own: this rewrites
// every import of dist/middleware/ in the compiled backend to `agentgate-x402/internal/…`, then deletes the
// compiled copy (dist/middleware/, dist/adapters/), so a missed import fails loudly instead of loading a
// duplicate. Any other import that leaves the backend's own folders stops the build.
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

export const SELLER_PACKAGE = 'agentgate-x402';
/** The folders of dist/ that make up the backend package. */
export const BACKEND_DIRS = ['server', 'contracts'];
/** Module specifiers in emitted JavaScript and declarations: `from '…'`, `import '…'`, `import('…')`. */
const SPECIFIER = /(\bfrom\s*|\bimport\s*|\bimport\(\s*)(['"])(\.{1,2}\/[^'"]+)\2/g;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.(js|d\.ts)$/.test(name) ? [path] : [];
  });
}

/**
 * Rewrites one compiled file's imports of the seller library; returns the new text and the imports that
 * point outside the backend and the library (each `file -> specifier`).
 */
export function rewriteImports(dist: string, file: string, text: string): { text: string; stray: string[] } {
  const stray: string[] = [];
  const out = text.replace(SPECIFIER, (whole, lead: string, quote: string, specifier: string) => {
    const target = relative(dist, resolve(dirname(file), specifier)).split(sep).join('/');
    const [top, ...rest] = target.split('/');
    if (top === 'middleware') return `${lead}${quote}${SELLER_PACKAGE}/internal/${rest.join('/')}${quote}`;
    if (!BACKEND_DIRS.includes(top!)) stray.push(`${relative(dist, file)} -> ${specifier}`);
    return whole;
  });
  return { text: out, stray };
}

export function pointBackendAtSellerPackage(dist: string): { rewritten: number; stray: string[] } {
  let rewritten = 0;
  const stray: string[] = [];
  for (const dir of BACKEND_DIRS.map((d) => join(dist, d)).filter(existsSync)) {
    for (const file of files(dir)) {
      const before = readFileSync(file, 'utf8');
      const result = rewriteImports(dist, file, before);
      stray.push(...result.stray);
      if (result.text !== before) {
        writeFileSync(file, result.text);
        rewritten++;
      }
    }
  }
  for (const copy of ['middleware', 'adapters']) rmSync(join(dist, copy), { recursive: true, force: true });
  return { rewritten, stray };
}
