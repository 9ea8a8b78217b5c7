/**
 * FerretDB 1.x speaking the MongoDB wire protocol on a free loopback port, storing into our PostgreSQL
 * (its `postgresql` handler). Stopped with SIGTERM, its graceful shutdown.
 */
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { freePort } from '../../platform/net.js';
import { stopOrphansMatching } from '../orphans.js';
import { superviseListening } from '../child-processes.js';

const START_TIMEOUT_MS = 20_000;
const STOP_GRACE_MS = 10_000;

/**
 * FerretDB spends much of its CPU in Go's garbage collector (it converts every document it reads). Its live
 * heap is small, so collecting only near a memory ceiling, not at every doubling, measured +70% on mail
 * pages under load (bench/api.ts: 48 -> 82 req/s). GOGC / GOMEMLIMIT in the environment still win.
 */
const FERRETDB_GC = { GOGC: 'off', GOMEMLIMIT: '768MiB' };

export interface FerretdbServer {
  uri: string;
  stop(): Promise<void>;
  exited: Promise<string>;
}

export async function startFerretdb(options: { binary: string; postgresUrl: string; stateDir: string; avoidPorts?: number[]; log: (line: string) => void }): Promise<FerretdbServer> {
  mkdirSync(options.stateDir, { recursive: true });
  await stopOrphansMatching(['ferretdb', `--state-dir=${options.stateDir} `], options.log);
  const port = await freePort(options.avoidPorts);
  const child = spawn(options.binary, [
    '--handler=postgresql',
    `--state-dir=${options.stateDir}`,
    `--listen-addr=127.0.0.1:${port}`,
    '--debug-addr=-', // no metrics listener
    '--telemetry=disable',
    '--log-level=error',
  ], {
    // The URL holds the password: by environment, which other users cannot read (a command line they can).
    env: { ...FERRETDB_GC, ...process.env, FERRETDB_POSTGRESQL_URL: withPool(options.postgresUrl) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const running = await superviseListening(child, { name: 'FerretDB', port, timeoutMs: START_TIMEOUT_MS, stopSignal: 'SIGTERM', stopGraceMs: STOP_GRACE_MS });
  return { uri: `mongodb://127.0.0.1:${port}/`, ...running };
}

/**
 * FerretDB 1.24 stops answering for good once more statements of multi-statement updates are under way
 * than its PostgreSQL pool holds (about 50 by default; platform/group-commit.ts). Our PostgreSQL allows
 * 200 connections: 150 for FerretDB's pool leaves room for the rest and triples the margin.
 */
function withPool(postgresUrl: string): string {
  const url = new URL(postgresUrl);
  url.searchParams.set('pool_max_conns', '150');
  return url.href;
}
