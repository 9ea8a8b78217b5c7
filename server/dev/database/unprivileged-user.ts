import { chownSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * PostgreSQL refuses to run as root (initdb and postgres both stop with "cannot be run as root"), and CI
 * and containers run us as root. There it runs as `nobody`: present on every Unix, and nothing on the
 * machine has to be created for it.
 */
export interface OsUser { name: string; uid: number; gid: number }

/** The user PostgreSQL must run as, or undefined when we are not root and it runs as us. */
export function postgresRunAsUser(): OsUser | undefined {
  if (process.getuid?.() !== 0) return undefined;
  return passwdEntry('nobody') ?? { name: 'nobody', uid: 65534, gid: 65534 };
}

function passwdEntry(name: string): OsUser | undefined {
  try {
    const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith(`${name}:`));
    const [, , uid, gid] = line?.split(':') ?? [];
    return uid && gid ? { name, uid: Number(uid), gid: Number(gid) } : undefined;
  } catch {
    return undefined;
  }
}

/** Gives `path` and everything below it to `user`. */
export function chownTree(path: string, user: OsUser): void {
  chownSync(path, user.uid, user.gid);
  if (!statSync(path).isDirectory()) return;
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    if (!entry.isSymbolicLink()) chownTree(join(path, entry.name), user);
  }
}

/** The first folder above `path` that other users may not enter, if any. */
export function closedFolderAbove(path: string): string | undefined {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    try {
      if (!(statSync(dir).mode & 0o001)) return dir;
    } catch {
      // not created yet: its parent decides
    }
    if (dirname(dir) === dir) return undefined;
  }
}
