import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

/** What a log line carries from the request it was written in (set by the request-id middleware). */
interface RequestScope { reqId: string }

const requestScope = new AsyncLocalStorage<RequestScope>();

/** Runs `fn` with `reqId` attached to every log line written inside it, however deep the call. */
export function withRequestId<T>(reqId: string, fn: () => T): T {
  return requestScope.run({ reqId }, fn);
}

/** The id of the request this code runs for, if any. */
export function currentRequestId(): string | undefined {
  return requestScope.getStore()?.reqId;
}

/**
 * Work that outlives the request that started it (a settlement batch shared by many requests, a timer)
 * runs outside any request, so its lines do not carry one buyer's request id.
 */
export function outsideRequest<T>(fn: () => T): T {
  return requestScope.exit(fn);
}

/**
 * The process's structured logger: one JSON object per line on stdout (pino), with the request id of the
 * request that wrote it. `serve` and `worker` log at LOG_LEVEL (default info); tests pass `silent`.
 */
export function createLogger(options: { level: LevelWithSilent; name?: string; destination?: pino.DestinationStream }): Logger {
  return pino({
    level: options.level,
    base: { pid: process.pid, ...(options.name ? { name: options.name } : {}) },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    mixin: () => {
      const reqId = currentRequestId();
      return reqId ? { reqId } : {};
    },
  }, options.destination ?? pino.destination({ sync: false }));
}

/**
 * Ends the logger's own stdout stream (after writing what it holds): pino's asynchronous destination
 * registers a process 'exit' handler that only its end removes, so a context that is closed (a test's
 * backend, a CLI command) and never ends it would stay reachable from the process for good.
 */
export async function endLogger(log: Logger): Promise<void> {
  const stream = (log as unknown as Record<symbol, unknown>)[pino.symbols.streamSym] as { end?: () => void; flushSync?: () => void; destroyed?: boolean; once?: (event: string, fn: () => void) => void } | undefined;
  if (!stream?.end || stream.destroyed) return;
  await new Promise<void>((resolve) => {
    stream.once?.('close', resolve);
    stream.end!();
  });
}

