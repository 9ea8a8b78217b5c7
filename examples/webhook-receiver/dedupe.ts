/**
 * Remembers which idempotency keys were handled. In memory for the example; a real receiver keeps them
 * where its own data lives (a unique index on the key, inserted in the same transaction as the effect),
 * so a retry after a crash is recognized too.
 */
export class SeenEvents {
  private readonly keys = new Set<string>();

  /** True the first time a key is offered, false for every repeat. */
  firstTime(key: string): boolean {
    if (this.keys.has(key)) return false;
    this.keys.add(key);
    return true;
  }
}
