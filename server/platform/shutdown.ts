import type { Logger } from './logger.js';

/** A step of a process's stop is logged on its own when it takes at least this long. */
const SLOW_STEP_MS = 500;
const STILL_WAITING_EVERY_MS = 5_000;

/**
 * What a process must stop, named, so that a stop that takes long says which step took the time (a rolling
 * restart of N processes waits for each one's stop). Steps run last added first: whatever started later
 * may depend on what started before it.
 */
export class ShutdownSteps {
  /** Each entry: steps that depend on none of each other, run side by side. */
  private readonly steps: Array<Array<{ name: string; stop: () => Promise<void> }>> = [];

  add(name: string, stop: () => Promise<void>): void {
    this.steps.push([{ name, stop }]);
  }

  /**
   * Steps that wait for none of each other (background rounds, each finishing its item in hand), run side
   * by side at their turn: a stop waits for the slowest of them rather than for their sum. The list is
   * read when the stop runs: a caller may fill it after adding it.
   */
  addTogether(steps: Array<{ name: string; stop: () => Promise<void> }>): void {
    this.steps.push(steps);
  }

  /**
   * Runs every step once, last added first; a failing step is logged and the others still run. Returns
   * how long it took and the slowest steps (a long-running process logs them as it stops).
   */
  async run(log: Logger): Promise<{ durationMs: number; slowest: Array<{ step: string; ms: number }> }> {
    const started = Date.now();
    const took: Array<{ step: string; ms: number }> = [];
    const runStep = async ({ name, stop }: { name: string; stop: () => Promise<void> }) => {
      const from = Date.now();
      // A step that hangs must say so while it hangs: an orchestrator kills the process in the end, and
      // the log must then name what it was waiting for.
      const waiting = setInterval(() => log.warn({ step: name, waitedMs: Date.now() - from }, 'stopping: still waiting for a step'), STILL_WAITING_EVERY_MS);
      try {
        await stop();
      } catch (err) {
        log.warn({ step: name, err: (err as Error).message }, 'stopping: a step failed; going on with the others');
      } finally {
        clearInterval(waiting);
      }
      const ms = Date.now() - from;
      took.push({ step: name, ms });
      if (ms >= SLOW_STEP_MS) log.info({ step: name, durationMs: ms }, 'stopping: slow step');
    };
    for (const together of this.steps.splice(0).reverse()) await Promise.all(together.map(runStep));
    return { durationMs: Date.now() - started, slowest: took.filter((t) => t.ms >= 50).sort((a, b) => b.ms - a.ms).slice(0, 5) };
  }
}
