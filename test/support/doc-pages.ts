// The pages a reader reads: README.md and every markdown page under docs/, at any depth (docs/ is
// organised by reader: docs/sellers/, docs/agents/, ...). Tests that hold the docs to the code read this
// one list, so a page added in a new folder is checked like the others.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

/** README.md, then docs/**\/*.md in path order, as paths relative to the repository. */
export function docPages(): string[] {
  const under = (dir: string): string[] => readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return under(path);
    return entry.isFile() && entry.name.endsWith('.md') ? [path] : [];
  });
  return ['README.md', ...under('docs').sort()];
}
