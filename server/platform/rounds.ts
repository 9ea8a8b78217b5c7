/**
 * How long a stop waits for the round under way. Every round must survive its process dying in the middle
 * (what it recorded is finished by a later round of any process), so a stop may leave one as a crash
 * would: the wait only lets a round that is about to end finish quietly. Waiting longer held restarts:
 * unbounded, a channel sweep round waiting on lanes whose holders had just stopped held a stopping serve
 * for over a minute; at 10 s, the webhook outbox sweep's round, slow on a busy database, held stops of a
 * rolling restart for 3-4 s each.
 */
export const ROUND_STOP_WAIT_MS = 1_000;

/**
 * A background round run every `everyMs` in this process: sweeps, reconciliation, expiry. A round still
 * running when the next is due is not stacked with it (the next tick is skipped); a failure goes to
 * `onError` (never once stopped: a round cut short by shutdown is no failure). The timer never keeps the
 * process alive, and the returned stop waits for the round under way, at most `stopWaitMs`
 * (the shutdown's log names a step that took that long).
 */
export function startRounds(options: {
  everyMs: number;
  round: () => Promise<unknown>;
  onError: (err: Error) => void;
  /** Run a first round at once instead of after `everyMs`. */
  runNow?: boolean;
  /** The longest the stop waits for the round under way (default ROUND_STOP_WAIT_MS). */
  stopWaitMs?: number;
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
    let waiting: NodeJS.Timeout | undefined;
    await Promise.race([running, new Promise((resolve) => { waiting = setTimeout(resolve, options.stopWaitMs ?? ROUND_STOP_WAIT_MS); })]);
    clearTimeout(waiting);
  };
}
