// The docs cannot rot: every shell block of README.md and docs/*.md marked ```sh runnable is run, in
// order, by bash against a fresh dev-mode backend ($BASE). curl fails on any HTTP error, so a snippet
// whose route, body or variables went stale fails here.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTestServer, type TestServer } from '../support/server.js';
import { faucetConfig } from '../support/chain.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer(await faucetConfig('100')); });
afterAll(async () => { await server?.close(); });

/** The runnable blocks of one markdown file, in order. */
function runnableBlocks(file: string): string[] {
  return [...readFileSync(file, 'utf8').matchAll(/^```sh runnable\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

const files = ['README.md', ...readdirSync('docs').filter((f) => f.endsWith('.md')).sort().map((f) => join('docs', f))];
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
