// A checkout's `agentgate` runs its build (dist/) while no source is newer than it, as an installed copy
// does: loading the sources through tsx costs seconds at every start, which a rolling restart waits for.
// Once a source is newer (an edit, a pull, another commit checked out, a file added), the sources run, so
// a stale build never wins. Each case runs the checkout's real bin/ in a stand-in checkout whose two
// entry points only say which of them ran.
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { writeBuildInfo } from '../../scripts/build.js';

const run = promisify(execFile);
let scratch: string;
beforeAll(() => { scratch = mkdtempSync(join(tmpdir(), 'agentgate-checkout-build-')); });
afterAll(() => { rmSync(scratch, { recursive: true, force: true }); });

/** A checkout with sources dated a minute ago (as a clone leaves them) and a build stamped a second ago. */
function checkout(name: string, options: { buildInfo?: boolean } = {}): string {
  const root = join(scratch, name);
  cpSync('bin', join(root, 'bin'), { recursive: true });
  symlinkSync(join(process.cwd(), 'node_modules'), join(root, 'node_modules'));
  const files: Record<string, string> = {
    'package.json': JSON.stringify({ type: 'module', version: '0.0.0' }),
    'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext' } }),
    'tsconfig.build.json': '{}',
    'server/cli/main.ts': "const ran: string = 'sources';\nconsole.log(ran);\n",
    'server/platform/config.ts': 'export {};\n',
    'contracts/Token.sol': '// a contract\n',
    'packages/x402-wire/src/index.ts': 'export {};\n',
    'dist/agentgate/main.js': "console.log('build');\n",
  };
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  // The sources as a clone leaves them (a minute ago), and a build made after them.
  const cloned = new Date(Date.now() - 60_000);
  for (const path of [...Object.keys(files), 'server/cli', 'server/platform', 'server', 'contracts', 'packages/x402-wire/src']) utimesSync(join(root, path), cloned, cloned);
  const sourcesAt = Date.now() - 1_000;
  // Stamped as `npm run build` stamps it, so the bin and the build must agree on its form.
  if (options.buildInfo ?? true) writeBuildInfo(join(root, 'dist'), sourcesAt);
  return root;
}

const ran = async (root: string) => (await run(process.execPath, [join(root, 'bin', 'agentgate.js'), 'serve'], { cwd: scratch })).stdout.trim();

test('a checkout whose build is newer than every source runs the build', async () => {
  expect(await ran(checkout('fresh'))).toBe('build');
});

test('a source saved after the build runs the sources, anywhere under server/, contracts/ and the wire package', async () => {
  for (const [i, path] of ['server/platform/config.ts', 'contracts/Token.sol', 'packages/x402-wire/src/index.ts', 'tsconfig.json'].entries()) {
    const root = checkout(`edited-${i}`);
    const now = new Date();
    utimesSync(join(root, path), now, now);
    expect([path, await ran(root)]).toEqual([path, 'sources']);
  }
});

test('a source added or removed after the build runs the sources (its folder is newer)', async () => {
  const added = checkout('added');
  writeFileSync(join(added, 'server', 'platform', 'new-module.ts'), 'export {};\n');
  expect(await ran(added)).toBe('sources');
  const removed = checkout('removed');
  rmSync(join(removed, 'server', 'platform', 'config.ts'));
  expect(await ran(removed)).toBe('sources');
});

test('a build that does not say when it read the sources (made before this check existed) is not run', async () => {
  expect(await ran(checkout('unknown', { buildInfo: false }))).toBe('sources');
});
