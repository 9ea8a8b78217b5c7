// `npm run build` never leaves the packages half-deleted: it compiles into a staging folder and swaps the
// result in only when everything compiled. Interrupted (a timed-out `npx`/`npm ci` running `prepare`,
// Ctrl-C), the previous dist/, seller/dist/ and packages/x402-wire/dist/ stay as they were. The build runs here on a copy of the
// sources (this checkout's node_modules linked in), so it never touches the checkout's own dist/, which
// other test files (the packaging test's `npm pack`) may be rebuilding at the same moment.
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { removeAbandonedStaging, STAGING_ROOT, swapIn } from '../../scripts/build.js';

let scratch: string;
beforeAll(() => { scratch = mkdtempSync(join(tmpdir(), 'agentgate-build-')); });
afterAll(() => { rmSync(scratch, { recursive: true, force: true }); });

/** A copy of what the build reads, with a previous build's output in dist/, seller/dist/ and packages/x402-wire/dist/. */
function checkoutCopy(): string {
  const root = join(scratch, 'checkout');
  for (const path of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'seller/package.json', 'seller/tsconfig.json', 'packages/x402-wire/package.json', 'packages/x402-wire/tsconfig.json', 'packages/x402-wire/src', 'middleware', 'adapters', 'server', 'contracts', 'scripts']) {
    cpSync(path, join(root, path), { recursive: true });
  }
  symlinkSync(join(process.cwd(), 'node_modules'), join(root, 'node_modules'));
  for (const file of ['dist/server/cli/main.js', 'seller/dist/middleware/index.js', 'packages/x402-wire/dist/index.js']) {
    mkdirSync(dirname(join(root, file)), { recursive: true });
    writeFileSync(join(root, file), '// the previous build\n');
  }
  return root;
}

const files = (dir: string): string[] => readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name)).sort();

test('`npm run build` killed while it compiles leaves the previous dist/, seller/dist/ and packages/x402-wire/dist/ as they were', async () => {
  const root = checkoutCopy();
  const outputs = () => [...files(join(root, 'dist')), ...files(join(root, 'seller', 'dist')), ...files(join(root, 'packages', 'x402-wire', 'dist'))];
  const before = outputs();
  // The package's build script as npm runs it, in a process group of its own, so the compiler dies with it
  // as under a terminal's Ctrl-C or a timeout's kill.
  const script = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { build: string } }).scripts.build;
  const build = spawn('sh', ['-c', script], { cwd: root, detached: true, stdio: 'ignore', env: { ...process.env, PATH: `${join(root, 'node_modules', '.bin')}${delimiter}${process.env.PATH}` } });
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => build.once('exit', (code, signal) => resolve(signal ?? code)));
  // Killed once the compiler writes the new seller build, or as soon as the previous one is touched.
  const staged = () => existsSync(join(root, STAGING_ROOT)) && readdirSync(join(root, STAGING_ROOT)).some((pid) => existsSync(join(root, STAGING_ROOT, pid, 'seller-dist')));
  const touched = () => !existsSync(join(root, 'seller', 'dist', 'middleware', 'index.js'));
  const deadline = Date.now() + 30_000;
  while (!staged() && !touched() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  process.kill(-build.pid!, 'SIGKILL');
  expect(await exited).toBe('SIGKILL'); // interrupted, not finished

  expect(outputs()).toEqual(before);
  expect(readFileSync(join(root, 'seller', 'dist', 'middleware', 'index.js'), 'utf8')).toBe('// the previous build\n');
  // What the killed build left is cleared by the next one, once its process is gone (reaped).
  const [pid] = readdirSync(join(root, STAGING_ROOT));
  const gone = () => { try { process.kill(Number(pid), 0); return false; } catch { return true; } };
  while (!gone() && Date.now() < deadline + 10_000) await new Promise((r) => setTimeout(r, 50));
  removeAbandonedStaging(root);
  expect(readdirSync(join(root, STAGING_ROOT))).toEqual([]);
}, 60_000);

test('a finished build replaces the previous output as a whole: nothing of the old one is left beside the new', () => {
  const dir = join(scratch, 'swap');
  mkdirSync(join(dir, 'target', 'server'), { recursive: true });
  writeFileSync(join(dir, 'target', 'server', 'removed-since.js'), 'old');
  writeFileSync(join(dir, 'target', 'server', 'main.js'), 'old');
  mkdirSync(join(dir, 'built', 'server'), { recursive: true });
  writeFileSync(join(dir, 'built', 'server', 'main.js'), 'new');
  swapIn(join(dir, 'built'), join(dir, 'target'), join(dir, 'aside'));
  expect(files(join(dir, 'target'))).toEqual([join(dir, 'target', 'server', 'main.js')]);
  expect(readFileSync(join(dir, 'target', 'server', 'main.js'), 'utf8')).toBe('new');
  expect(readdirSync(dir)).toEqual(['target']);
});
