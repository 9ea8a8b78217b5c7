// One custom mail domain through every surface a person or an agent uses besides the API: the console
// (add it, read its records as DNS holds them, give an identity an address), the CLI (`agentgate domains`,
// as a shell runs it) and MCP (an agent checks the domain and takes an address for itself, with the
// official MCP client).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { consoleGet, consolePost, signIn } from '../console/http-client.js';
import { callTool as call, connectMcp } from '../support/mcp-client.js';

const run = promisify(execFile);
const CLI = join(process.cwd(), 'bin', 'agentgate.js');
const DOMAIN = 'surfaces.test';
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  server.dns!.fallbackSpf = null;
});
afterAll(async () => { await server?.close(); });

async function cli(args: string[]) {
  try {
    const { stdout } = await run('node', [CLI, ...args, '--url', server.url], { env: { ...process.env, AGENTGATE_CREDENTIALS: '/nonexistent/credentials.json' }, timeout: 30_000 });
    return { code: 0, stdout };
  } catch (err) {
    const e = err as { code: number; stdout: string };
    return { code: e.code, stdout: e.stdout };
  }
}

it('the console adds a domain and shows its records as DNS holds them; the CLI and an agent over MCP see and use the same domain', async () => {
  const org = await signUp(server);
  const session = await signIn(server, org.platform_key);

  // Console: add it, and land on its page with the records to publish.
  const added = await consolePost(server, '/console/domains', { _csrf: session.csrf, domain: DOMAIN }, { cookie: session.cookie });
  expect(added.status).toBe(303);
  const domainId = /\/console\/domains\/(dom_\w+)$/.exec(added.location ?? '')![1]!;
  const domain = (await server.request('GET', `/v0/domains/${domainId}`, { key: org.platform_key })).body;
  const page = await consoleGet(server, `/console/domains/${domainId}`, session.cookie);
  expect(page.status).toBe(200);
  for (const record of domain.records) expect(page.text).toContain(record.name);
  expect(page.text).toContain('Addresses can be added once the domain is verified');

  // Published, but the MX points elsewhere: the console says which record is wrong and what it found.
  for (const r of domain.records) if (r.type === 'TXT') server.dns!.set(r.name, 'TXT', [r.value]);
  server.dns!.set(DOMAIN, 'MX', ['mx.elsewhere.test']);
  const wrong = await consoleGet(server, `/console/domains/${domainId}`, session.cookie);
  expect(wrong.text).toMatch(/wrong<\/span><br><span class="muted">found: <code class="wrap">mx\.elsewhere\.test<\/code>/);

  // The CLI reads the same check, one line per record.
  const checked = await cli(['domains', 'check', domainId, '--key', org.platform_key]);
  expect(checked.code).toBe(0);
  expect(checked.stdout).toContain(`${domainId}  ${DOMAIN}  pending`);
  expect(checked.stdout).toMatch(/wrong\s+MX\s+surfaces\.test\s+10 agents\.test/);
  expect(checked.stdout).toContain('found: mx.elsewhere.test');

  server.dns!.set(DOMAIN, 'MX', ['agents.test']);
  const listed = await cli(['domains', 'list', '--key', org.platform_key]);
  expect(listed.stdout).toContain(`${domainId}  ${DOMAIN}`);
  const verified = await cli(['domains', 'check', domainId, '--key', org.platform_key]);
  expect(verified.stdout).toContain(`${domainId}  ${DOMAIN}  verified`);

  // Console: now it takes an address for an identity of the org.
  const ready = await consoleGet(server, `/console/domains/${domainId}`, session.cookie);
  expect(ready.text).toContain(org.identity.identityId);
  const address = await consolePost(server, `/console/domains/${domainId}/addresses`, { _csrf: session.csrf, localPart: 'hello', identityId: org.identity.identityId }, { cookie: session.cookie });
  expect(address.status).toBe(303);
  expect((await consoleGet(server, `/console/domains/${domainId}`, session.cookie)).text).toContain(`hello@${DOMAIN}`);

  // MCP: the agent sees the domain, takes an address for itself, and lists its addresses.
  const agent = await connectMcp(server.url, org.identity.rawKey);
  try {
    expect((await call(agent, 'mail_domains', {})).domains).toEqual([expect.objectContaining({ domainId, domain: DOMAIN, status: 'verified' })]);
    expect((await call(agent, 'mail_domain_check', { domainId })).records.every((r: any) => r.status === 'ok')).toBe(true);
    expect(await call(agent, 'mail_address_take', { domainId, localPart: 'Sales' })).toMatchObject({ address: `sales@${DOMAIN}`, identityId: org.identity.identityId });
    expect((await call(agent, 'mail_addresses', {})).addresses.map((a: any) => [a.address, a.usable])).toEqual([
      [org.identity.emailAddress, true], [`hello@${DOMAIN}`, true], [`sales@${DOMAIN}`, true],
    ]);
  } finally {
    await agent.close();
  }

  // Another org's console does not find it.
  const outsider = await signUp(server);
  const theirs = await signIn(server, outsider.platform_key);
  expect((await consoleGet(server, `/console/domains/${domainId}`, theirs.cookie)).status).toBe(404);
});
