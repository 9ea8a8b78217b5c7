// The three packages as npm publishes them. `npm pack` builds each (prepack) into a tarball; each is
// unpacked into a scratch project's node_modules as npm would place it, next to symlinks to exactly the
// dependencies its manifest declares (taken from this checkout's node_modules, so nothing downloads):
// - the wire package (agentgate-x402-wire): what the other two both speak, built, with its own dependencies;
// - the seller package (agentgate-x402) with the wire package and express and nothing else: the README's
//   seller snippet, run from that project, answers 402 and is paid by the example buyer against a test backend;
// - the backend package (agentgate-x402-server) with the wire package and its own dependencies: its
//   `agentgate` command runs, and its modules load the wire code from agentgate-x402-wire, not a copy.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { sendUsdc, testChain } from '../support/chain.js';
import { setUpSeller } from '../interop/seller.js';
import { freePort } from '../../server/platform/net.js';
import { payWithV2 } from '../../examples/buyer/buyer.js';
import { packageImports } from '../../scripts/check-imports.js';

const run = promisify(execFile);
const repo = process.cwd();

interface Manifest {
  name: string;
  version: string;
  bin?: Record<string, string>;
  exports?: Record<string, string | Record<string, string>>;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}
interface Packed { tarball: string; shipped: string[]; manifest: Manifest }

let scratch: string;
let server: TestServer;
let seller: Packed;
let backend: Packed;
let wire: Packed;
const children: ChildProcess[] = [];

/** `npm pack` in `dir` (prepack builds it), and the manifest as it ships. */
async function pack(dir: string): Promise<Packed> {
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', scratch], { cwd: dir, maxBuffer: 64 * 1024 * 1024 });
  const [packed] = JSON.parse(stdout.slice(stdout.indexOf('\n[') + 1)) as Array<{ filename: string; files: Array<{ path: string }> }>;
  const tarball = join(scratch, packed!.filename);
  const { stdout: manifest } = await run('tar', ['-xzOf', tarball, 'package/package.json']);
  return { tarball, shipped: packed!.files.map((f) => f.path), manifest: JSON.parse(manifest) as Manifest };
}

/** A scratch project: package.json, and node_modules with the unpacked tarballs and symlinked packages. */
async function project(name: string, tarballs: Packed[], links: string[]): Promise<string> {
  const dir = join(scratch, name);
  for (const { tarball, manifest } of tarballs) {
    mkdirSync(join(dir, 'node_modules', manifest.name), { recursive: true });
    await run('tar', ['-xzf', tarball, '-C', join(dir, 'node_modules', manifest.name), '--strip-components=1']);
  }
  link(dir, links);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }));
  return dir;
}

/** Symlinks packages of this checkout into a project's node_modules (a package resolves its own
 *  dependencies from its real path, so only the names the project itself needs are linked). */
function link(dir: string, names: string[]): void {
  for (const name of names) {
    const target = join(dir, 'node_modules', name);
    if (existsSync(target)) continue;
    mkdirSync(dirname(target), { recursive: true });
    symlinkSync(resolve(repo, 'node_modules', name), target);
  }
}

/** The first TypeScript block under "## Sell an API route for USDC" of a README. */
function sellerSnippet(readme: string): string {
  const section = readme.slice(readme.indexOf('## Sell an API route for USDC'));
  return /```ts\n([\s\S]*?)```/.exec(section)![1]!;
}

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'agentgate-pack-'));
  backend = await pack(repo);
  seller = await pack(join(repo, 'seller'));
  wire = await pack(join(repo, 'packages', 'x402-wire'));
  server = await startTestServer();
}, 240_000);
afterAll(async () => {
  for (const child of children) child.kill('SIGTERM');
  await server?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the wire package (agentgate-x402-wire)', () => {
  test('ships its built code and declarations only, one entry point, and depends on what its sources import', () => {
    expect(wire.manifest.name).toBe('agentgate-x402-wire');
    expect(wire.shipped).toEqual(expect.arrayContaining(['dist/index.js', 'dist/index.d.ts', 'dist/codec/v2.js', 'dist/schemes/exact/evm/wire.js', 'README.md', 'package.json']));
    expect(wire.shipped.filter((f) => !['package.json', 'README.md'].includes(f) && !/^dist\/.+\.(js|d\.ts)$/.test(f))).toEqual([]);
    expect(wire.manifest.exports).toEqual({ '.': { types: './dist/index.d.ts', default: './dist/index.js' }, './package.json': './package.json' });
    expect(Object.keys(wire.manifest.dependencies!).sort()).toEqual([...packageImports(repo, ['packages/x402-wire/src']).keys()].sort());
  });
});

describe('the seller package (agentgate-x402)', () => {
  test('ships the built middleware and adapters only, with an export for each adapter', () => {
    expect(seller.manifest.name).toBe('agentgate-x402');
    expect(seller.shipped).toEqual(expect.arrayContaining(['dist/middleware/index.js', 'dist/middleware/index.d.ts', 'dist/adapters/express.js', 'dist/adapters/express.d.ts', 'dist/adapters/koa.js', 'dist/adapters/mcp.js', 'README.md', 'package.json']));
    // Nothing of the backend, no tests, no sources (only declarations), no source maps of unshipped sources.
    // Nor a copy of the wire package: it is a dependency.
    const stray = seller.shipped.filter((f) => !['package.json', 'README.md'].includes(f) && !/^dist\/(middleware|adapters)\/.+(?<!\.map)$/.test(f));
    expect(stray).toEqual([]);
    expect(seller.shipped.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);

    // Every adapter of the checkout has its subpath, and every subpath's files ship.
    const exports = seller.manifest.exports!;
    // Every framework adapter is an export; the pieces they share (paywall-source, held-response, node-transport) are not.
    const shared = ['paywall-source.ts', 'held-response.ts', 'node-transport.ts'];
    const adapters = readdirSync(join(repo, 'adapters')).filter((f) => f.endsWith('.ts') && !shared.includes(f)).map((f) => f.replace(/\.ts$/, ''));
    for (const adapter of adapters) expect(exports[`./${adapter}`]).toEqual({ types: `./dist/adapters/${adapter}.d.ts`, default: `./dist/adapters/${adapter}.js` });
    for (const [subpath, target] of Object.entries(exports)) {
      if (subpath.includes('*')) continue;
      for (const file of typeof target === 'string' ? [target] : Object.values(target)) {
        // The Hono and Fastify adapters are written on other branches: their subpaths are declared
        // ahead, and are held to ship once adapters/<name>.ts exists in the checkout.
        const adapter = /^\.\/dist\/adapters\/(.+)\.(?:d\.ts|js)$/.exec(file)?.[1];
        if (adapter && !existsSync(join(repo, 'adapters', `${adapter}.ts`))) continue;
        expect(seller.shipped).toContain(file.slice(2));
      }
    }
  });

  test('depends at run time on what middleware/ and adapters/ import, with every framework an optional peer', () => {
    const { dependencies = {}, peerDependencies = {}, peerDependenciesMeta = {} } = seller.manifest;
    const imported = [...packageImports(repo, ['middleware', 'adapters']).keys()];
    expect(Object.keys(dependencies).sort()).toEqual(imported.filter((name) => !(name in peerDependencies)).sort());
    expect(Object.keys(dependencies).sort()).toEqual(['agentgate-x402-wire', 'zod']);
    expect(dependencies['agentgate-x402-wire']).toBe(wire.manifest.version);
    expect(Object.keys(seller.manifest.exports!).filter((subpath) => subpath.includes('internal') || subpath.includes('*'))).toEqual([]);
    expect(Object.keys(peerDependencies).sort()).toEqual(['@modelcontextprotocol/sdk', 'express', 'fastify', 'hono', 'koa']);
    for (const name of Object.keys(peerDependencies)) expect(peerDependenciesMeta[name]).toEqual({ optional: true });
  });

  test('installed with express alone, the README snippet serves a 402 and the example buyer pays it', async () => {
    // The snippet a seller reads on npm is the one in the tarball, and the same as the repository README's.
    const app = await project('seller-app', [seller, wire], [...Object.keys(seller.manifest.dependencies!), ...Object.keys(wire.manifest.dependencies!)].filter((name) => name !== wire.manifest.name));
    const snippet = sellerSnippet(readFileSync(join(app, 'node_modules', 'agentgate-x402', 'README.md'), 'utf8'));
    expect(snippet).toBe(sellerSnippet(readFileSync(join(repo, 'README.md'), 'utf8')));

    // The framework-free core loads with no framework at all.
    const core = await run(process.execPath, ['--input-type=module', '-e', "const m = await import('agentgate-x402'); console.log(typeof m.Paywall, typeof m.verifyWebhook)"], { cwd: app });
    expect(core.stdout.trim()).toBe('function function');

    link(app, ['express']);
    const account = await setUpSeller(server);
    const port = await freePort();
    writeFileSync(join(app, 'server.ts'), snippet.replace("'https://api.agentgate.dev'", JSON.stringify(server.url)));
    // tsx from this checkout strips the types; the project itself has no TypeScript tooling.
    const tsx = pathToFileURL(join(repo, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;
    const shop = spawn(process.execPath, ['--import', tsx, 'server.ts'], {
      cwd: app, env: { ...process.env, AGENTGATE_SELLER_KEY: account.sellerKey, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(shop);
    let output = '';
    shop.stdout!.on('data', (d: Buffer) => { output += d.toString(); });
    shop.stderr!.on('data', (d: Buffer) => { output += d.toString(); });
    const url = `http://127.0.0.1:${port}/weather`;
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await fetch(url).catch(() => undefined);
      if (res?.status === 402) break;
      if (Date.now() > deadline || shop.exitCode !== null) throw new Error(`the snippet did not start: ${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    // Nothing else was there: the seller package, express, and the dependencies of the seller and wire packages.
    const expected = new Set(['agentgate-x402', 'express', ...Object.keys(seller.manifest.dependencies!), ...Object.keys(wire.manifest.dependencies!)].map((name) => name.split('/')[0]!));
    expect(readdirSync(join(app, 'node_modules')).sort()).toEqual([...expected].sort());

    const registered = await server.request('POST', '/v0/payments/endpoints', { key: account.platformKey, body: { url, priceUsdc: '0.01' } });
    expect(registered.status).toBe(201);
    const buyerKey = generatePrivateKey();
    await sendUsdc(privateKeyToAccount(buyerKey).address, 100_000n);
    const paid = await payWithV2(url, buyerKey, { chainId: testChain().chain.id, address: testChain().usdc });
    expect(paid.status).toBe(200);
    expect(paid.body).toEqual({ temperatureC: 21, paidBy: privateKeyToAccount(buyerKey).address });

    // The shipped declarations type-check the snippet, with the types a TypeScript seller has anyway.
    link(app, ['@types/express', '@types/node']);
    const tsc = join(repo, 'node_modules', 'typescript', 'bin', 'tsc');
    const checked = await run(process.execPath, [tsc, '--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node', 'server.ts'], { cwd: app })
      .then(() => '', (err: { stdout: string }) => err.stdout);
    expect(checked).toBe('');
  }, 120_000);
});

describe('the backend package (agentgate-x402-server)', () => {
  test('ships the compiled backend and the agentgate command, without the seller library, the wire package or any test', () => {
    expect(backend.manifest.name).toBe('agentgate-x402-server');
    expect(backend.manifest.bin).toEqual({ agentgate: 'bin/agentgate.js' });
    expect(backend.shipped).toEqual(expect.arrayContaining(['bin/agentgate.js', 'bin/supported-node.js', 'dist/agentgate/main.js', 'dist/server/cli/main.js', 'dist/server/server.js', 'dist/contracts/compile.js', 'contracts/SmartAccount.sol', 'README.md', 'package.json']));
    const stray = backend.shipped.filter((f) => !['package.json', 'README.md', 'bin/agentgate.js', 'bin/supported-node.js'].includes(f) && !/^dist\/(agentgate|server|contracts)\//.test(f) && !/^contracts\/[^/]+\.sol$/.test(f));
    expect(stray).toEqual([]);
    expect(backend.shipped.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
  });

  test('depends on the wire package at its exact version, and not on the seller library', () => {
    expect(backend.manifest.dependencies!['agentgate-x402-wire']).toBe(wire.manifest.version);
    expect(backend.manifest.dependencies!['agentgate-x402']).toBeUndefined();
    for (const name of Object.keys(seller.manifest.peerDependencies!)) {
      // A framework the backend needs itself is its own dependency, never left to a peer range.
      if (backend.manifest.dependencies![name] !== undefined) expect(backend.manifest.dependencies![name]).toMatch(/^\d/);
    }
  });

  test('installed with its dependencies, `agentgate --version` runs and every module loads, the wire code from agentgate-x402-wire', async () => {
    const platformBinaries = Object.keys(backend.manifest.optionalDependencies ?? {}).filter((name) => existsSync(join(repo, 'node_modules', name)));
    const dependencies = Object.keys(backend.manifest.dependencies!).filter((name) => name !== wire.manifest.name);
    const app = await project('backend-app', [backend, wire], [...dependencies, ...platformBinaries, ...Object.keys(wire.manifest.dependencies!)]);
    const installed = join(app, 'node_modules', 'agentgate-x402-server');

    const version = await run(process.execPath, [join(installed, backend.manifest.bin!.agentgate!), '--version'], { cwd: app });
    expect(version.stdout.trim()).toBe(backend.manifest.version);

    // The command runs its bundle (dist/agentgate/): a start up to the configuration check loads the server
    // and every dependency it starts with, bundled or left to node_modules.
    const serve = await run(process.execPath, [join(installed, backend.manifest.bin!.agentgate!), 'serve'], { cwd: app, env: { PATH: process.env.PATH } }).then(() => ({ stdout: '', code: 0 }), (err: { stdout: string; stderr: string; code: number }) => ({ stdout: err.stdout + err.stderr, code: err.code }));
    expect(serve.code).toBe(1);
    expect(serve.stdout).toContain('configuration error: BASE_URL is required');

    const entries = ['dist/server/cli/main.js', 'dist/agentgate/main.js'];
    const compiled = backend.shipped.filter((f) => f.startsWith('dist/') && f.endsWith('.js') && !entries.includes(f));
    const fromWire = compiled.filter((f) => readFileSync(join(installed, f), 'utf8').includes("from 'agentgate-x402-wire'"));
    expect(fromWire.length).toBeGreaterThan(10);
    // The two entries run the command line when loaded; every other module and chunk only defines things.
    const script = `for (const f of ${JSON.stringify(compiled)}) await import(${JSON.stringify(pathToFileURL(installed).href + '/')} + f);\nconsole.log('loaded');`;
    const loaded = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: app, maxBuffer: 16 * 1024 * 1024 });
    expect(loaded.stdout.trim()).toBe('loaded');
  }, 120_000);
});
