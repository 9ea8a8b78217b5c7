// `agentgate dev` as a user starts it: the checkout's command as its own process, on a fresh state folder
// and free ports, waited for until it says how to sign up. For the tests of what a newcomer gets.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DevSellerFile } from '../../server/dev/dev-seller.js';
import { freePort } from '../../server/platform/net.js';

export interface DevProcess {
  /** Its state folder (AGENTGATE_STATE_DIR). */
  state: string;
  /** The dev seller it made (.agentgate/dev-seller.json). */
  seller: DevSellerFile;
  /** Everything it printed until it was ready. */
  output: string;
  stop(): Promise<void>;
}

export async function startDevProcess(name: string): Promise<DevProcess> {
  const state = mkdtempSync(join(tmpdir(), `agentgate-dev-${name}-`));
  chmodSync(state, 0o755); // as root, PostgreSQL runs as nobody, who must reach its data in here
  const env = { ...process.env, AGENTGATE_STATE_DIR: state, PORT: String(await freePort()), SMTP_PORT: '0', MONGODB_URI: '', CHAT_DEV_PORT: String(await freePort()), SOLANA_DEV_PORT: String(await freePort()), AGENTGATE_QUIET: '1' };
  const dev: ChildProcess = spawn(process.execPath, ['bin/agentgate.js', 'dev'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`agentgate dev did not start: ${output}`)), 150_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      if (output.includes('sign up an agent')) { clearTimeout(timer); resolve(); }
    };
    dev.stdout!.on('data', onData);
    dev.stderr!.on('data', onData);
    dev.once('exit', (code) => { clearTimeout(timer); reject(new Error(`agentgate dev exited with ${code}: ${output}`)); });
  });
  return {
    state,
    seller: JSON.parse(readFileSync(join(state, 'dev-seller.json'), 'utf8')) as DevSellerFile,
    output,
    async stop() {
      if (dev.exitCode === null) {
        const exited = once(dev, 'exit');
        dev.kill('SIGTERM');
        await exited;
      }
      rmSync(state, { recursive: true, force: true });
    },
  };
}
