// The `agentgate` command of a checkout, as the README gives it, runs the checkout's own bin at once:
// nothing is installed (npx would install the checkout into its cache, seconds, and run its `prepare`
// build), no npm runs, and no network is needed.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { docPages } from '../support/doc-pages.js';

const run = promisify(execFile);
let scratch: string;
beforeAll(() => { scratch = mkdtempSync(join(tmpdir(), 'agentgate-checkout-cli-')); });
afterAll(() => { rmSync(scratch, { recursive: true, force: true }); });

/** The program of the README's `… receipts list` line: what a reader of the checkout types for `agentgate`. */
function readmeCommand(): string {
  const line = readFileSync('README.md', 'utf8').split('\n').find((l) => / receipts list /.test(l) && !l.startsWith('|'));
  return line!.slice(0, line!.indexOf(' receipts list '));
}

test('the README\'s command answers --version from this checkout\'s bin, with no npm, no install and no network', async () => {
  const command = readmeCommand();
  expect(command).toBe('./agentgate');
  // Every module any Node process of the command loads (npm or npx would load hundreds of their own).
  const hook = join(scratch, 'list-modules.mjs');
  writeFileSync(hook, `import { registerHooks } from 'node:module';
registerHooks({ load(url, context, next) { if (!url.startsWith('node:')) process.stderr.write('LOADED ' + url + '\\n'); return next(url, context); } });
`);
  const npmCache = mkdtempSync(join(scratch, 'npm-cache-'));
  const { stdout, stderr } = await run('sh', ['-c', `${command} --version`], {
    env: {
      ...process.env, NODE_OPTIONS: `--import ${hook}`,
      // An install would have to go through this empty cache and a registry that does not answer.
      npm_config_cache: npmCache, npm_config_registry: 'http://127.0.0.1:9/', npm_config_offline: 'true',
    },
  });
  expect(stdout.trim()).toBe(JSON.parse(readFileSync('package.json', 'utf8')).version);
  const loaded = stderr.split('\n').filter((l) => l.startsWith('LOADED ')).map((l) => l.slice(7)).filter((url) => url !== pathToFileURL(hook).href);
  expect(loaded).toEqual([pathToFileURL(resolve('bin/agentgate.js')).href, pathToFileURL(resolve('bin/supported-node.js')).href]);
  expect(readdirSync(npmCache)).toEqual([]);
});

test('no page tells a reader to run the command through npx', () => {
  const pages = [...docPages(), 'seller/README.md'];
  const sources = (dir: string): string[] => readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.(ts|md)$/.test(e.name)).map((e) => join(e.parentPath, e.name));
  const npx = [...pages, ...sources('examples'), ...sources('server')].filter((file) => /npx agentgate\b/.test(readFileSync(file, 'utf8')));
  expect(npx).toEqual([]);
});
