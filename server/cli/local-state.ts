import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';

/**
 * The git-ignored `.agentgate/` folder of `agentgate dev`: the generated master key, the embedded
 * database's files and the dev chain's state live here, so a restart loses nothing.
 */
export function devStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = resolve(env.AGENTGATE_STATE_DIR ?? '.agentgate');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // As root, the embedded PostgreSQL runs as nobody and must pass through this folder to its data in
  // db/: others may traverse it but not list it, and every secret in it is a 0600 file.
  if (process.getuid?.() === 0) chmodSync(dir, 0o711);
  return dir;
}

/** A secret generated once and kept in the state folder (0600). Returns whether it was just created. */
export function persistentSecret(dir: string, name: string, bytes = 32): { value: string; created: boolean } {
  const file = join(dir, name);
  if (existsSync(file)) return { value: readFileSync(file, 'utf8').trim(), created: false };
  const value = randomBytes(bytes).toString('hex');
  writeFileSync(file, `${value}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return { value, created: true };
}

/** A setting kept in the state folder (e.g. the DID domain), or undefined before it was first saved. */
export function savedValue(dir: string, name: string): string | undefined {
  const file = join(dir, name);
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined;
}

/** Keeps a setting in the state folder; the caller saves it only once it is known to work. */
export function saveValue(dir: string, name: string, value: string): void {
  writeFileSync(join(dir, name), `${value}\n`, { mode: 0o600 });
}

export function readJson<T>(file: string): T | undefined {
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, 'utf8')) as T;
}

export function writeJson(file: string, value: unknown, mode = 0o600): void {
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`, { mode });
  chmodSync(file, mode);
}
