/**
 * Message-list pages kept in memory, each under the inbox token it was read with (see InboxChanges): a
 * page is served only while its inbox's token is unchanged, so it is exactly what the query would
 * answer, in this process or any other. `maxAgeMs` only bounds the case where a token bump failed.
 *
 * Concurrent requests for a page that is not kept share one query: on FerretDB a page query reads the
 * whole collection, and fifty of them at once take so long that clients time out and ask again.
 *
 * Pages hold message bodies, so the cache is bounded by bytes as well as by count; a page too large to
 * be worth holding is not kept at all.
 */
export interface PageCacheOptions {
  maxPages: number;
  maxBytes: number;
  maxPageBytes: number;
  maxAgeMs: number;
  now?: () => number;
}

interface Entry<T> { token: string | null; page: T; bytes: number; storedAt: number }

export class PageCache<T> {
  private readonly pages = new Map<string, Entry<T>>();
  private readonly loading = new Map<string, { token: string | null; promise: Promise<T> }>();
  private bytes = 0;
  private readonly now: () => number;

  constructor(private readonly options: PageCacheOptions) {
    this.now = options.now ?? Date.now;
  }

  get size(): { pages: number; bytes: number } {
    return { pages: this.pages.size, bytes: this.bytes };
  }

  /** The page kept under exactly this token, else the one `load` reads (shared with concurrent callers). Never modify it. */
  async getOrLoad(key: string, token: string | null, load: () => Promise<T>, bytesOf: (page: T) => number): Promise<T> {
    const kept = this.get(key, token);
    if (kept) return kept;
    const pending = this.loading.get(key);
    if (pending && pending.token === token) return pending.promise;
    const promise = load().then((page) => {
      this.set(key, token, page, bytesOf(page));
      return page;
    }).finally(() => {
      if (this.loading.get(key)?.promise === promise) this.loading.delete(key);
    });
    this.loading.set(key, { token, promise });
    return promise;
  }

  /** The page kept under exactly this token, if it is not too old. */
  get(key: string, token: string | null): T | undefined {
    const entry = this.pages.get(key);
    if (!entry) return undefined;
    if (entry.token !== token || this.now() - entry.storedAt >= this.options.maxAgeMs) {
      this.remove(key, entry);
      return undefined;
    }
    return entry.page;
  }

  set(key: string, token: string | null, page: T, bytes: number): void {
    const existing = this.pages.get(key);
    if (existing) this.remove(key, existing);
    if (bytes > this.options.maxPageBytes || this.options.maxAgeMs <= 0) return;
    this.pages.set(key, { token, page, bytes, storedAt: this.now() });
    this.bytes += bytes;
    for (const [oldest, entry] of this.pages) {
      if (this.pages.size <= this.options.maxPages && this.bytes <= this.options.maxBytes) break;
      this.remove(oldest, entry);
    }
  }

  private remove(key: string, entry: Entry<T>): void {
    this.pages.delete(key);
    this.bytes -= entry.bytes;
  }
}
