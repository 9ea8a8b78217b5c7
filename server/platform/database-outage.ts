import type { Logger } from './logger.js';

/**
 * MongoDB server error codes that mean "not now" rather than "not this": the server is shutting down,
 * stepping down or failing over, or a network step inside it failed. The driver's own retryable set.
 */
const UNAVAILABLE_CODES = new Set([6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436]);

const UNAVAILABLE_ERRORS = new Set([
  'MongoNetworkError', 'MongoNetworkTimeoutError', 'MongoServerSelectionError', 'MongoNotConnectedError',
  'MongoPoolClearedError', 'MongoTopologyClosedError',
]);

/**
 * FerretDB answers with an internal error (code 1) when its PostgreSQL is away: restarting ("terminating
 * connection due to administrator command", SQLSTATE 57P01), refusing connections, or gone mid-statement.
 */
const BACKEND_AWAY = /failed to connect to|SQLSTATE 57P0|SQLSTATE 08|conn closed|connection refused|unexpected EOF|server closed the connection|the database system is (starting up|shutting down)/i;

/**
 * Whether `err` says the database could not be reached or could not answer now, so the same operation may
 * succeed a moment later: the HTTP answer is then a retryable 503, never a 500.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { name?: string; code?: number; message?: string; errorLabels?: string[]; errorLabelSet?: Set<string> } | undefined;
  if (!e || typeof e !== 'object') return false;
  if (UNAVAILABLE_ERRORS.has(e.name ?? '')) return true;
  const labels = e.errorLabelSet ?? new Set(e.errorLabels ?? []);
  if (labels.has('RetryableWriteError') || labels.has('ResetPool')) return true;
  if (e.name === 'MongoServerError' || e.name === 'MongoBulkWriteError' || e.name === 'MongoWriteConcernError') {
    if (typeof e.code === 'number' && UNAVAILABLE_CODES.has(e.code)) return true;
    if (e.code === 1 && BACKEND_AWAY.test(e.message ?? '')) return true;
  }
  // Mongoose queues operations while its connection is down, then gives up on them.
  return /buffering timed out after/.test(e.message ?? '');
}

/**
 * Runs `operation` until it succeeds or fails for another reason than an unreachable database, waiting
 * between tries (50 ms, doubling to `maxDelayMs`, 2 s), and logging once per outage. For what must not be
 * lost when the database goes away for a moment: an outcome the chain already decided, a payment already
 * claimed. The operation must be safe to repeat (a unique insert whose duplicate counts as done, a $set, a
 * delete). `until`: give up (rethrow) after this time (ms since epoch).
 */
export async function retryWhileDatabaseAway<T>(operation: () => Promise<T>, log: Logger, what: string, until = Infinity, maxDelayMs = 2_000): Promise<T> {
  let delay = 50;
  let warned = false;
  for (;;) {
    try {
      const result = await operation();
      if (warned) log.info({ what }, 'database answers again; done');
      return result;
    } catch (err) {
      if (!isDatabaseUnavailable(err) || Date.now() + delay > until) throw err;
      if (!warned) log.warn({ what, err: (err as Error).message?.slice(0, 200) }, 'database unreachable; retrying until it answers');
      warned = true;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, maxDelayMs);
    }
  }
}

/**
 * The database could not be reached at all when a process opened its connection (a wrong MONGODB_URI, no
 * server listening): unlike an outage that begins after the connection opened, waiting will not mend it,
 * so the start fails at once and names the setting.
 */
export class DatabaseConnectError extends Error {
  override readonly name = 'DatabaseConnectError';
  constructor(cause: Error) {
    super(`cannot connect to the database at MONGODB_URI: ${cause.message}`, { cause });
  }
}
