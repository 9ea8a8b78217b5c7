// Provides a real MongoDB-wire server for `agentgate dev`, the test suite and the benchmarks:
//   - MONGODB_URI when set (production, CI with a real MongoDB, Atlas);
//   - else FerretDB 1.24 on a PostgreSQL of our own, both on free ports of 127.0.0.1: PostgreSQL's
//     binaries from npm (postgres-*.ts beside this file), FerretDB built once with Go (ferretdb-*.ts).
// One engine, no fallbacks: where it cannot start, the error says what to install or to set MONGODB_URI.
// Nothing here fakes MongoDB in-process: both options speak the wire protocol.
import { mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { FERRETDB_VERSION, installFerretdb } from './ferretdb-build.js';
import { startFerretdb } from './ferretdb-server.js';
import { startPostgres } from './postgres-server.js';

export interface MongoServer {
  uri: string;
  kind: 'external' | 'ferretdb';
  /** Which engine holds the data, for start-up lines: "FerretDB v1.24.2 on PostgreSQL 18.4", ... */
  engine: string;
  stop(): Promise<void>;
  /** Resolves with a reason when a process of the database ends, whoever ended it (dev watches it). */
  exited?: Promise<string>;
  /**
   * The embedded engine only, for tests of what a database outage does: stops PostgreSQL (FerretDB stays up
   * and answers every command with an error meanwhile), waits `downMs`, and starts it again on the same
   * port and data.
   */
  restartBackend?(downMs: number): Promise<void>;
}

export interface MongoServerOptions {
  /** Directory for the database files. Kept across restarts when given; a temporary one otherwise. */
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
  /** Ports promised to servers that bind after the database has started (agentgate dev's own): never taken. */
  avoidPorts?: number[];
  log?: (line: string) => void;
}

export async function provideMongoServer(options: MongoServerOptions = {}): Promise<MongoServer> {
  const env = options.env ?? process.env;
  const log = options.log ?? (() => {});
  if (env.MONGODB_URI) {
    return { uri: env.MONGODB_URI, kind: 'external', engine: 'MongoDB at MONGODB_URI', stop: async () => {} };
  }
  const temporary = !options.dataDir;
  const dataDir = resolve(options.dataDir ?? join(tmpdir(), `agentgate-db-${process.pid}-${Date.now()}`));
  mkdirSync(dataDir, { recursive: true });
  const removeTemporary = () => { if (temporary) rmSync(dataDir, { recursive: true, force: true }); };
  const avoidPorts = options.avoidPorts ?? [];

  // A first start on a machine builds FerretDB and initialises PostgreSQL: both at once.
  const [binary, postgres] = await Promise.allSettled([
    installFerretdb(env, log),
    startPostgres(join(dataDir, 'postgres'), { durable: !temporary, avoidPorts, log }),
  ]);
  if (binary.status === 'rejected' || postgres.status === 'rejected') {
    if (postgres.status === 'fulfilled') await postgres.value.stop();
    removeTemporary();
    throw binary.status === 'rejected' ? binary.reason : (postgres as PromiseRejectedResult).reason;
  }
  const engine = `FerretDB ${FERRETDB_VERSION} on PostgreSQL ${postgres.value.version}`;
  let ferretdb;
  try {
    // Not "ferretdb": agentgate versions before PostgreSQL kept FerretDB's SQLite files there.
    ferretdb = await startFerretdb({ binary: binary.value, postgresUrl: postgres.value.url, stateDir: join(dataDir, 'ferretdb-state'), avoidPorts, log });
  } catch (err) {
    await postgres.value.stop();
    removeTemporary();
    throw err;
  }
  log(`${engine} on ${ferretdb.uri} (data in ${postgres.value.dataDir})`);
  let backend = postgres.value;
  return {
    uri: ferretdb.uri,
    kind: 'ferretdb',
    engine,
    exited: Promise.race([ferretdb.exited, postgres.value.exited.then((reason) => `PostgreSQL: ${reason}`)]),
    async stop() {
      await ferretdb.stop();
      await backend.stop();
      removeTemporary();
    },
    async restartBackend(downMs: number) {
      await backend.stop();
      await new Promise((resolve) => setTimeout(resolve, downMs));
      backend = await startPostgres(join(dataDir, 'postgres'), { durable: !temporary, port: backend.port, log });
    },
  };
}
