import { Schema, type Connection, type Model } from 'mongoose';
import { AppError } from './errors.js';

interface Hit { bucket: string; at: Date }

const schema = new Schema<Hit>({ bucket: { type: String, required: true }, at: { type: Date, required: true } }, { versionKey: false });
schema.index({ bucket: 1, at: -1 });

/**
 * A sliding-window limiter kept in the database, so every server process shares one count. Each
 * accepted request leaves one hit; a request that would exceed the limit removes its hit again and is
 * refused with 429 and the seconds until the oldest hit in the window expires.
 */
export class RateLimiter {
  private readonly hits: Model<Hit>;

  constructor(conn: Connection) {
    this.hits = conn.models.RateLimitHit ?? conn.model<Hit>('RateLimitHit', schema, 'rate_limit_hits');
  }

  /** Whether `bucket` already holds `limit` hits in the window, without adding one (a gate before work that counts only failures). */
  async exhausted(bucket: string, limit: number, windowMs: number): Promise<{ exhausted: boolean; retryAfter: number }> {
    const now = Date.now();
    const recent = await this.hits.find({ bucket, at: { $gt: new Date(now - windowMs) } }).sort({ at: 1, _id: 1 }).limit(limit).select({ at: 1 }).lean();
    const oldest = recent[0]?.at.getTime() ?? now;
    return { exhausted: recent.length >= limit, retryAfter: Math.max(1, Math.ceil((oldest + windowMs - now) / 1000)) };
  }

  async consume(bucket: string, limit: number, windowMs: number): Promise<void> {
    const now = new Date();
    const since = new Date(now.getTime() - windowMs);
    const hit = await this.hits.create({ bucket, at: now });
    const recent = await this.hits.find({ bucket, at: { $gt: since } }).sort({ at: 1, _id: 1 }).select({ at: 1 }).lean();
    const position = recent.findIndex((h) => String(h._id) === String(hit._id));
    if (position >= limit || position === -1) {
      await this.hits.deleteOne({ _id: hit._id });
      const oldest = recent[0]?.at ?? now;
      const retryAfter = Math.max(1, Math.ceil((oldest.getTime() + windowMs - now.getTime()) / 1000));
      throw new AppError(429, 'rate_limited', `Too many requests; retry in ${retryAfter} s`, { retryAfter }, { 'Retry-After': String(retryAfter) });
    }
    // Housekeeping: old hits of this bucket are of no further use.
    this.hits.deleteMany({ bucket, at: { $lte: since } }).catch(() => {});
  }
}
