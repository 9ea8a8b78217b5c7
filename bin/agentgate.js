#!/usr/bin/env node
// The `agentgate` command. An installed copy (npm install, a packed tarball) runs the bundle the build
// made in dist/agentgate/ (scripts/bundle.ts), made by `prepare`/`prepack`. So does a checkout of the
// repository (tsconfig.json beside the sources) while its build is as new as its sources; once a source
// is newer it runs the TypeScript sources through tsx, so an edit takes effect at once and a stale dist/
// never wins.
//
// This file is written for old Node versions too (no top-level await, no syntax newer than Node 12's
// ES modules): on a Node older than agentgate supports it runs itself again on a supported one (see
// supported-node.js), instead of failing deep inside a dependency.
import { existsSync, readdirSync, readFileSync, statSync } from 'fs';
import module from 'module';
import { join } from 'path';
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
  // Node 22.8+ keeps the compiled code of the modules it loads on disk: the next start skips compiling them.
  if (module.enableCompileCache) module.enableCompileCache();
  // The checkout's tsconfig.json, wherever the command is run from: its paths point the wire package
  // (agentgate-x402-wire) at its sources.
  const started = checkout && !builtFromTheseSources()
    ? import('tsx/esm/api').then((tsx) => tsx.tsImport('../server/cli/main.ts', { parentURL: import.meta.url, tsconfig: fileURLToPath(new URL('../tsconfig.json', import.meta.url)) }))
    : import(new URL('../dist/agentgate/main.js', import.meta.url).href);
  started.catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}

/**
 * Whether the checkout's dist/ was built from its sources as they are now: none of them is newer than
 * the build (dist/build-info.json, written by scripts/build.ts). Then it runs, as an installed copy does:
 * loading the sources through tsx takes seconds more at every start (2.3 s against 0.5 s for the bundle
 * on a quiet machine, and four times that on a busy one), which a rolling restart waits for. An edit, a
 * pull or a checkout of another commit makes a source newer, and the sources run again until the next
 * build.
 */
function builtFromTheseSources() {
  const root = fileURLToPath(new URL('..', import.meta.url));
  let sourcesAt;
  try {
    sourcesAt = JSON.parse(readFileSync(join(root, 'dist', 'build-info.json'), 'utf8')).sourcesAt;
  } catch (err) {
    return false;
  }
  if (typeof sourcesAt !== 'number') return false;
  const newer = (path) => {
    const stat = statSync(path);
    if (!stat.isDirectory()) return stat.mtimeMs >= sourcesAt;
    // A folder's own time moves when a file in it is added, removed or renamed.
    return stat.mtimeMs >= sourcesAt || readdirSync(path).some((name) => newer(join(path, name)));
  };
  try {
    return !['server', 'contracts', 'packages/x402-wire/src', 'tsconfig.json', 'tsconfig.build.json'].some((path) => newer(join(root, path)));
  } catch (err) {
    return false;
  }
}
