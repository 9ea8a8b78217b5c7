import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadCredentials, type SavedCredentials } from './credentials.js';
import { readJson } from './local-state.js';

/** What a running `agentgate dev` writes into its state folder, so other commands find it and a second one stops. */
export const DEV_SERVER_FILE = 'dev-server.json';
export interface DevServerRecord { pid: number; url: string; startedAt: string }

/** A dev server recorded in this state folder whose process still runs. */
export function runningDevServer(env: NodeJS.ProcessEnv): DevServerRecord | undefined {
  const record = readJson<DevServerRecord>(join(resolve(env.AGENTGATE_STATE_DIR ?? '.agentgate'), DEV_SERVER_FILE));
  if (!record || !Number.isInteger(record.pid)) return undefined;
  try {
    process.kill(record.pid, 0);
  } catch (err) {
    // EPERM: it runs, under another user.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return undefined;
  }
  // After a crash the pid may belong to another program by now: on Linux, check it is ours.
  try {
    if (!readFileSync(`/proc/${record.pid}/cmdline`, 'utf8').includes('agentgate')) return undefined;
  } catch {
    // No /proc (macOS): the pid check above is all there is.
  }
  return record;
}

/**
 * The backend a command talks to, for every command alike: --url, AGENTGATE_URL, the saved credentials'
 * URL, a running `agentgate dev` of this folder, else http://localhost:3000.
 */
export function backendUrl(env: NodeJS.ProcessEnv, explicit?: string): string {
  const url = explicit ?? env.AGENTGATE_URL ?? loadCredentials(env)?.url ?? runningDevServer(env)?.url ?? 'http://localhost:3000';
  return url.replace(/\/+$/, '');
}

export class BackendUnreachable extends Error {}

/** fetch, with "could not reach" naming the URL and what to start, instead of a bare `fetch failed`. */
export async function callBackend(url: string, init?: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
    throw new BackendUnreachable(`could not reach the agentgate backend at ${new URL(url).origin} (${cause}): start one with \`agentgate dev\` (in a checkout: \`npm run dev\`), or point at yours with --url or AGENTGATE_URL`);
  }
}

/**
 * The key a command sends to `url`: --key, AGENTGATE_KEY, else the saved one (`pick` chooses which) — the
 * saved key only to the backend it was saved for, so pointing a command elsewhere never hands it over.
 * Returns the reason when there is none.
 */
export function commandKey(
  env: NodeJS.ProcessEnv, url: string, explicit: string | undefined, pick: (saved: SavedCredentials) => string | undefined,
): { key: string } | { missing: string } {
  const given = explicit ?? env.AGENTGATE_KEY;
  if (given) return { key: given };
  const saved = loadCredentials(env);
  const savedKey = saved ? pick(saved) : undefined;
  if (saved && savedKey && saved.url.replace(/\/+$/, '') === url) return { key: savedKey };
  if (saved && savedKey) return { missing: `the saved credentials are for ${saved.url}, not ${url}: pass --key or set AGENTGATE_KEY, or run \`agentgate login --url ${url}\`` };
  return { missing: 'no key: pass --key, set AGENTGATE_KEY, or run `agentgate signup` (or `agentgate login --key <identity key> --org <org id>`)' };
}
