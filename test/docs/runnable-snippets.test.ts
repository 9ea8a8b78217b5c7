// The docs cannot rot: every shell block of README.md and docs/**/*.md marked ```sh runnable is run, in
// order, by bash against a fresh dev-mode backend ($BASE); the blocks of one page share one bash session,
// and each page's session starts afresh, so a page sets the keys its snippets use itself. curl fails on any HTTP error, so a snippet
// whose route, body or variables went stale fails here. Every ```ts runnable block is a seller program:
// it runs as written (tsx; only its `agentgate-x402` imports are pointed at this checkout's sources)
// with AGENTGATE_URL, AGENTGATE_SELLER_KEY, AGENTGATE_PLATFORM_KEY and PORT set, must print
// `selling <url>` once it is ready, and a buyer (@x402/fetch) then pays that URL.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { faucetConfig, sendUsdc, testChain } from '../support/chain.js';
import { setUpSeller } from '../interop/seller.js';
import { freePort } from '../../server/platform/net.js';
import { payWithV2 } from '../../examples/buyer/buyer.js';
import { docPages } from '../support/doc-pages.js';

let server: TestServer;
// Every page stands on its own, so most begin with a signup: more than the 10 a minute one address may
// make (the limit has its own tests); this server takes as many as the pages need.
beforeAll(async () => { server = await startTestServer({ ...(await faucetConfig('100')), SIGNUP_RATE_LIMIT_PER_MINUTE: '100' }); });
afterAll(async () => { await server?.close(); });

/** The runnable blocks of one markdown file, in order. */
function runnableBlocks(file: string): string[] {
  return [...readFileSync(file, 'utf8').matchAll(/^```sh runnable\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

const files = docPages();
const withBlocks = files.filter((file) => runnableBlocks(file).length > 0);

test('the README has runnable blocks', () => {
  expect(runnableBlocks('README.md').length).toBeGreaterThanOrEqual(4);
});

/**
 * Runs blocks in one bash session. Any 4xx/5xx or unreachable URL fails the script, also inside `$(…)`
 * (inherit_errexit: bash otherwise ignores a failure in a command substitution and carries on with an
 * empty value). -s keeps the output readable, -S still shows errors.
 */
function runSnippets(blocks: string[]): Promise<{ code: number | null; output: string }> {
  const script = ['set -euo pipefail', 'shopt -s inherit_errexit', 'curl() { command curl -sS --fail-with-body "$@" && echo; }', ...blocks].join('\n');
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { env: { ...process.env, BASE: server.url } });
    let output = '';
    child.stdout.on('data', (d: Buffer) => { output += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { output += d.toString(); });
    child.on('close', (code) => resolve({ code, output }));
  });
}

test('a stale snippet fails the run, also when its failing call sits inside $(…)', async () => {
  expect((await runSnippets(['X=$(curl -s $BASE/v0/no-such-route)', 'echo "went on with [$X]"'])).code).not.toBe(0);
  expect((await runSnippets(['curl -s $BASE/v0/whoami -H "authorization: Bearer agi_stale"'])).code).not.toBe(0);
});

test.each(withBlocks)('the runnable snippets of %s run as written', async (file) => {
  const { code, output } = await runSnippets(runnableBlocks(file));
  expect({ file, code, output: code === 0 ? '' : output.slice(-4000) }).toEqual({ file, code: 0, output: '' });
}, 120_000);

/** The ```ts runnable blocks of one markdown file, in order. */
function sellerPrograms(file: string): string[] {
  return [...readFileSync(file, 'utf8').matchAll(/^```ts runnable\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}
const programs = files.flatMap((file) => sellerPrograms(file).map((code, index) => [file, index + 1, code] as const));

test('docs/sellers/middleware.md has a runnable seller program', () => {
  expect(sellerPrograms(join('docs', 'sellers', 'middleware.md')).length).toBeGreaterThanOrEqual(1);
});

/** The program's imports of the seller package, pointed at this checkout's sources. */
function againstCheckout(code: string): string {
  const source = (path: string) => JSON.stringify(pathToFileURL(resolve(path)).href);
  return code
    .replace(/from 'agentgate-x402\/([\w-]+)'/g, (_, adapter: string) => `from ${source(`adapters/${adapter}.ts`)}`)
    .replace(/from 'agentgate-x402'/g, `from ${source('middleware/index.ts')}`);
}

test.each(programs)('the seller program of %s (block %i) runs as written, registers its route and is paid', async (_file, _index, code) => {
  const seller = await setUpSeller(server); // acceptance and a seller key; no endpoint: the program registers it
  const port = await freePort();
  // Inside the checkout, so that the program's other imports (express) resolve from its node_modules.
  const dir = mkdtempSync(join(process.cwd(), '.snippet-'));
  let child: ChildProcess | undefined;
  try {
    writeFileSync(join(dir, 'server.ts'), againstCheckout(code));
    const tsx = pathToFileURL(resolve('node_modules', 'tsx', 'dist', 'loader.mjs')).href;
    child = spawn(process.execPath, ['--import', tsx, join(dir, 'server.ts')], {
      env: { ...process.env, AGENTGATE_URL: server.url, AGENTGATE_SELLER_KEY: seller.sellerKey, AGENTGATE_PLATFORM_KEY: seller.platformKey, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const url = await new Promise<string>((resolveUrl, reject) => {
      const timer = setTimeout(() => reject(new Error(`the program did not say it is selling:\n${output}`)), 60_000);
      const onData = (d: Buffer) => {
        output += d.toString();
        const selling = /^selling (\S+?):?\s/m.exec(output);
        if (selling) { clearTimeout(timer); resolveUrl(selling[1]!); }
      };
      child!.stdout!.on('data', onData);
      child!.stderr!.on('data', onData);
      child!.once('exit', (exitCode) => { clearTimeout(timer); reject(new Error(`the program exited (${exitCode}):\n${output}`)); });
    });
    // Registered by the program itself, at the URL it printed.
    const endpoints = await server.request('GET', '/v0/payments/endpoints', { key: seller.platformKey });
    expect(endpoints.body.endpoints.map((e: { url: string }) => e.url)).toContain(url);
    const buyerKey = generatePrivateKey();
    await sendUsdc(privateKeyToAccount(buyerKey).address, 100_000n);
    const paid = await payWithV2(url, buyerKey, { chainId: testChain().chain.id, address: testChain().usdc });
    expect({ status: paid.status, body: paid.body, output: paid.status === 200 ? '' : output }).toEqual({
      status: 200, body: expect.objectContaining({ paidBy: privateKeyToAccount(buyerKey).address }), output: '',
    });
  } finally {
    child?.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
