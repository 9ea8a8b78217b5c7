// A channel's accepted vouchers are numbered 1, 2, 3, ... in the order they were accepted, and stored
// under `<channelId>:<number>`: a unique `_id`, so of two calls that build on the same voucher one is
// accepted (each voucher follows exactly one, whatever the calls' prices). The numbers have no gaps: only
// the newest voucher can be held (a held call makes the channel busy), so only the newest is ever
// released. The newest is therefore found by `_id` lookups alone, which every engine answers from its
// index; a range or a sort on `_id` is not (FerretDB scans the whole collection for it, all channels'
// vouchers, on every call: docs/operators/ferretdb.md).

/** Digits of a voucher's number in its id (ids sort by number within a channel). */
const DIGITS = 12;
/** Channels whose newest number a process remembers (it starts from there; any number is only a hint). */
const REMEMBERED = 100_000;

export const voucherId = (channelId: string, seq: number) => `${channelId.toLowerCase()}:${String(seq).padStart(DIGITS, '0')}`;
/** `<0x channel id>:<number>`, as a hold id carries it. */
export const VOUCHER_ID_PATTERN = `0x[0-9a-f]{64}:\\d{${DIGITS}}`;

/**
 * Finds a channel's newest voucher: from the number this process last saw for the channel (usually one
 * lookup, or none when that voucher was captured: a captured voucher never changes), confirmed by the
 * unique insert of the next number; galloping forward past what other processes accepted since, and
 * bisecting back when the newest was released.
 */
export class VoucherSequence<T extends { seq: number; status: string }> {
  /** Per channel, the newest number seen, with its voucher when that was captured (final). */
  private readonly newestSeen = new Map<string, { seq: number; captured?: T }>();

  constructor(private readonly byId: (id: string) => Promise<T | null>) {}

  /**
   * The voucher this process last saw as the channel's newest (read again unless it was captured): a later
   * one may exist (another process accepted it), which the insert of the next number finds out. Unknown
   * channel: found by `newest`.
   */
  async lastSeen(channelId: string): Promise<T | null> {
    const seen = this.newestSeen.get(channelId.toLowerCase());
    if (seen === undefined) return this.newest(channelId);
    if (seen.captured) return seen.captured;
    const doc = seen.seq === 0 ? null : await this.byId(voucherId(channelId, seen.seq));
    if (doc) this.remember(channelId, doc.seq, doc);
    return doc ?? (seen.seq === 0 ? null : this.newest(channelId));
  }

  /** The channel's newest voucher, null if none was accepted. */
  async newest(channelId: string): Promise<T | null> {
    const id = channelId.toLowerCase();
    const at = (seq: number) => (seq === 0 ? Promise.resolve(null) : this.byId(voucherId(id, seq)));
    // lo: a number known to exist (0: none), hi: one known not to.
    let lo = 0;
    let loDoc: T | null = null;
    let hi: number;
    const start = Math.max(1, this.newestSeen.get(id)?.seq ?? 1);
    const first = await at(start);
    if (first) {
      [lo, loDoc] = [start, first];
      for (let step = 1; ; step *= 2) {
        const next = await at(lo + step);
        if (!next) { hi = lo + step; break; }
        [lo, loDoc] = [lo + step, next];
      }
    } else {
      hi = start;
    }
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      const doc = await at(mid);
      if (doc) [lo, loDoc] = [mid, doc];
      else hi = mid;
    }
    this.remember(id, lo, loDoc ?? undefined);
    return loDoc;
  }

  /** A voucher this process captured: the channel's newest, unless a later one was seen. */
  captured(channelId: string, doc: T): void {
    if ((this.newestSeen.get(channelId.toLowerCase())?.seq ?? 0) <= doc.seq) this.remember(channelId, doc.seq, doc);
  }

  /** A voucher taken as captured was not: read again when next asked for (unless a later one was seen). */
  forget(channelId: string, seq: number): void {
    if (this.newestSeen.get(channelId.toLowerCase())?.seq === seq) this.remember(channelId, seq);
  }

  /** The channel's newest number is `seq` (accepted, or the newest after a release), `doc` its voucher if this process has it. */
  remember(channelId: string, seq: number, doc?: T): void {
    const id = channelId.toLowerCase();
    this.newestSeen.delete(id);
    this.newestSeen.set(id, { seq, ...(doc?.status === 'captured' ? { captured: doc } : {}) });
    // Oldest first: a Map keeps insertion order.
    if (this.newestSeen.size > REMEMBERED) this.newestSeen.delete(this.newestSeen.keys().next().value!);
  }
}

/** A voucher id's number. */
export function seqOf(voucherId: string): number {
  return Number(voucherId.slice(voucherId.lastIndexOf(':') + 1));
}
