import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { Config } from '../../server/platform/config.js';

const CLI = join(process.cwd(), 'bin', 'agentgate.js');

/**
 * The settings of `config` an `agentgate serve|worker` process needs to share its database, key and
 * timings; it runs in the mode of the deployment it joins.
 */
export function processEnv(config: Config, extra: Record<string, string> = {}): Record<string, string> {
  return {
    AGENTGATE_MODE: config.mode, HOST: '127.0.0.1', PORT: '0', SMTP_PORT: '0', BASE_URL: config.BASE_URL, MAIL_DOMAIN: config.MAIL_DOMAIN, DID_DOMAIN: config.DID_DOMAIN,
    MASTER_KEY: config.MASTER_KEY.toString('hex'), MONGODB_URI: config.MONGODB_URI, MONGODB_DB: config.MONGODB_DB,
    // The start line is an info line of the JSON log.
    TRUST_PROXY: String(config.TRUST_PROXY), LOG_LEVEL: 'info',
    AUTH_CACHE_TTL_MS: String(config.AUTH_CACHE_TTL_MS), CHANGE_FEED_POLL_MS: String(config.CHANGE_FEED_POLL_MS),
    JOBS_PROCESS_EVERY_MS: String(config.JOBS_PROCESS_EVERY_MS), WEBHOOK_TIMEOUT_MS: String(config.WEBHOOK_TIMEOUT_MS),
    WEBHOOK_RETRY_BASE_MS: String(config.WEBHOOK_RETRY_BASE_MS), WEBHOOK_OUTBOX_SWEEP_MS: String(config.WEBHOOK_OUTBOX_SWEEP_MS), WEBHOOK_CONCURRENCY: String(config.WEBHOOK_CONCURRENCY),
    ...extra,
  };
}

export interface AgentgateProcess {
  child: ChildProcess;
  /** `serve`: where it listens. */
  url: string | undefined;
  /** Everything it printed so far (for failure messages). */
  output(): string;
  /** SIGTERM and wait for the exit (a graceful stop). */
  stop(): Promise<void>;
  /** SIGKILL and wait for the exit: no shutdown code runs, as when a machine dies. */
  kill(): Promise<void>;
}

/** Starts `bin/agentgate.js serve|worker` as a real OS process and waits until it says it is running. */
export async function spawnAgentgate(command: 'serve' | 'worker', env: Record<string, string>): Promise<AgentgateProcess> {
  const child = spawn(process.execPath, [CLI, command], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string | undefined>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`agentgate ${command} did not start: ${output}`)), 60_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const listening = /"url":"([^"]+)"[^\n]*"msg":"listening"/.exec(output);
      if (listening || output.includes('"msg":"worker running"')) {
        clearTimeout(timer);
        resolve(listening?.[1]);
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.once('exit', (code, signal) => { clearTimeout(timer); reject(new Error(`agentgate ${command} exited with ${code ?? signal}: ${output}`)); });
  });
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  return { child, url, output: () => output, stop: () => end('SIGTERM'), kill: () => end('SIGKILL') };
}
