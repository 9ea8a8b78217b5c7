// The embedded dev database (FerretDB on our own PostgreSQL): a crash that left PostgreSQL's lock file
// behind must not block the next start nor lose a write, and nobody gets into PostgreSQL without its
// password. (Restarting after `agentgate dev` itself was SIGKILLed: test/cli/cli.test.ts.)
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { provideMongoServer } from '../../server/dev/database/mongo-server.js';
import { installFerretdb } from '../../server/dev/database/ferretdb-build.js';
import { startFerretdb } from '../../server/dev/database/ferretdb-server.js';
import { startPostgres } from '../../server/dev/database/postgres-server.js';
import { postgresRunAsUser } from '../../server/dev/database/unprivileged-user.js';

const RUNNER = join(process.cwd(), 'test', 'support', 'database-process.ts');
const noMongoUri = { ...process.env, MONGODB_URI: '' };
let stateDir: string;
const started: ChildProcess[] = [];

beforeEach(() => {
  stateDir = mkdtempSync(join(tmpdir(), 'agentgate-embedded-db-'));
  chmodSync(stateDir, 0o711); // as `agentgate dev` keeps .agentgate: PostgreSQL may run as nobody
});
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(stateDir, { recursive: true, force: true });
});

/** Starts the database in a separate Node process, which the test can then kill. */
async function runInChild(dataDir: string): Promise<{ child: ChildProcess; uri: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', RUNNER, dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(child);
  let output = '';
  const uri = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      output += d.toString();
      const ready = /ready (\S+)/.exec(output);
      if (ready) resolve(ready[1]!);
    });
    child.stderr!.on('data', (d: Buffer) => { output += d.toString(); });
    child.once('exit', (code) => reject(new Error(`database process exited (${code}): ${output}`)));
  });
  return { child, uri };
}

const killed = (child: ChildProcess) => new Promise<void>((resolve) => {
  child.once('exit', () => resolve());
  child.kill('SIGKILL');
});

describe('the embedded database', () => {
  it('starts again when PostgreSQL was killed and its postmaster.pid names a pid now used by another process', async () => {
    const dataDir = join(stateDir, 'db');
    const first = await runInChild(dataDir);
    const client = await MongoClient.connect(first.uri);
    await client.db('crash').collection('notes').insertOne({ note: 'before the crash' });
    await client.close();
    // PostgreSQL killed outright, then its parent: nothing removes postmaster.pid.
    const lockFile = join(dataDir, 'postgres', 'postmaster.pid');
    const [postgresPid, ...rest] = readFileSync(lockFile, 'utf8').split('\n');
    process.kill(Number(postgresPid), 'SIGKILL');
    await killed(first.child);
    // After a reboot that pid may belong to anything. PostgreSQL refuses to start while it belongs to a
    // live process of its own user, so let one of those hold it.
    const user = postgresRunAsUser();
    const other = spawn('sleep', ['60'], { ...(user ? { uid: user.uid, gid: user.gid } : {}), stdio: 'ignore' });
    started.push(other);
    writeFileSync(lockFile, [String(other.pid), ...rest].join('\n'));

    const second = await provideMongoServer({ dataDir, env: noMongoUri });
    try {
      const again = await MongoClient.connect(second.uri);
      const notes = await again.db('crash').collection('notes').find().toArray();
      await again.close();
      expect(notes.map((n) => n.note)).toEqual(['before the crash']);
    } finally {
      await second.stop();
    }
  });

  it('lets FerretDB in with the password and refuses it without', async () => {
    const postgres = await startPostgres(join(stateDir, 'postgres'), { durable: false, log: () => {} });
    const binary = await installFerretdb();
    const withPassword = await startFerretdb({ binary, postgresUrl: postgres.url, stateDir: join(stateDir, 'ferretdb-a'), log: () => {} });
    const url = new URL(postgres.url);
    url.password = 'not-the-password';
    const withoutPassword = await startFerretdb({ binary, postgresUrl: url.href, stateDir: join(stateDir, 'ferretdb-b'), log: () => {} });
    const good = await MongoClient.connect(withPassword.uri);
    const bad = await MongoClient.connect(withoutPassword.uri, { serverSelectionTimeoutMS: 5000 });
    try {
      await good.db('auth').collection('notes').insertOne({ note: 'in' });
      await expect(bad.db('auth').collection('notes').insertOne({ note: 'in' })).rejects.toThrow(/password authentication failed/);
    } finally {
      await Promise.all([good.close(), bad.close()]);
      await Promise.all([withPassword.stop(), withoutPassword.stop()]);
      await postgres.stop();
    }
  });
});
