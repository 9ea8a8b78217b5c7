import type { Collection } from 'mongoose';
import { AppError, isDuplicateKey } from '../platform/errors.js';

/**
 * Positions of messages in their inbox, for paging newest first at any depth with equality queries only.
 *
 * Each stored message claims the inbox's next number by inserting `{_id: "<inbox>#<n>"}` (unique, so
 * atomic on MongoDB and FerretDB alike), and carries `listBucket: "<inbox>#<n / BUCKET_SIZE>"`. A page is
 * then the top buckets' messages, found by an equality on `listBucket` and sorted in memory: a few dozen
 * documents whatever the inbox's size or the cursor's depth. Our embedded engine (FerretDB 1.24) sorts
 * and limits in memory over everything a filter matches, so a `{inboxId}` query sorted by time costs
 * time in proportion to the inbox; this keeps a page's cost constant on it as on MongoDB.
 *
 * Numbers are claimed contiguously (a claimer that loses a number probes upward for the top), so the top
 * is found by probing `_id`s. A message whose store failed after its claim leaves a gap, which pages skip.
 */
export const BUCKET_SIZE = 64;

export const claimId = (inboxId: string, seq: number) => `${inboxId}#${seq}`;
export const bucketOf = (inboxId: string, seq: number) => `${inboxId}#${Math.floor(seq / BUCKET_SIZE)}`;
export const listPosition = (inboxId: string, seq: number) => ({ listSeq: seq, listBucket: bucketOf(inboxId, seq) });

export interface ClaimDoc { _id: string; messageId: string; at: Date }

export class InboxSequence {
  /** The highest number this process knows to be claimed, per inbox (a hint: the claims are the truth). */
  private readonly known = new Map<string, number>();

  constructor(private readonly claims: Collection<ClaimDoc>) {}

  /** Claims the inbox's next number for a message. */
  async next(inboxId: string, messageId: string): Promise<number> {
    let top = await this.top(inboxId);
    for (let attempt = 0; attempt < 20; attempt++) {
      const seq = top + 1;
      try {
        await this.claims.insertOne({ _id: claimId(inboxId, seq), messageId, at: new Date() });
        this.remember(inboxId, seq);
        return seq;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        top = await this.top(inboxId, seq); // someone else took it: find the new top from there
      }
    }
    throw new AppError(503, 'inbox_busy', 'The inbox is receiving too many messages at once; retry');
  }

  /** The highest claimed number of the inbox (0 when none): exponential then binary probing of `_id`s. */
  async top(inboxId: string, atLeast = 0): Promise<number> {
    const exists = async (seq: number) => (await this.claims.findOne({ _id: claimId(inboxId, seq) }, { projection: { _id: 1 } })) !== null;
    let low = Math.max(atLeast, this.known.get(inboxId) ?? 0); // known to exist (or 0)
    let step = 1;
    while (await exists(low + step)) {
      low += step;
      step *= 2;
    }
    let high = low + step; // known not to exist
    while (high - low > 1) {
      const mid = Math.floor((low + high) / 2);
      if (await exists(mid)) low = mid;
      else high = mid;
    }
    this.remember(inboxId, low);
    return low;
  }

  private remember(inboxId: string, seq: number): void {
    if ((this.known.get(inboxId) ?? 0) >= seq) return;
    if (this.known.size > 10_000) this.known.clear();
    this.known.set(inboxId, seq);
  }
}

/** Page tokens of an inbox list: the position below which the next page starts. */
export function encodeListCursor(seq: number): string {
  return Buffer.from(`#${seq}`, 'utf8').toString('base64url');
}

export function decodeListCursor(token: string): number {
  const seq = /^[A-Za-z0-9_-]{1,20}$/.test(token) ? Number(/^#(\d{1,15})$/.exec(Buffer.from(token, 'base64url').toString('utf8'))?.[1]) : NaN;
  if (!Number.isSafeInteger(seq) || seq < 1) throw new AppError(400, 'invalid_page_token', 'pageToken is malformed; pass nextPageToken from a previous response');
  return seq;
}
