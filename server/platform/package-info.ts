import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * This package's package.json, found by walking up from this file: the same code runs from the sources
 * (server/platform/) and from the build (dist/server/platform/), at different depths.
 */
function findPackageJson(): { name: string; version: string } {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const json = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (json.name && json.version) return { name: json.name, version: json.version };
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('package.json not found above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
}

export const PACKAGE = findPackageJson();
