/**
 * A bounded in-process cache whose entries expire after `ttlMs`. Several server processes may share a
 * database: a change made elsewhere reaches this process within `ttlMs`; the process that made the
 * change calls `delete` and sees it at once. When full, the oldest entry goes first.
 *
 * A value read from the database before a change and stored after it would undo the `delete`: every
 * deletion bumps `generation`, and `set(key, value, readAt)` keeps nothing read before the last one.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();
  /** Loads under way, by key, with the generation they started in. */
  private readonly loading = new Map<string, { value: Promise<V>; readAt: number }>();
  private deletions = 0;

  /** Take before reading what will be stored; pass to `set`. */
  get generation(): number {
    return this.deletions;
  }

  constructor(private readonly ttlMs: number, private readonly maxEntries = 10_000) {}

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V, readAt?: number): void {
    if (this.ttlMs <= 0 || (readAt !== undefined && readAt !== this.deletions)) return;
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value, expiresAt: Date.now() + this.ttlMs });
  }

  /**
   * The cached value, or `load()`'s, which is then cached (cache a missing value as `null`, never
   * `undefined`; `keep` may refuse to cache a value). Concurrent misses of one key share one load: when an
   * entry expires under load, 64 requests arriving together cost one read, not 64. A caller never joins a
   * load that started before the last deletion.
   */
  async through(key: string, load: () => Promise<V>, keep: (value: V) => boolean = () => true): Promise<V> {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    const pending = this.loading.get(key);
    if (pending && pending.readAt === this.deletions) return pending.value;
    const readAt = this.deletions;
    // A real promise: a mongoose query is a thenable that runs again (and throws) if awaited twice.
    const value = Promise.resolve(load());
    const entry = { value, readAt };
    this.loading.set(key, entry);
    try {
      const loaded = await value;
      if (keep(loaded)) this.set(key, loaded, readAt);
      return loaded;
    } finally {
      if (this.loading.get(key) === entry) this.loading.delete(key);
    }
  }

  delete(key: string): void {
    this.deletions++;
    this.entries.delete(key);
  }

  /** Drops every entry whose value matches (a revoked key's, say): a scan, for changes that are rare. */
  deleteWhere(matches: (value: V) => boolean): void {
    this.deletions++;
    for (const [key, entry] of this.entries) if (matches(entry.value)) this.entries.delete(key);
  }

  /** Drops every entry whose key starts with `prefix` (all of one org's entries, say). */
  deletePrefix(prefix: string): void {
    this.deletions++;
    for (const key of this.entries.keys()) if (key.startsWith(prefix)) this.entries.delete(key);
  }
}
