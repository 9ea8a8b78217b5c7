#!/usr/bin/env node
// The `agentgate` command. In a checkout of the repository (tsconfig.json beside the sources) it runs the
// TypeScript sources through tsx, so an edit takes effect at once and a stale dist/ never wins; an
// installed copy (npm install, a packed tarball) runs the build in dist/, made by `prepare`/`prepack`.
//
// This file is written for old Node versions too (no top-level await, no syntax newer than Node 12's
// ES modules): on a Node older than agentgate supports it runs itself again on a supported one (see
// supported-node.js), instead of failing deep inside a dependency.
import { existsSync, readFileSync } from 'fs';
import { fileURLToPath } from 'url';
import { MINIMUM_MAJOR, runOn, supportedNode } from './supported-node.js';

const major = Number(process.versions.node.split('.')[0]);
const args = process.argv.slice(2);

if (major < MINIMUM_MAJOR) {
  try {
    runOn(supportedNode(), [fileURLToPath(import.meta.url)].concat(args));
  } catch (err) {
    console.error('agentgate: ' + err.message + ' (or install Node.js ' + MINIMUM_MAJOR + ' or newer from https://nodejs.org, or `nvm install`)');
    process.exitCode = 1;
  }
} else if (args.length === 1 && (args[0] === '--version' || args[0] === '-v')) {
  // Answered from package.json alone: loading the command (and tsx, in a checkout) takes seconds.
  console.log(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version);
} else {
  const checkout = existsSync(fileURLToPath(new URL('../tsconfig.json', import.meta.url)))
    && existsSync(fileURLToPath(new URL('../server/cli/main.ts', import.meta.url)));
  // The checkout's tsconfig.json, wherever the command is run from: its paths point the wire package
  // (agentgate-x402-wire) at its sources.
  const started = checkout
    ? import('tsx/esm/api').then((tsx) => tsx.tsImport('../server/cli/main.ts', { parentURL: import.meta.url, tsconfig: fileURLToPath(new URL('../tsconfig.json', import.meta.url)) }))
    : import(new URL('../dist/server/cli/main.js', import.meta.url).href);
  started.catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
