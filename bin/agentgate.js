#!/usr/bin/env node
// The `agentgate` command: runs the compiled CLI when `npm run build` has produced it, and the
// TypeScript source through tsx otherwise, so a fresh `npm ci` is enough to use it.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const compiled = new URL('../dist/server/cli/main.js', import.meta.url);
if (existsSync(fileURLToPath(compiled))) {
  await import(compiled.href);
} else {
  const { tsImport } = await import('tsx/esm/api');
  await tsImport('../server/cli/main.ts', import.meta.url);
}
