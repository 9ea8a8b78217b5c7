import { Schema, type Connection, type Model } from 'mongoose';
import type { SourceVerdict } from './sources.js';

interface VerdictDoc { _id: string; listed: boolean; detail?: string; expiresAt: Date }

const schema = new Schema<VerdictDoc>({ _id: String, listed: { type: Boolean, required: true }, detail: String, expiresAt: { type: Date, required: true } }, { versionKey: false });
// Swept by the processes (FerretDB 1.x has no TTL indexes): see sweep().
schema.index({ expiresAt: 1 });

const SWEEP_EVERY_MS = 60_000;

/** Most verdicts one process keeps in memory (the oldest go first). */
const MAX_IN_MEMORY = 100_000;

/**
 * Verdicts of the sources that cost a call (the oracle's eth_call, the provider's HTTP request), kept for
 * SCREENING_CACHE_TTL_MS in this process and in the database, so N processes ask a source once per address
 * and TTL, not N times. Every copy keeps the expiry of the answer it came from: however many processes
 * pass a verdict along, none is used past TTL after the source gave it (a newly listed address is refused
 * everywhere within one TTL). Answers that failed are not kept. An entry is one document written whole
 * (no conditional update): two processes writing one key at once both write a fresh answer.
 */
export class SharedVerdicts {
  private readonly model: Model<VerdictDoc>;
  private readonly memory = new Map<string, { verdict: SourceVerdict; expiresAt: number }>();
  private readonly loading = new Map<string, Promise<SourceVerdict>>();
  private lastSweep: number;
  /** The sweep under way, or the last one (settled): the writes wait for it (see load). */
  private swept: Promise<void> = Promise.resolve();

  /** `now` is the clock verdicts expire by (a test moves it instead of sleeping through a TTL). */
  constructor(conn: Connection, private readonly ttlMs: number, private readonly now: () => number = Date.now) {
    this.lastSweep = now();
    this.model = conn.models.ScreeningVerdict ?? conn.model<VerdictDoc>('ScreeningVerdict', schema, 'screening_verdicts');
  }

  /** The verdict kept for `key`, or `ask()`'s, then kept. Concurrent misses of one key share one ask. */
  through(key: string, ask: () => Promise<SourceVerdict>): Promise<SourceVerdict> {
    // Nothing is kept: every screening asks its source, and nothing is read or written here.
    if (this.ttlMs <= 0) return ask();
    const kept = this.memory.get(key);
    if (kept && kept.expiresAt > this.now()) return Promise.resolve(kept.verdict);
    const pending = this.loading.get(key);
    if (pending) return pending;
    const load = this.load(key, ask).finally(() => this.loading.delete(key));
    this.loading.set(key, load);
    return load;
  }

  private async load(key: string, ask: () => Promise<SourceVerdict>): Promise<SourceVerdict> {
    // The database's copy is a cache too: when it cannot be read, the source is asked.
    const shared = await this.model.findById(key).lean().catch(() => null);
    if (shared && shared.expiresAt.getTime() > this.now()) {
      const verdict = { listed: shared.listed, ...(shared.detail ? { detail: shared.detail } : {}) };
      this.remember(key, verdict, shared.expiresAt.getTime());
      return verdict;
    }
    const verdict = await ask();
    const expiresAt = this.now() + this.ttlMs;
    this.remember(key, verdict, expiresAt);
    this.sweep();
    // Every write waits for this process's sweep under way, if any: on an engine whose deleteMany reads,
    // then deletes (FerretDB), a sweep beside a write could delete the answer just written. Another
    // process's sweep still can; that costs one more ask of the source, never a verdict past its TTL.
    void this.swept
      .then(() => this.model.replaceOne({ _id: key }, { listed: verdict.listed, ...(verdict.detail ? { detail: verdict.detail } : {}), expiresAt: new Date(expiresAt) }, { upsert: true }))
      .catch(() => {});
    return verdict;
  }

  /** Housekeeping, at most once a minute per process: expired verdicts are never read, only kept. */
  private sweep(): void {
    if (this.now() - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = this.now();
    this.swept = this.model.deleteMany({ expiresAt: { $lt: new Date(this.now()) } }).then(() => {}, () => {});
  }

  private remember(key: string, verdict: SourceVerdict, expiresAt: number): void {
    this.memory.delete(key);
    if (this.memory.size >= MAX_IN_MEMORY) this.memory.delete(this.memory.keys().next().value!);
    this.memory.set(key, { verdict, expiresAt });
  }
}
