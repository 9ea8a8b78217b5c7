import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, statSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { startTestServer, type TestServer } from '../support/server.js';
import { freePort } from '../../server/platform/net.js';
import { createServer, type AddressInfo } from 'node:net';
import { privateKeyToAccount } from 'viem/accounts';
import { verifyReceiptSignatureJWS } from '@x402/extensions/offer-receipt';
import { paymentHeaderV1, signAuthorization } from '../support/chain.js';
import { docPages } from '../support/doc-pages.js';

const run = promisify(execFile);
const CLI = join(process.cwd(), 'bin', 'agentgate.js');

let server: TestServer;
let home: string;
beforeAll(async () => {
  server = await startTestServer();
  home = mkdtempSync(join(tmpdir(), 'agentgate-cli-'));
});
afterAll(async () => {
  await server.close();
  rmSync(home, { recursive: true, force: true });
});

async function cli(args: string[], env: Record<string, string | undefined> = {}, timeout = 30_000) {
  try {
    const { stdout, stderr } = await run('node', [CLI, ...args], { env: { ...process.env, ...env }, timeout });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('agentgate CLI against a running server', () => {
  it('signs up once, saves credentials 0600, and reuses them while whoami answers 200', async () => {
    const credentials = join(home, 'signup.json');
    const env = { AGENTGATE_CREDENTIALS: credentials };
    const first = await cli(['signup', '--url', server.url], env);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('signed up as');
    expect(statSync(credentials).mode & 0o777).toBe(0o600);
    const saved = JSON.parse(readFileSync(credentials, 'utf8'));
    expect(saved.platformKey).toMatch(/^agp_/);
    expect(saved.identityKey).toMatch(/^agi_/);

    const again = await cli(['signup', '--url', server.url], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('already signed up');
    const orgs = await server.app.db.collection('orgs').countDocuments({});
    expect(orgs).toBe(1);

    const me = await cli(['whoami'], env);
    expect(me.code).toBe(0);
    expect(JSON.parse(me.stdout).identityId).toBe(saved.identityId);
  });

  it('logs in with an identity key and org id, and refuses a wrong org or key', async () => {
    const signup = await server.request('POST', '/v0/agent-signup', { body: {} });
    const credentials = join(home, 'login.json');
    const env = { AGENTGATE_CREDENTIALS: credentials };
    const wrongOrg = await cli(['login', '--key', signup.body.identity.rawKey, '--org', 'org_other', '--url', server.url], env);
    expect(wrongOrg.code).toBe(1);
    const badKey = await cli(['login', '--key', 'agi_nope', '--org', signup.body.org_id, '--url', server.url], env);
    expect(badKey.code).toBe(1);
    const ok = await cli(['login', '--key', signup.body.identity.rawKey, '--org', signup.body.org_id, '--url', server.url], env);
    expect(ok.code).toBe(0);
    const me = await cli(['whoami'], env);
    expect(JSON.parse(me.stdout).email).toBe(signup.body.identity.emailAddress);
  });

  it('asks the backend of --url, else AGENTGATE_URL, else the saved one, for whoami as for every command', async () => {
    const credentials = join(home, 'order.json');
    const env = { AGENTGATE_CREDENTIALS: credentials };
    expect((await cli(['signup', '--url', server.url], env)).code).toBe(0);
    const saved = JSON.parse(readFileSync(credentials, 'utf8'));
    const [envUrl, flagUrl] = [`http://127.0.0.1:${await freePort()}`, `http://127.0.0.1:${await freePort()}`];
    // Nothing listens at either: the error names the one that was asked.
    const byEnv = await cli(['whoami', '--key', saved.identityKey], { ...env, AGENTGATE_URL: envUrl });
    expect([byEnv.code, byEnv.stderr]).toEqual([1, expect.stringContaining(`could not reach the agentgate backend at ${envUrl}`)]);
    const byFlag = await cli(['whoami', '--key', saved.identityKey, '--url', flagUrl], { ...env, AGENTGATE_URL: envUrl });
    expect([byFlag.code, byFlag.stderr]).toEqual([1, expect.stringContaining(`could not reach the agentgate backend at ${flagUrl}`)]);
    const listByFlag = await cli(['receipts', 'list', '--url', flagUrl], { ...env, AGENTGATE_URL: envUrl, AGENTGATE_KEY: saved.platformKey });
    expect(listByFlag.stderr).toContain(`could not reach the agentgate backend at ${flagUrl}`);
    // The saved key goes only to the backend it was saved for.
    const elsewhere = await cli(['whoami'], { ...env, AGENTGATE_URL: envUrl });
    expect([elsewhere.code, elsewhere.stdout.trim()]).toEqual([1, `not logged in at ${envUrl}: the saved credentials are for ${server.url}, not ${envUrl}: pass --key or set AGENTGATE_KEY, or run \`agentgate login --url ${envUrl}\``]);
    // The same server by another name answers with the key given.
    const other = await cli(['whoami', '--url', server.url.replace('127.0.0.1', 'localhost')], { ...env, AGENTGATE_KEY: saved.identityKey });
    expect(other.code).toBe(0);
    expect(JSON.parse(other.stdout).identityId).toBe(saved.identityId);
  });

  it('stops `serve` with one line naming a bad or missing variable', async () => {
    const missing = await cli(['serve'], { BASE_URL: '', MONGODB_URI: '', MASTER_KEY: '' });
    expect(missing.code).toBe(1);
    // Every missing variable at once, not one per run.
    expect(missing.stderr.trim()).toBe('configuration error: BASE_URL is required; MAIL_DOMAIN is required; DID_DOMAIN is required; MASTER_KEY is required; MONGODB_URI is required');
    const bad = await cli(['serve'], { BASE_URL: 'https://x.example', MAIL_DOMAIN: 'x.example', DID_DOMAIN: 'x.example', MONGODB_URI: 'mongodb://127.0.0.1:1/', MASTER_KEY: 'short' });
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim()).toBe('configuration error: MASTER_KEY must be 32 bytes, as 64 hex characters or base64');
    expect(bad.stderr).not.toContain('    at ');
  });
});

describe('agentgate CLI basics', () => {
  it('answers --help for every command with its usage, and runs nothing', async () => {
    const credentials = join(home, 'help.json');
    for (const command of ['dev', 'serve', 'worker', 'signup', 'login', 'whoami', 'admin', 'rotate-master-key', 'receipts']) {
      const res = await cli([command, '--help'], { AGENTGATE_CREDENTIALS: credentials, BASE_URL: '' });
      expect([command, res.code]).toEqual([command, 0]);
      expect(res.stdout).toContain(`usage: agentgate ${command}`);
    }
    expect(existsSync(credentials)).toBe(false); // `signup --help` signed nobody up
    const top = await cli(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('AGENTGATE_STATE_DIR');
  });

  it('prints its version, refuses an unknown command or option, and a bad --port', async () => {
    const version = await cli(['--version']);
    expect(version.stdout.trim()).toBe(JSON.parse(readFileSync('package.json', 'utf8')).version);
    const bogus = await cli(['bogus']);
    expect(bogus.code).toBe(2);
    expect(bogus.stdout).toContain('unknown command "bogus"');
    const option = await cli(['whoami', '--frobnicate']);
    expect(option.code).toBe(2);
    expect(option.stdout).toContain('usage: agentgate whoami');
    const port = await cli(['dev', '--port', 'x1']);
    expect(port.code).toBe(2);
    expect(port.stdout).toContain('--port must be a port number');
  });

  it('answers --version from package.json alone, and --help without loading the server', async () => {
    // Lists every module the command loads (synchronous loader hooks see tsx-loaded files too).
    const hook = join(home, 'list-modules.mjs');
    writeFileSync(hook, `import { registerHooks } from 'node:module';
const loaded = [];
registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
process.on('exit', () => process.stderr.write('\\nLOADED ' + JSON.stringify(loaded)));
`);
    const loadedBy = async (arg: string) => {
      const { stdout, stderr } = await run('node', ['--import', hook, CLI, arg]);
      return { stdout, loaded: JSON.parse(stderr.slice(stderr.lastIndexOf('LOADED ') + 7)) as string[] };
    };
    const version = await loadedBy('--version');
    expect(version.stdout.trim()).toBe(JSON.parse(readFileSync('package.json', 'utf8')).version);
    expect(version.loaded.filter((url) => !url.startsWith('node:'))).toEqual([pathToFileURL(CLI).href, pathToFileURL(resolve('bin/supported-node.js')).href]);
    const help = await loadedBy('--help');
    expect(help.stdout).toContain('usage: agentgate <command>');
    // The checkout's build or its sources, whichever is newer (bin/agentgate.js): the same two modules. The
    // build runs as a bundle (dist/agentgate/), whose files name each module in them in a comment line.
    const modules = help.loaded.flatMap((url) => url.includes('/dist/agentgate/')
      ? [...readFileSync(fileURLToPath(url), 'utf8').matchAll(/^\/\/ (\S+\.[cm]?js)$/gm)].map((m) => m[1]!)
      : [url]);
    const ours = modules.filter((m) => /(^|\/)server\//.test(m) && !m.includes('node_modules')).map((m) => m.replace(/^.*?(^|\/)server\//, 'server/').replace(/\?.*$/, '').replace(/\.(ts|js)$/, ''));
    expect(ours).toEqual(['server/cli/main', 'server/platform/package-info']);
  });

  it('runs itself on Node 22 from its cache on an older Node, saying so in one line', async () => {
    // An older Node, as far as the command can tell; the file itself must parse there (no top-level await).
    const node20 = join(home, 'node20.mjs');
    writeFileSync(node20, "Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '20.11.1' } });\n");
    // The cache as a first run leaves it (bin/supported-node.js installs the npm package `node@22` there);
    // this test's Node stands in for it, since nothing downloads at test time.
    const cache = join(home, 'cache');
    const cached = join(cache, 'agentgate', 'node-22', 'node_modules', 'node', 'bin');
    mkdirSync(cached, { recursive: true });
    symlinkSync(process.execPath, join(cached, 'node'));
    const res = await run('node', ['--import', node20, CLI, '--version'], { env: { ...process.env, XDG_CACHE_HOME: cache } });
    expect(res.stdout.trim()).toBe(JSON.parse(readFileSync('package.json', 'utf8')).version);
    expect(res.stderr.trim()).toBe(`agentgate: this is Node.js 20.11.1; running on Node.js 22 from ${join(cache, 'agentgate', 'node-22')} (install 22 or newer, or \`nvm use\`, to use your own)`);
    // A supported Node is never swapped: the same command on this Node says nothing about Node.
    const own = await run('node', [CLI, '--version'], { env: { ...process.env, XDG_CACHE_HOME: cache } });
    expect(own.stderr).toBe('');
    expect(readFileSync(CLI, 'utf8')).not.toMatch(/^\s*(?:const .*= )?await\s/m);
    expect(readFileSync('bin/supported-node.js', 'utf8')).not.toMatch(/^\s*(?:const .*= )?await\s/m);
  });

  it('is installed, wherever the docs say so, from the package whose bin it is', () => {
    // The seller package (seller/) has no bin: an install line naming it would leave the reader without
    // the command.
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { name: string; bin: Record<string, string> };
    expect(Object.keys(pkg.bin)).toEqual(['agentgate']);
    const docs = docPages();
    const installs = docs.flatMap((file) => [...readFileSync(file, 'utf8').matchAll(/npm install -g (\S+?)[`);\s]/g)].map((m) => `${file}: ${m[1]}`));
    expect(installs.length).toBeGreaterThanOrEqual(3);
    expect(installs.filter((line) => !line.endsWith(`: ${pkg.name}`))).toEqual([]);
  });

  it('says which backend it could not reach and what to start', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const res = await cli(['signup', '--url', closed], { AGENTGATE_CREDENTIALS: join(home, 'down.json') });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`could not reach the agentgate backend at ${closed}`);
    expect(res.stderr).toContain('`agentgate dev`');
  });

  it('keeps the platform key that signup saved when the same org logs in with an identity key', async () => {
    const credentials = join(home, 'keep.json');
    const env = { AGENTGATE_CREDENTIALS: credentials };
    expect((await cli(['signup', '--url', server.url], env)).code).toBe(0);
    const saved = JSON.parse(readFileSync(credentials, 'utf8'));
    const identity = await server.request('POST', '/v0/platform/identities', { key: saved.platformKey, body: {} });
    expect((await cli(['login', '--key', identity.body.rawKey, '--org', saved.orgId, '--url', server.url], env)).code).toBe(0);
    expect(JSON.parse(readFileSync(credentials, 'utf8'))).toMatchObject({ platformKey: saved.platformKey, identityKey: identity.body.rawKey, orgId: saved.orgId });
    // Another org's login moves these credentials aside instead of losing the platform key.
    const other = await server.request('POST', '/v0/agent-signup', { body: {} });
    const moved = await cli(['login', '--key', other.body.identity.rawKey, '--org', other.body.org_id, '--url', server.url], env);
    expect(moved.stdout).toContain(`credentials of org ${saved.orgId} were moved to`);
    expect(JSON.parse(readFileSync(credentials.replace(/\.json$/, `.${saved.orgId}.json`), 'utf8')).platformKey).toBe(saved.platformKey);
  });
});

describe('agentgate dev', () => {
  it('keeps its data across a restart', async () => {
    const state = mkdtempSync(join(tmpdir(), 'agentgate-devstate-'));
    chmodSync(state, 0o755); // as root, PostgreSQL runs as nobody, who must reach its data in here
    let port = String(await freePort());
    const env = { ...process.env, AGENTGATE_STATE_DIR: state, PORT: port, SMTP_PORT: '0', MONGODB_URI: '', CHAT_DEV_PORT: String(await freePort()), SOLANA_DEV_PORT: String(await freePort()) };
    const startDev = async () => {
      const child = spawn('node', [CLI, 'dev'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`dev did not start: ${output}`)), 60_000);
        const onData = (d: Buffer) => {
          output += d.toString();
          if (output.includes('sign up an agent')) { clearTimeout(timer); resolve(); }
        };
        child.stdout.on('data', onData);
        child.stderr.on('data', onData);
      });
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      return {
        child, output, exited,
        stop: () => new Promise<void>((r) => { child.once('exit', () => r()); child.kill('SIGTERM'); }),
        // Ctrl-C under `npm run dev`: the terminal's SIGINT, and a moment later the one npm passes on (two
        // signals sent back to back would merge into one pending signal).
        ctrlC: async () => { child.kill('SIGINT'); await new Promise((r) => setTimeout(r, 50)); child.kill('SIGINT'); return exited; },
      };
    };
    try {
      // A first start on a port in use stops with a clear message and fixes no DID domain: the DID is
      // fixed by the first start that serves.
      const occupied = createServer();
      await new Promise<void>((resolve) => occupied.listen(0, '127.0.0.1', resolve));
      const busyPort = (occupied.address() as AddressInfo).port;
      const failed = await cli(['dev'], { ...env, PORT: String(busyPort) }, 120_000).finally(() => new Promise((r) => occupied.close(r)));
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain(`port ${busyPort} on 127.0.0.1 is already in use`);
      expect(failed.stderr).toContain('generated a development master key');
      expect(existsSync(join(state, 'did-domain'))).toBe(false);
      // The local chat workspace's port in use: named with the variable that moves it, not a bare EADDRINUSE.
      const chatHolder = createServer();
      await new Promise<void>((resolve) => chatHolder.listen(0, '127.0.0.1', resolve));
      const busyChatPort = (chatHolder.address() as AddressInfo).port;
      const chatFailed = await cli(['dev'], { ...env, CHAT_DEV_PORT: String(busyChatPort) }, 120_000).finally(() => new Promise((r) => chatHolder.close(r)));
      expect(chatFailed.code).toBe(1);
      expect(chatFailed.stderr).toContain(`the local chat workspace's port ${busyChatPort} on 127.0.0.1 is already in use: set CHAT_DEV_PORT to another port`);
      expect(existsSync(join(state, 'did-domain'))).toBe(false);

      // A port drawn now, not before the two failed starts above (a minute or two under load, during which
      // another test's freePort could draw the same number and bind it first).
      port = String(await freePort());
      env.PORT = port;
      const first = await startDev();
      expect(first.output).not.toContain('generated a development master key'); // kept from the failed start
      expect(readFileSync(join(state, 'did-domain'), 'utf8').trim()).toBe(`localhost%3A${port}`);
      const signup = await fetch(`http://127.0.0.1:${port}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }).then((r) => r.json()) as any;
      const agentKey = { authorization: `Bearer ${signup.identity.rawKey}` };
      // The local chat workspace: a person approves the install in the browser (follow the redirects by hand).
      const connect = await fetch(`http://127.0.0.1:${port}/v0/chat/connect`, { method: 'POST', headers: agentKey }).then((r) => r.json()) as any;
      const consent = new URL((await fetch(connect.installUrl, { redirect: 'manual' })).headers.get('location')!);
      expect(first.output).toContain(`local chat workspace on ${consent.origin}`);
      const form = new URLSearchParams(consent.searchParams);
      form.set('decision', 'allow');
      const approved = await fetch(consent.origin + consent.pathname, { method: 'POST', body: form, redirect: 'manual' });
      expect((await fetch(approved.headers.get('location')!)).status).toBe(200);
      // A second `agentgate dev` on the same data refuses at once, naming the running one.
      const twice = await cli(['dev'], { AGENTGATE_STATE_DIR: state, PORT: String(await freePort()), SMTP_PORT: '0', MONGODB_URI: '' });
      expect(twice.code).toBe(1);
      expect(twice.stderr).toMatch(new RegExp(`already running \\(pid ${first.child.pid}, http://localhost:${port}\\)`));
      // Other commands find the running dev server without --url.
      const found = await cli(['signup', '--help'], { AGENTGATE_STATE_DIR: state });
      expect(found.code).toBe(0);
      const didBefore = (await fetch(`http://127.0.0.1:${port}/.well-known/did.json`).then((r) => r.json()) as any).id;
      // A payment to the dev seller: its receipt verifies, for the CLI and the official verifier alike.
      const seller = JSON.parse(readFileSync(join(state, 'dev-seller.json'), 'utf8'));
      const buyer = privateKeyToAccount(seller.buyerPrivateKey);
      const signed = await signAuthorization(buyer, { to: seller.payTo, value: 10_000n }, { chainId: seller.chainId, verifyingContract: seller.usdcAddress });
      const redeemed = await fetch(`http://127.0.0.1:${port}/v0/payments/redeem`, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${seller.sellerKey}` },
        body: JSON.stringify({ paymentHeader: paymentHeaderV1(signed, seller.network), resource: seller.endpoints.express, amount: '0.01' }),
      }).then((r) => r.json()) as any;
      expect(redeemed.paymentId).toMatch(/^pay_/);
      const record = await fetch(`http://127.0.0.1:${port}/v0/payments/${redeemed.paymentId}`, { headers: { authorization: `Bearer ${seller.platformKey}` } }).then((r) => r.json()) as any;
      await expect(verifyReceiptSignatureJWS(record.offerReceipt)).resolves.toMatchObject({ transaction: record.txHash });
      const verify = () => cli(['receipts', 'verify', redeemed.paymentId, '--key', seller.platformKey], { AGENTGATE_STATE_DIR: state, AGENTGATE_CREDENTIALS: join(state, 'none.json') });
      const validThere = await verify();
      expect([validThere.code, validThere.stdout]).toEqual([0, expect.stringContaining(`valid receipt for payment ${redeemed.paymentId}`)]);
      // Ctrl-C stops it gracefully: exit code 0, and nothing left running for the next start to clean up.
      expect(await first.ctrlC()).toBe(0);
      // The second start moves to another port: identities keep their DIDs (receipts keep their signer),
      // and the terminal says that verifiers still look for the DID at the first port.
      const port2 = String(await freePort());
      env.PORT = port2;
      const second = await startDev();
      expect(second.output).not.toContain('left running by an earlier run that was killed');
      expect((await fetch(`http://127.0.0.1:${port2}/.well-known/did.json`).then((r) => r.json()) as any).id).toBe(didBefore);
      expect(didBefore).toBe(`did:web:localhost%3A${port}`);
      expect(second.output).toContain(`third-party verifiers resolve it at http://localhost:${port}/.well-known/did.json`);
      expect(second.output).not.toContain('generated a development master key');
      // Nobody answers at the DID's address now: the official verifier fails, and so does the CLI.
      await expect(verifyReceiptSignatureJWS(record.offerReceipt)).rejects.toThrow(`Failed to resolve ${didBefore}`);
      const invalidHere = await verify();
      expect(invalidHere.code).toBe(1);
      expect(invalidHere.stdout).toContain(`INVALID receipt: its DID ${didBefore} cannot be resolved at http://localhost:${port}/.well-known/did.json`);
      const me = await fetch(`http://127.0.0.1:${port2}/v0/whoami`, { headers: { authorization: `Bearer ${signup.platform_key}` } });
      expect(me.status).toBe(200);
      // The chat install survived too, on both sides: the workspace still knows the bot's token.
      const channels = await fetch(`http://127.0.0.1:${port2}/v0/chat/channels`, { headers: agentKey });
      expect(channels.status).toBe(200);
      expect(((await channels.json()) as any).channels.map((c: { name: string }) => c.name)).toContain('general');
      // The local chain kept its token and the dev seller its keys: no second deployment.
      expect(second.output).not.toContain('(deployed now)');
      const settings = await fetch(`http://127.0.0.1:${port2}/v0/payments/settings`, { headers: { authorization: `Bearer ${seller.sellerKey}` } });
      expect(settings.status).toBe(200);
      await second.stop();
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  }, 240_000);
});

describe('agentgate dev after a SIGKILL', () => {
  it('stops what the killed run left behind and starts on the same data', async () => {
    const state = mkdtempSync(join(tmpdir(), 'agentgate-devstate-'));
    chmodSync(state, 0o755);
    let port = String(await freePort());
    const env = { ...process.env, AGENTGATE_STATE_DIR: state, PORT: port, SMTP_PORT: '0', MONGODB_URI: '', CHAT_DEV_PORT: String(await freePort()), SOLANA_DEV_PORT: String(await freePort()) };
    const start = () => new Promise<{ child: ReturnType<typeof spawn>; output: () => string }>((resolve, reject) => {
      const child = spawn('node', [CLI, 'dev'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      const timer = setTimeout(() => reject(new Error(`dev did not start: ${output}`)), 60_000);
      const onData = (d: Buffer) => { output += d.toString(); if (output.includes('sign up an agent')) { clearTimeout(timer); resolve({ child, output: () => output }); } };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
    });
    try {
      const first = await start();
      const signup = await fetch(`http://127.0.0.1:${port}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }).then((r) => r.json()) as any;
      await new Promise<void>((resolve) => { first.child.once('exit', () => resolve()); first.child.kill('SIGKILL'); });
      // Its database and chain are still running, orphaned, holding the data and the lock file.
      const second = await start();
      expect(second.output()).toContain('left running by an earlier run that was killed');
      const me = await fetch(`http://127.0.0.1:${port}/v0/whoami`, { headers: { authorization: `Bearer ${signup.platform_key}` } });
      expect(me.status).toBe(200);
      await new Promise<void>((resolve) => { second.child.once('exit', () => resolve()); second.child.kill('SIGTERM'); });
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('agentgate rotate-master-key', () => {
  it('re-wraps live secrets so the server runs on the new key alone', async () => {
    const oldKey = server.config.MASTER_KEY.toString('hex');
    const newKey = randomBytes(32).toString('hex');
    const signup = await server.request('POST', '/v0/agent-signup', { body: {} });
    const key = signup.body.identity.rawKey;
    expect((await server.request('PUT', '/v0/vault/github', { key, body: { type: 'LOGIN', data: { username: 'bot', password: 'hunter2' } } })).status).toBeLessThan(300);
    const env = {
      AGENTGATE_MODE: 'dev', BASE_URL: server.config.BASE_URL, MAIL_DOMAIN: server.config.MAIL_DOMAIN, DID_DOMAIN: server.config.DID_DOMAIN,
      MONGODB_URI: server.config.MONGODB_URI, MONGODB_DB: server.config.MONGODB_DB,
      MASTER_KEY: newKey, MASTER_KEY_VERSION: '2', MASTER_KEYS_PREVIOUS: `1:${oldKey}`,
    };
    const rotated = await cli(['rotate-master-key'], env);
    expect(rotated.stdout).toContain('older keys can be retired');
    expect(rotated.code).toBe(0);
    const report = JSON.parse(rotated.stdout.slice(0, rotated.stdout.lastIndexOf('}') + 1));
    expect(report.rewrapped).toBeGreaterThanOrEqual(1);
    expect(report.remaining).toBe(0);

    const onNewKey = await startTestServer({ MONGODB_DB: server.config.MONGODB_DB, MASTER_KEY: newKey, MASTER_KEY_VERSION: '2' });
    try {
      const item = await onNewKey.request('GET', '/v0/vault/github', { key });
      expect(item.status).toBe(200);
      expect(item.body.data).toEqual({ username: 'bot', password: 'hunter2' });
    } finally {
      await onNewKey.http.close();
      await onNewKey.app.close();
    }
  });
});
