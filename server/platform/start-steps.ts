/**
 * Where a process's start went, step by step: a rolling restart waits for all of it, so the line that says
 * a serve or worker runs carries each step's milliseconds (the first, `load`, is from the process's start:
 * Node's boot and the modules' import).
 */
export class StartSteps {
  readonly steps: Record<string, number> = {};
  private last = 0;

  /** Ends the step running since the previous mark (or since the process started) under this name. */
  mark(step: string): void {
    const now = performance.now();
    this.steps[step] = Math.round(now - this.last);
    this.last = now;
  }
}
