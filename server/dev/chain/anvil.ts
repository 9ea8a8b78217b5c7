/**
 * Starts and stops a local anvil node (from the `@foundry-rs/anvil` npm package) for `agentgate dev`
 * and the tests. The node listens on 127.0.0.1 only, uses the default test mnemonic (see
 * dev-accounts.ts) and, by default, lets anvil pick a free port (`--port 0`) and reads the real port from
 * its "Listening on" line, so parallel test workers never race for a port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { DEV_MNEMONIC } from './dev-accounts.js';
import { stopOrphansMatching } from '../orphans.js';
import { exitReason, killOnOurExit, stopChild } from '../child-processes.js';

export interface StartAnvilOptions {
  /** TCP port on 127.0.0.1. Default 0: anvil picks a free one. */
  port?: number;
  /** Default 31337. */
  chainId?: number;
  /** Seconds between blocks. Default: none (a block is mined per transaction). */
  blockTime?: number;
  /** anvil `--state <path>`: loads chain state from the file at start (if present) and dumps it on stop. */
  stateFile?: string;
  /** How long to wait for the node to answer `eth_chainId`. Default 20 s. */
  startTimeoutMs?: number;
  log?: (line: string) => void;
}

export interface AnvilNode {
  rpcUrl: string;
  chainId: number;
  port: number;
  /** Terminates the node (SIGTERM, which also dumps `stateFile`) and resolves once it has exited. */
  stop(): Promise<void>;
  /** Resolves when the process ends, after stop() or on its own (a crash, an OOM kill): dev watches it. */
  exited: Promise<string>;
}

export const DEFAULT_CHAIN_ID = 31337;
const OUTPUT_TAIL_CHARS = 4000;
const STOP_GRACE_MS = 5000;

/** Spawns anvil and resolves once its JSON-RPC endpoint answers `eth_chainId` with the expected id. */
export async function startAnvil(options: StartAnvilOptions = {}): Promise<AnvilNode> {
  const chainId = options.chainId ?? DEFAULT_CHAIN_ID;
  // A node of a killed earlier run on the same state file would hold it and never dump it again.
  if (options.stateFile) await stopOrphansMatching(['anvil', `--state ${options.stateFile}`], options.log ?? (() => {}));
  const child = spawn(anvilBinaryPath(), anvilArgs({ ...options, chainId }), {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const forget = killOnOurExit(child);
  const output = collectOutput(child);
  const exited = exitReason(child);

  try {
    // Wait for anvil's own "Listening on" line even for a fixed port: polling alone could mistake another
    // node already bound to that port for ours.
    const port = await listeningPort(child, output, options.startTimeoutMs ?? 20_000);
    const rpcUrl = `http://127.0.0.1:${port}`;
    await waitForChainId(rpcUrl, chainId, child, output, options.startTimeoutMs ?? 20_000);
    let stopping: Promise<void> | undefined;
    return {
      rpcUrl,
      chainId,
      port,
      exited,
      stop: () => (stopping ??= stopChild(child, exited, 'SIGTERM', STOP_GRACE_MS).finally(forget)),
    };
  } catch (err) {
    forget();
    await stopChild(child, exited, 'SIGTERM', STOP_GRACE_MS);
    throw err;
  }
}

function anvilArgs(options: StartAnvilOptions & { chainId: number }): string[] {
  const args = ['--host', '127.0.0.1', '--port', String(options.port ?? 0), '--chain-id', String(options.chainId)];
  args.push('--mnemonic', DEV_MNEMONIC);
  if (options.blockTime !== undefined) args.push('--block-time', String(options.blockTime));
  if (options.stateFile !== undefined) args.push('--state', options.stateFile);
  return args;
}

/**
 * The native anvil binary: `AGENTGATE_ANVIL_BIN` if set, else the platform package that
 * `@foundry-rs/anvil` depends on (e.g. `@foundry-rs/anvil-linux-amd64/bin/anvil`). We spawn the binary
 * itself rather than the package's node wrapper, so `stop()` signals anvil directly.
 */
export function anvilBinaryPath(): string {
  const override = process.env['AGENTGATE_ANVIL_BIN'];
  if (override) return override;

  const require = createRequire(import.meta.url);
  const wrapperPkg = require.resolve('@foundry-rs/anvil/package.json');
  const arch = ({ x64: 'amd64', arm64: 'arm64' } as Record<string, string>)[process.arch] ?? process.arch;
  const binaryName = process.platform === 'win32' ? 'anvil.exe' : 'anvil';
  const candidates: string[] = [];
  try {
    const platformPkg = createRequire(wrapperPkg).resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`);
    candidates.push(path.join(path.dirname(platformPkg), 'bin', binaryName));
  } catch {
    // optional dependency not installed for this platform; try the wrapper's dist/ fallback
  }
  candidates.push(path.join(path.dirname(wrapperPkg), '..', 'dist', binaryName));
  const found = candidates.find((c) => existsSync(c));
  if (!found) {
    throw new Error(
      `anvil binary not found for ${process.platform}-${process.arch} (looked in ${candidates.join(', ')}); ` +
        'reinstall @foundry-rs/anvil or set AGENTGATE_ANVIL_BIN',
    );
  }
  return found;
}

interface OutputTail {
  text(): string;
  onData(listener: (chunk: string) => void): () => void;
}

/** Keeps draining anvil's stdout/stderr (it logs every transaction) and remembers the last few KB. */
function collectOutput(child: ChildProcess): OutputTail {
  let tail = '';
  const listeners = new Set<(chunk: string) => void>();
  const onChunk = (buf: Buffer): void => {
    const chunk = buf.toString('utf8');
    tail = (tail + chunk).slice(-OUTPUT_TAIL_CHARS);
    for (const l of listeners) l(chunk);
  };
  child.stdout?.on('data', onChunk);
  child.stderr?.on('data', onChunk);
  return {
    text: () => tail,
    onData: (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
  };
}

/** Reads the port from anvil's "Listening on 127.0.0.1:<port>" line. */
function listeningPort(child: ChildProcess, output: OutputTail, timeoutMs: number): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    let seen = '';
    const finish = (err: Error | undefined, port?: number): void => {
      clearTimeout(timer);
      unsubscribe();
      child.off('exit', onExit);
      child.off('error', onError);
      if (err) reject(err);
      else resolve(port!);
    };
    const unsubscribe = output.onData((chunk) => {
      seen = (seen + chunk).slice(-OUTPUT_TAIL_CHARS);
      const match = /Listening on [\d.]+:(\d+)/.exec(seen);
      if (match) finish(undefined, Number(match[1]));
    });
    const onExit = (code: number | null): void =>
      finish(new Error(`anvil exited (code ${code}) before listening:\n${output.text()}`));
    const onError = (err: Error): void => finish(new Error(`could not start anvil: ${err.message}`));
    const timer = setTimeout(
      () => finish(new Error(`anvil did not report a port within ${timeoutMs} ms:\n${output.text()}`)),
      timeoutMs,
    );
    child.once('exit', onExit);
    child.once('error', onError);
  });
}

async function waitForChainId(
  rpcUrl: string,
  chainId: number,
  child: ChildProcess,
  output: OutputTail,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`anvil exited (code ${child.exitCode}) before answering:\n${output.text()}`);
    }
    const answered = await rpcChainId(rpcUrl);
    if (answered === chainId) return;
    if (answered !== undefined) {
      throw new Error(`anvil at ${rpcUrl} answered chain id ${answered}, expected ${chainId}`);
    }
    if (Date.now() > deadline) {
      throw new Error(`anvil at ${rpcUrl} did not answer eth_chainId within ${timeoutMs} ms:\n${output.text()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function rpcChainId(rpcUrl: string): Promise<number | undefined> {
  try {
    const res = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      signal: AbortSignal.timeout(1000),
    });
    const body = (await res.json()) as { result?: string };
    return body.result ? Number(BigInt(body.result)) : undefined;
  } catch {
    return undefined; // not up yet
  }
}

