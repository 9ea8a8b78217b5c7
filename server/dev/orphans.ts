import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/**
 * Child processes of `agentgate dev` (PostgreSQL, FerretDB, anvil) outlive it when it is SIGKILLed: no
 * exit handler runs. They serve nobody then, yet hold the data, the lock files and the ports, so the next
 * start finds them by their command line and a parent that is gone (pid 1 adopted them) and stops them.
 */

/**
 * The command line and parent of a live process, from /proc or, where there is none (macOS), from ps;
 * undefined when there is no such process.
 */
export function processInfo(pid: number): { command: string; parent: number } | undefined {
  if (!(pid > 0)) return undefined;
  try {
    const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    const parent = Number(/^\d+ \(.*\) \S+ (\d+)/.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1]);
    return { command, parent };
  } catch {
    if (existsSync('/proc/self')) return undefined;
  }
  try {
    const [parent, ...command] = execFileSync('ps', ['-o', 'ppid=,command=', '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split(/\s+/);
    return parent ? { command: command.join(' '), parent: Number(parent) } : undefined;
  } catch {
    return undefined; // ps says no such process
  }
}

/** SIGINT (a clean, fast shutdown for postgres; FerretDB exits on it too), then SIGKILL after 10 s. */
export async function stopOrphan(pid: number): Promise<void> {
  try { process.kill(pid, 'SIGINT'); } catch { return; }
  for (let waited = 0; waited < 10_000 && processInfo(pid); waited += 100) await new Promise((r) => setTimeout(r, 100));
  if (processInfo(pid)) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone meanwhile */ } }
}

/** Its parent is gone: adopted by init or a subreaper, which is not the node process that started it. */
export const isOrphan = (info: { parent: number }) => info.parent === 1 || !processInfo(info.parent)?.command.includes('node');

/** Stops every orphaned process whose command line contains all of `marks`. */
export async function stopOrphansMatching(marks: string[], log: (line: string) => void): Promise<void> {
  if (process.platform !== 'linux') return;
  for (const entry of readdirSync('/proc')) {
    const info = /^\d+$/.test(entry) ? processInfo(Number(entry)) : undefined;
    if (info && isOrphan(info) && marks.every((mark) => info.command.includes(mark))) {
      log(`stopping ${marks[0]} (pid ${entry}) left running by an earlier run that was killed`);
      await stopOrphan(Number(entry));
    }
  }
}
