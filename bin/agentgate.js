#!/usr/bin/env node
// The `agentgate` command. In a checkout of the repository (tsconfig.json beside the sources) it runs the
// TypeScript sources through tsx, so an edit takes effect at once and a stale dist/ never wins; an
// installed copy (npm install, a packed tarball) runs the build in dist/, made by `prepare`/`prepack`.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const checkout = existsSync(fileURLToPath(new URL('../tsconfig.json', import.meta.url)))
  && existsSync(fileURLToPath(new URL('../server/cli/main.ts', import.meta.url)));
if (checkout) {
  const { tsImport } = await import('tsx/esm/api');
  await tsImport('../server/cli/main.ts', import.meta.url);
} else {
  await import(new URL('../dist/server/cli/main.js', import.meta.url).href);
}
