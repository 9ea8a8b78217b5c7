/**
 * FerretDB is a Go program with no npm package, so it is built once from the Go module proxy into a cached
 * bin folder (`~/.cache/agentgate/bin`, or AGENTGATE_BIN_DIR) and reused by every later start.
 */
import { execFile } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const FERRETDB_VERSION = 'v1.24.2';
const FERRETDB_MODULE = 'github.com/FerretDB/FerretDB';
const PROGRESS_EVERY_MS = 15_000;

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
  await go(['version'], { env }); // no Go: say so before announcing a build
  log(`building FerretDB ${FERRETDB_VERSION} with Go into ${ferretdbBinDir(env)} (one time, a minute or two)...`);
  const started = Date.now();
  const ticker = setInterval(() => log(`  still building FerretDB (${Math.round((Date.now() - started) / 1000)} s)`), PROGRESS_EVERY_MS);
  ticker.unref();
  const src = join(tmpdir(), `agentgate-ferretdb-src-${process.pid}`);
  try {
    const { stdout } = await go(['mod', 'download', '-json', `${FERRETDB_MODULE}@${FERRETDB_VERSION}`], { env });
    const moduleDir = (JSON.parse(stdout) as { Dir: string }).Dir;
    rmSync(src, { recursive: true, force: true });
    cpSync(moduleDir, src, { recursive: true });
    chmodRecursive(src); // the module cache is read-only
    writeFileSync(join(src, 'build', 'version', 'version.txt'), `${FERRETDB_VERSION}\n`);
    mkdirSync(ferretdbBinDir(env), { recursive: true });
    const partial = `${target}.${process.pid}.partial`;
    await go(['build', '-trimpath', '-o', partial, './cmd/ferretdb'], { cwd: src, env });
    // rename is atomic: two processes building at once both end with a complete binary.
    renameSync(partial, target);
  } finally {
    clearInterval(ticker);
    rmSync(src, { recursive: true, force: true });
  }
  log(`built FerretDB ${FERRETDB_VERSION} in ${Math.round((Date.now() - started) / 1000)} s`);
  return target;
}

async function go(args: string[], options: { cwd?: string; env: NodeJS.ProcessEnv }): Promise<{ stdout: string }> {
  try {
    return await run('go', args, { ...options, maxBuffer: 16 << 20 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Error(`FerretDB ${FERRETDB_VERSION}, our dev and test database, is built from source on first use: install Go (or set MONGODB_URI)`);
    }
    throw err;
  }
}

function chmodRecursive(dir: string): void {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) chmodRecursive(p);
    else chmodSync(p, 0o644);
  }
}
