/**
 * A background round run every `everyMs` in this process: sweeps, reconciliation, expiry. A round still
 * running when the next is due is not stacked with it (the next tick is skipped); a failure goes to
 * `onError` (never once stopped: a round cut short by shutdown is no failure). The timer never keeps the
 * process alive, and the returned stop waits for the round under way.
 */
export function startRounds(options: {
  everyMs: number;
  round: () => Promise<unknown>;
  onError: (err: Error) => void;
  /** Run a first round at once instead of after `everyMs`. */
  runNow?: boolean;
}): () => Promise<void> {
  let running: Promise<unknown> = Promise.resolve();
  let busy = false;
  let stopped = false;
  const tick = () => {
    if (busy || stopped) return;
    busy = true;
    running = options.round()
      .catch((err: unknown) => { if (!stopped) options.onError(err instanceof Error ? err : new Error(String(err))); })
      .finally(() => { busy = false; });
  };
  if (options.runNow) tick();
  const timer = setInterval(tick, options.everyMs);
  timer.unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    await running;
  };
}
