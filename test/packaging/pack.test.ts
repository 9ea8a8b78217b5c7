// What a seller installs: `npm pack` builds the package (prepack) into a tarball; unpacked into a
// scratch project's node_modules as npm would, it imports as `agentgate-x402/express` with its types, and
// the README's seller snippet, run from that project, is paid by the example buyer against a backend.
// The scratch project borrows this checkout's installed dependencies (symlinks), so nothing downloads.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { sendUsdc, testChain } from '../support/chain.js';
import { setUpSeller } from '../interop/seller.js';
import { freePort } from '../../server/platform/net.js';
import { payWithV2 } from '../../examples/buyer/buyer.js';

const run = promisify(execFile);
const repo = process.cwd();
const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { name: string; files: string[] };
let scratch: string;
let server: TestServer;
let shop: ChildProcess | undefined;

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'agentgate-pack-'));
  server = await startTestServer();
}, 60_000);
afterAll(async () => {
  shop?.kill('SIGTERM');
  await server?.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** The README's first TypeScript block under "Sell an API route for USDC". */
function readmeSellerSnippet(): string {
  const readme = readFileSync('README.md', 'utf8');
  const section = readme.slice(readme.indexOf('## Sell an API route for USDC'));
  return /```ts\n([\s\S]*?)```/.exec(section)![1]!;
}

test('npm pack builds a tarball that installs and runs the README seller snippet', async () => {
  // 1. Pack (prepack builds dist/), and look at what ships.
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', scratch], { cwd: repo, maxBuffer: 64 * 1024 * 1024 });
  const [packed] = JSON.parse(stdout.slice(stdout.indexOf('['))) as Array<{ filename: string; files: Array<{ path: string }> }>;
  const shipped = packed!.files.map((f) => f.path);
  expect(shipped).toEqual(expect.arrayContaining(['dist/adapters/express.js', 'dist/adapters/express.d.ts', 'dist/middleware/index.d.ts', 'dist/server/cli/main.js', 'bin/agentgate.js', 'package.json']));
  expect(shipped.some((f) => f.startsWith('test/') || f.startsWith('server/') || f === 'tsconfig.json')).toBe(false);

  // 2. Install it into a scratch project as npm would place it: node_modules/<name>, unpacked.
  const modules = join(scratch, 'node_modules');
  mkdirSync(join(modules, pkg.name), { recursive: true });
  await run('tar', ['-xzf', join(scratch, packed!.filename), '-C', join(modules, pkg.name), '--strip-components=1']);
  for (const dep of readdirSync(join(repo, 'node_modules'))) {
    if (dep.startsWith('.') || dep === pkg.name) continue;
    symlinkSync(resolve(repo, 'node_modules', dep), join(modules, dep));
  }
  writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'scratch-seller', private: true, type: 'module' }));

  // 3. The snippet, as written, with the backend pointed at the test server and a seller key.
  const seller = await setUpSeller(server);
  const port = await freePort();
  writeFileSync(join(scratch, 'server.ts'), readmeSellerSnippet().replace("'https://api.agentgate.dev'", JSON.stringify(server.url)));
  shop = spawn(process.execPath, ['--import', 'tsx', 'server.ts'], {
    cwd: scratch, env: { ...process.env, AGENTGATE_SELLER_KEY: seller.sellerKey, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'],
  });
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
  expect(existsSync(join(modules, pkg.name, 'dist', 'adapters', 'express.js'))).toBe(true);

  // 4. Registered and paid: 200 with the handler's answer.
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url, priceUsdc: '0.01', skipUrlCheck: true } });
  expect(registered.status).toBe(201);
  const buyerKey = generatePrivateKey();
  await sendUsdc(privateKeyToAccount(buyerKey).address, 100_000n);
  const paid = await payWithV2(url, buyerKey, { chainId: testChain().chain.id, address: testChain().usdc });
  expect(paid.status).toBe(200);
  expect(paid.body).toEqual({ temperatureC: 21, paidBy: privateKeyToAccount(buyerKey).address });
}, 240_000);
