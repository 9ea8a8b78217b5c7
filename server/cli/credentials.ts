import { existsSync, mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/** What `agentgate signup` and `agentgate login` save, readable only by the user (0600). */
export interface SavedCredentials {
  url: string;
  orgId?: string;
  platformKey?: string;
  identityKey?: string;
  identityId?: string;
  email?: string;
}

export function credentialsPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.AGENTGATE_CREDENTIALS ?? join(env.XDG_CONFIG_HOME ?? join(homedir(), '.config'), 'agentgate', 'credentials.json');
}

export function loadCredentials(env: NodeJS.ProcessEnv = process.env): SavedCredentials | undefined {
  const file = credentialsPath(env);
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as SavedCredentials;
  } catch {
    return undefined;
  }
}

export function saveCredentials(credentials: SavedCredentials, env: NodeJS.ProcessEnv = process.env): string {
  const file = credentialsPath(env);
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return file;
}

/** Keeps credentials about to be replaced next to the file, as credentials.<orgId>.json (0600). */
export function saveCredentialsAside(credentials: SavedCredentials, env: NodeJS.ProcessEnv = process.env): string {
  const file = credentialsPath(env).replace(/\.json$/, '') + `.${(credentials.orgId ?? 'previous').replace(/[^A-Za-z0-9_-]/g, '_')}.json`;
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return file;
}
