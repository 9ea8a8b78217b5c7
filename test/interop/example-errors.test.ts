/**
 * What a newcomer gets wrong first, answered in one line and exit 1 rather than a stack trace.
 *
 * An example seller on a port something else holds (a second copy, another app): each of the four says
 * so. Before, Koa, Hono and Fastify printed Node's stack trace, and
 * Express 5 (which hands the error to its listen callback) said it listened and registered its routes for
 * a port another process answers.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let holder: Server;
let port: number;

beforeAll(async () => {
  // Every address of the port (IPv4 and IPv6), as a running copy of the example holds it.
  holder = createServer();
  holder.listen(0);
  await once(holder, 'listening');
  port = (holder.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise<void>((resolve) => holder.close(() => resolve()));
});

function runExample(script: string, args: string[] = []): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
    env: {
      ...process.env,
      PORT: String(port),
      BUYER_PRIVATE_KEY: '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
      // No dev backend needed: the example never gets past listening.
      AGENTGATE_DEV_SELLER_FILE: join(tmpdir(), 'agentgate-no-such-dev-seller.json'),
      AGENTGATE_URL: 'http://127.0.0.1:9',
      AGENTGATE_SELLER_KEY: 'loid-port-in-use-test',
      AGENTGATE_PLATFORM_KEY: 'agp_port-in-use-test',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
  child.stderr!.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

test.each(['express-seller', 'koa-seller', 'hono-seller', 'fastify-seller', 'mcp-paid-tool'])('the %s example on a port in use: one line naming the port, exit 1', async (example) => {
  const { code, stdout, stderr } = await runExample(`examples/${example}/server.ts`);
  expect(stderr).toContain(`could not listen: port ${port} is already in use; start it on another port, e.g. PORT=`);
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(stdout).not.toMatch(/weather API|weather MCP server|registered/);
  expect(code).toBe(1);
}, 60_000);

describe('the example buyer', () => {
  test('pointed at a port nobody answers (the seller not started): says it could not reach the URL', async () => {
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const url = `http://127.0.0.1:${(closed.address() as { port: number }).port}/weather`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const { code, stdout, stderr } = await runExample('examples/buyer/buyer.ts', [url]);
    expect(stderr.trim()).toBe(`could not reach ${url} (ECONNREFUSED): is the seller running? (npm run example:express-seller, or the port you started it on)`);
    expect(stdout).toBe('');
    expect(code).toBe(1);
  }, 60_000);

  test('given a URL without http:// : says what a URL looks like', async () => {
    const { code, stderr } = await runExample('examples/buyer/buyer.ts', ['localhost:4021/weather']);
    expect(stderr.trim()).toBe('not an http(s) URL: localhost:4021/weather (e.g. http://localhost:4021/weather)');
    expect(code).toBe(1);
  }, 60_000);
});
