// schemathesis holds the backend to its own OpenAPI document: requests generated from /openapi.json
// (valid ones, and invalid ones that must be refused), sent with the key tier each operation declares,
// must never get a 5xx, and every answer must match the document (status code, media type, schema).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NO_REQUEST_LIMITS, startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { faucetConfig } from '../support/chain.js';
import { schemathesisCommand } from '../support/schemathesis.js';
import { DevChatPlatform } from '../../server/dev/chat-platform.js';
import { ALL_SCOPES } from '../../server/platform/auth/scopes.js';
import { OPERATIONS, openApiPath } from '../../server/openapi/operations.js';

/** Generated examples per operation and phase: bounded so the run stays around a minute. */
const MAX_EXAMPLES = 15;
const CHECKS = ['not_a_server_error', 'status_code_conformance', 'content_type_conformance', 'response_schema_conformance', 'negative_data_rejection'];

let platform: DevChatPlatform;
let server: TestServer;
let dir: string;
let st: string;

beforeAll(async () => {
  st = schemathesisCommand((line) => process.stderr.write(`[schemathesis] ${line}\n`));
  platform = await new DevChatPlatform().start();
  // TRUST_PROXY off: every request comes from 127.0.0.1, so rate limits apply to the fuzzer as to anyone.
  // Thousands of generated requests from a few keys: request limits off, or they would answer most of them
  // 429 before any reached the operation under test (test/platform/request-limits.test.ts tests the limits).
  server = await startTestServer({ ...NO_REQUEST_LIMITS, ...platform.backendConfig(), ...(await faucetConfig('200000')) });
  platform.setEventsUrl(`${server.url}/v0/chat/events`);
  const agent = await signUp(server);
  await server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { addScopes: [...ALL_SCOPES] } });
  await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8' } });
  const seller = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: { name: 'schemathesis' } });
  dir = mkdtempSync(join(tmpdir(), 'agentgate-schemathesis-'));
  // One key per security scheme of the document: schemathesis sends each operation the one it declares.
  writeFileSync(join(dir, 'schemathesis.toml'), [
    `[auth.openapi.identityKey]\nbearer = "${agent.identity.rawKey}"`,
    `[auth.openapi.platformKey]\nbearer = "${agent.platform_key}"`,
    `[auth.openapi.sellerKey]\nbearer = "${seller.body.apiKey}"`,
    // A schema-violating body over MAX_BODY_BYTES is refused 413 before it is read, a rejection as right
    // as a 400 (schemathesis's own list leaves 413 out: a seed that generates a 10 MB field failed on it).
    `[checks.negative_data_rejection]\nexpected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]`,
    // Routes that fetch a URL the caller chose answer 502/504 when it is unreachable (the fuzzer's URLs
    // are: this machine has no internet); every other 5xx stays a failure.
    ...OPERATIONS.filter((op) => op.fetchesCallerUrl).map((op) =>
      `[[operations]]\ninclude-method = "${op.method.toUpperCase()}"\ninclude-path = "${openApiPath(op.path)}"\nchecks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "502", "504"]`),
  ].join('\n'));
}, 300_000);

afterAll(async () => {
  await server?.close();
  await platform?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function run(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(st, args, { cwd: dir, env: { ...process.env, NO_COLOR: '1', SCHEMATHESIS_TELEMETRY: 'false' } });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

/**
 * The report's failures section, each line cut to 400 characters: a curl line carrying a generated body
 * of megabytes otherwise fills the report and hides which operation failed which check.
 */
function failures(output: string): string {
  const start = output.indexOf('FAILURES');
  const end = output.indexOf('WARNINGS', start);
  const section = start < 0 ? output.slice(-12_000) : output.slice(start, end < 0 ? undefined : end);
  return section.split('\n').map((line) => (line.length > 400 ? `${line.slice(0, 400)}… (${line.length} characters)` : line)).join('\n').slice(0, 12_000);
}

test('finds no 5xx and no answer that violates /openapi.json', async () => {
  const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
  const { code, output } = await run([
    'run', `${server.url}/openapi.json`,
    '--checks', CHECKS.join(','),
    '--max-examples', String(MAX_EXAMPLES),
    '--workers', '2',
    '--seed', String(seed),
    '--no-color',
    // The mail event stream never ends by design; its refusals are fuzzed by test/platform/hostile-routes.test.ts.
    '--exclude-path', '/v0/events',
  ]);
  const summary = output.slice(output.lastIndexOf('SUMMARY'));
  const cases = /(\d+) generated, (\d+) (?:passed|found)/.exec(summary);
  const tested = /Tested: (\d+)/.exec(summary);
  console.log(`[schemathesis] seed ${seed}: ${tested?.[1] ?? '?'} operations, ${cases?.[1] ?? '?'} generated test cases; exit ${code}`);
  // On a failure, the report names each operation, the check it failed and a curl line to reproduce it.
  expect({ code, report: code === 0 ? 'ok' : failures(output) }).toEqual({ code: 0, report: 'ok' });
  expect(Number(tested?.[1])).toBeGreaterThan(70);
}, 600_000);
