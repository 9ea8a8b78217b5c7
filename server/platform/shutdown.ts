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
  private readonly steps: Array<{ name: string; stop: () => Promise<void> }> = [];

  add(name: string, stop: () => Promise<void>): void {
    this.steps.push({ name, stop });
  }

  /**
   * Runs every step once, last added first; a failing step is logged and the others still run. Returns
   * how long it took and the slowest steps (a long-running process logs them as it stops).
   */
  async run(log: Logger): Promise<{ durationMs: number; slowest: Array<{ step: string; ms: number }> }> {
    const started = Date.now();
    const took: Array<{ step: string; ms: number }> = [];
    for (const { name, stop } of this.steps.splice(0).reverse()) {
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
    }
    return { durationMs: Date.now() - started, slowest: took.filter((t) => t.ms >= 50).sort((a, b) => b.ms - a.ms).slice(0, 5) };
  }
}
