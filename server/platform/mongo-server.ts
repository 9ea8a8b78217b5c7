// Provides a real MongoDB-wire server for `agentgate dev` and for the test suite, in this order:
//   1. MONGODB_URI when set (production, CI with a real MongoDB, Atlas);
//   2. FerretDB 1.x on PostgreSQL (postgres-server.ts), FerretDB built from the Go module proxy into a
//      cached bin directory. FerretDB's SQLite backend is used only where the PostgreSQL binaries do not
//      exist (they ship for linux-x64): it pushes no filter but `{_id}` down, so it is 5-100x slower;
//   3. mongodb-memory-server's real mongod, where its binary can be downloaded.
// Nothing here fakes MongoDB in-process: every option speaks the wire protocol.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdirSync, cpSync, chmodSync, writeFileSync, rmSync, readdirSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitForTcp } from './net.js';
import { postgresAvailable, startPostgres } from './postgres-server.js';
import { stopOrphansMatching } from './orphans.js';

const run = promisify(execFile);
export const FERRETDB_VERSION = 'v1.24.2';
const FERRETDB_MODULE = 'github.com/FerretDB/FerretDB';

export interface MongoServer {
  uri: string;
  kind: 'external' | 'ferretdb' | 'mongodb-memory-server';
  /** Which engine holds the data, for the start-up line ("FerretDB on PostgreSQL", ...). */
  engine: string;
  stop(): Promise<void>;
  /** Resolves with a reason when a process of the database ends, whoever ended it (dev watches it). */
  exited?: Promise<string>;
}

export interface MongoServerOptions {
  /** Directory for the database files. Kept across restarts when given; a temporary one otherwise. */
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
  log?: (line: string) => void;
}

export function ferretdbBinDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.AGENTGATE_BIN_DIR ?? join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'agentgate', 'bin');
}

export function ferretdbBinaryPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(ferretdbBinDir(env), `ferretdb-${FERRETDB_VERSION}`);
}

/**
 * Builds FerretDB from source with the Go toolchain. `go install ferretdb@v1.24.2` would be the obvious
 * command, but it asks the proxy for the module's version list (deprecation check), which some proxies
 * refuse; `go mod download` of the exact version plus `go build` needs only the version's own files.
 * FerretDB's build also expects build/version/version.txt, which the module zip does not carry.
 */
export async function installFerretdb(env: NodeJS.ProcessEnv = process.env, log: (l: string) => void = () => {}): Promise<string> {
  const target = ferretdbBinaryPath(env);
  if (existsSync(target)) return target;
  log(`building FerretDB ${FERRETDB_VERSION} with Go (one time, about a minute)...`);
  const { stdout } = await run('go', ['mod', 'download', '-json', `${FERRETDB_MODULE}@${FERRETDB_VERSION}`], { env, maxBuffer: 1 << 20 });
  const moduleDir = (JSON.parse(stdout) as { Dir: string }).Dir;
  const src = join(tmpdir(), `agentgate-ferretdb-src-${process.pid}`);
  rmSync(src, { recursive: true, force: true });
  cpSync(moduleDir, src, { recursive: true });
  chmodRecursive(src);
  writeFileSync(join(src, 'build', 'version', 'version.txt'), `${FERRETDB_VERSION}\n`);
  mkdirSync(ferretdbBinDir(env), { recursive: true });
  const partial = `${target}.${process.pid}.partial`;
  await run('go', ['build', '-trimpath', '-o', partial, './cmd/ferretdb'], { cwd: src, env, maxBuffer: 16 << 20 });
  // rename is atomic: two processes building at once both end with a complete binary.
  const { renameSync } = await import('node:fs');
  renameSync(partial, target);
  rmSync(src, { recursive: true, force: true });
  return target;
}

function chmodRecursive(dir: string): void {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) chmodRecursive(p);
    else chmodSync(p, 0o644);
  }
}

type Backend = { handler: 'postgresql'; url: string } | { handler: 'sqlite' };

/**
 * FerretDB spends much of its CPU in Go's garbage collector (it converts every document it reads). Its live
 * heap is small, so collecting only near a memory ceiling, not at every doubling, measured +70% on mail
 * pages under load (bench/api.ts: 48 -> 82 req/s). GOGC / GOMEMLIMIT in the environment still win.
 */
const FERRETDB_GC = { GOGC: 'off', GOMEMLIMIT: '768MiB' };

async function startFerretdb(binary: string, dataDir: string, backend: Backend, log: (l: string) => void): Promise<MongoServer> {
  mkdirSync(dataDir, { recursive: true });
  await stopOrphansMatching(['ferretdb', `--state-dir=${dataDir} `], log);
  const port = await freePort();
  const child: ChildProcess = spawn(binary, [
    `--handler=${backend.handler}`,
    // The PostgreSQL URL carries a password: it goes in the environment, not on the command line.
    ...(backend.handler === 'postgresql' ? [] : [`--sqlite-url=file:${dataDir}/`]),
    `--state-dir=${dataDir}`,
    `--listen-addr=127.0.0.1:${port}`,
    '--debug-addr=127.0.0.1:0',
    '--telemetry=disable',
    '--log-level=error',
  ], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...FERRETDB_GC, ...process.env, ...(backend.handler === 'postgresql' ? { FERRETDB_POSTGRESQL_URL: backend.url } : {}) } });
  // Never outlive the process that started it, however that process ends (short of SIGKILL).
  const killOnExit = () => { if (child.exitCode === null) child.kill('SIGKILL'); };
  process.once('exit', killOnExit);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => { stderr += d.toString(); });
  const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(signal ? `killed by ${signal}` : `exit code ${code}`)));
  try {
    await waitForTcp('127.0.0.1', port, 20_000, () => child.exitCode !== null);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`FerretDB did not start: ${stderr.trim() || (err as Error).message}`);
  }
  const engine = backend.handler === 'postgresql' ? 'FerretDB on PostgreSQL' : 'FerretDB on SQLite';
  log(`${engine} (FerretDB ${FERRETDB_VERSION}) on 127.0.0.1:${port}`);
  return {
    uri: `mongodb://127.0.0.1:${port}/`,
    kind: 'ferretdb',
    engine,
    exited,
    async stop() {
      process.off('exit', killOnExit);
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

async function startMemoryServer(dataDir: string | undefined): Promise<MongoServer> {
  const { MongoMemoryServer } = await import('mongodb-memory-server-core');
  const server = await MongoMemoryServer.create(dataDir ? { instance: { dbPath: dataDir, storageEngine: 'wiredTiger' } } : {});
  return { uri: server.getUri(), kind: 'mongodb-memory-server', engine: 'mongod (mongodb-memory-server)', stop: async () => { await server.stop(); } };
}

export async function provideMongoServer(options: MongoServerOptions = {}): Promise<MongoServer> {
  const env = options.env ?? process.env;
  const log = options.log ?? (() => {});
  if (env.MONGODB_URI) {
    return { uri: env.MONGODB_URI, kind: 'external', engine: 'MongoDB at MONGODB_URI', stop: async () => {} };
  }
  const temporary = !options.dataDir;
  const dataDir = options.dataDir ?? join(tmpdir(), `agentgate-db-${process.pid}-${Date.now()}`);
  const cleanup = async (server: MongoServer): Promise<MongoServer> => ({
    ...server,
    async stop() {
      await server.stop();
      if (temporary) rmSync(dataDir, { recursive: true, force: true });
    },
  });
  let ferretError: Error | undefined;
  try {
    const binary = await installFerretdb(env, log);
    if (!postgresAvailable()) return await cleanup(await startFerretdb(binary, join(dataDir, 'ferretdb'), { handler: 'sqlite' }, log));
    const postgres = await startPostgres(join(dataDir, 'postgres'), { durable: !temporary, log });
    try {
      const ferret = await startFerretdb(binary, join(dataDir, 'ferretdb-state'), { handler: 'postgresql', url: postgres.url }, log);
      return await cleanup({
        ...ferret,
        exited: Promise.race([ferret.exited!, postgres.exited.then((reason) => `PostgreSQL: ${reason}`)]),
        async stop() { await ferret.stop(); await postgres.stop(); },
      });
    } catch (err) {
      await postgres.stop();
      throw err;
    }
  } catch (err) {
    ferretError = err as Error;
    log(`FerretDB unavailable (${ferretError.message.split('\n')[0]}); trying mongodb-memory-server`);
  }
  try {
    return await cleanup(await startMemoryServer(options.dataDir ? join(dataDir, 'mongod') : undefined));
  } catch (err) {
    throw new Error(`no MongoDB-wire server available: set MONGODB_URI. FerretDB: ${ferretError?.message}; mongod: ${(err as Error).message}`);
  }
}
