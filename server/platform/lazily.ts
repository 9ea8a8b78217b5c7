/**
 * A module loaded by the first call that needs it, not at start: `const loadX = lazily(() => import('x'))`.
 * Every start of every process pays for each module imported at the top, and a rolling restart waits for
 * that; a module only some requests use (the MCP SDK, mail authentication and parsing, a platform client)
 * is better paid for by the first such request. A failed import is tried again by the next call.
 */
export function lazily<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () => (loading ??= load().catch((err: unknown) => {
    loading = undefined;
    throw err;
  }));
}
