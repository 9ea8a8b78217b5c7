/**
 * Where a process's start went, step by step: a rolling restart waits for all of it, so the line that says
 * a serve or worker runs carries each step's milliseconds (the first, `load`, is from the process's start:
 * Node's boot and the modules' import).
 */
export class StartSteps {
  readonly steps: Record<string, number> = {};
  private last = 0;

  /**
   * Ends the step running since the previous mark (or since the process started) under this name. A step
   * marked again (a start made again after the database interrupted it) adds to its time, so the steps
   * still sum to the whole start.
   */
  mark(step: string): void {
    const now = performance.now();
    this.steps[step] = (this.steps[step] ?? 0) + Math.round(now - this.last);
    this.last = now;
  }
}
