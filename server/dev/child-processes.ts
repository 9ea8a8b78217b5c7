import type { ChildProcess } from 'node:child_process';
import { waitForTcp } from '../platform/net.js';

/** Resolves with why the child ended ("exit code 1", "killed by SIGKILL", or why it never started). */
export function exitReason(child: ChildProcess): Promise<string> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve(child.signalCode ? `killed by ${child.signalCode}` : `exit code ${child.exitCode}`);
      return;
    }
    child.once('exit', (code, signal) => resolve(signal ? `killed by ${signal}` : `exit code ${code}`));
    child.once('error', (err) => resolve(err.message));
  });
}

/** Signals the child and waits for it to end, with SIGKILL after `graceMs`. */
export async function stopChild(child: ChildProcess, exited: Promise<string>, signal: NodeJS.Signals, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Keeps the last few KB of a child's stderr, for error messages. */
export function stderrTail(child: ChildProcess): () => string {
  let text = '';
  child.stderr?.on('data', (d: Buffer) => { text = (text + d.toString()).slice(-4000); });
  return () => text.trim();
}

/**
 * Ends `child` with SIGKILL if this Node process exits while it still runs (an 'exit' handler: it cannot
 * help against our own SIGKILL, after which the next start finds the orphan, see orphans.ts).
 */
export function killOnOurExit(child: ChildProcess): () => void {
  const kill = () => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); };
  process.once('exit', kill);
  return () => process.off('exit', kill);
}

/**
 * Waits until the spawned `child` accepts TCP connections on 127.0.0.1:`port`, and hands back how it
 * ended and how to stop it. If it never listens it is killed and the error names it with its stderr.
 */
export async function superviseListening(
  child: ChildProcess,
  options: { name: string; port: number; timeoutMs: number; stopSignal: NodeJS.Signals; stopGraceMs: number; describeStderr?: (stderr: string) => string },
): Promise<{ exited: Promise<string>; stop(): Promise<void> }> {
  const exited = exitReason(child);
  const forget = killOnOurExit(child);
  const stderr = stderrTail(child);
  try {
    await waitForTcp('127.0.0.1', options.port, options.timeoutMs, () => child.exitCode !== null || child.signalCode !== null);
  } catch (err) {
    forget();
    await stopChild(child, exited, 'SIGKILL', 0);
    const said = options.describeStderr ? options.describeStderr(stderr()) : stderr();
    throw new Error(`${options.name} did not start: ${said || (err as Error).message}`);
  }
  return {
    // Why it ended, with its last words: a server that stops on its own (a PANIC, a full disk) says why.
    exited: exited.then((reason) => {
      const said = options.describeStderr ? options.describeStderr(stderr()) : stderr();
      return said ? `${reason}: ${said.slice(-600)}` : reason;
    }),
    async stop() {
      forget();
      await stopChild(child, exited, options.stopSignal, options.stopGraceMs);
    },
  };
}
