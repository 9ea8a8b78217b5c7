import { Schema, type Connection, type Model } from 'mongoose';
import type { Collection } from 'mongodb';
import type { ChangeFeed } from '../platform/change-feed.js';
import { isDuplicateKey } from '../platform/errors.js';
import type { Logger } from '../platform/logger.js';
import { claimId, InboxSequence, type ClaimDoc } from './inbox-sequence.js';

export const MAIL_EVENT_TYPES = ['message.received', 'message.sent', 'message.delivered', 'message.bounced', 'message.received.blocked', 'message.received.unauthenticated', 'draft.approved', 'draft.rejected'] as const;
export type MailEventType = (typeof MAIL_EVENT_TYPES)[number];
/** What a stream or webhook gets when it names no events: everything but blocked and unverified mail, which stay silent. */
export const DEFAULT_MAIL_EVENTS: readonly MailEventType[] = MAIL_EVENT_TYPES.filter((t) => t !== 'message.received.blocked' && t !== 'message.received.unauthenticated');

/** How long events stay readable for a stream resuming with Last-Event-ID. */
const RETAIN_MS = 7 * 24 * 3600_000;
/** A number claimed but whose event is not there after this long belongs to a writer that died: skip it. */
const HOLE_WAIT_MS = 5_000;

export interface MailEventDoc {
  /** `<identityId>#<seq>`: the claim of the identity's event number and the event itself share the id. */
  _id: string;
  identityId: string;
  orgId: string;
  /** 1, 2, 3, ... per identity: the SSE event id a stream resumes from. */
  seq: number;
  type: MailEventType;
  data: Record<string, unknown>;
  at: Date;
  /** Set until every subscriber (the webhook dispatch) was told; the outbox sweep tells the rest again. */
  undispatched?: true;
}

const schema = new Schema<MailEventDoc>({
  _id: String,
  identityId: { type: String, required: true },
  orgId: { type: String, required: true },
  seq: { type: Number, required: true },
  type: { type: String, required: true },
  data: { type: Schema.Types.Mixed, required: true },
  at: { type: Date, required: true },
  undispatched: { type: Boolean },
}, { versionKey: false, minimize: false });
// Sparse: only the few events not yet told to their subscribers are in it, so the sweep's look is cheap.
schema.index({ undispatched: 1, at: 1 }, { sparse: true });

/** The JSON every consumer sees (webhook body, SSE data). */
export function presentEvent(event: MailEventDoc) {
  return { eventId: `${event.identityId}.${event.seq}`, event: event.type, identityId: event.identityId, createdAt: event.at.toISOString(), data: event.data };
}

export type MailEventSubscriber = (event: MailEventDoc) => Promise<void>;

/**
 * Mail events of each identity, in a collection any process can serve them from. Each event takes its
 * identity's next number by a unique insert (InboxSequence over `mail_event_sequence`) and is stored
 * under that number, so a stream reads `n + 1`, `n + 2`, ... by `_id` (an index lookup on FerretDB too)
 * and resumes exactly after the Last-Event-ID it was given. A new event is announced on the change feed,
 * which every process polls (CHANGE_FEED_POLL_MS), so an open stream in any process wakes within one poll.
 *
 * Events that must happen once per fact (a recipient delivered, a bounce) carry a key first inserted
 * under a unique `_id`, so a delivery job run twice or a bounce reported twice announces it once.
 */
export class MailEventLog {
  readonly events: Model<MailEventDoc>;
  private readonly sequence: InboxSequence;
  private readonly keys: Collection<{ _id: string; at: Date }>;
  private readonly claims: Collection<ClaimDoc>;
  private readonly waiters = new Map<string, Set<() => void>>();
  private lastTrim = 0;

  constructor(
    conn: Connection,
    private readonly changes: ChangeFeed,
    private readonly log: Logger,
    /** Told of every event (the identities' mail webhooks); a failure is logged, never thrown at the mail path, and the sweep tells it again. */
    private readonly onEvent: MailEventSubscriber,
  ) {
    this.events = conn.models.MailEvent ?? conn.model<MailEventDoc>('MailEvent', schema, 'mail_events');
    const claims = conn.collection<ClaimDoc>('mail_event_sequence');
    this.claims = claims as unknown as Collection<ClaimDoc>;
    this.sequence = new InboxSequence(claims);
    this.keys = conn.collection<{ _id: string; at: Date }>('mail_event_keys') as unknown as Collection<{ _id: string; at: Date }>;
    changes.on('mail-event', (identityId) => this.wake(identityId));
  }

  /** Records an event and tells its subscribers. Never throws: mail is stored or sent whether or not its event is. */
  async emit(identity: { _id: string; orgId: string }, type: MailEventType, data: Record<string, unknown>, onceKey?: string): Promise<void> {
    let keyed = false;
    let stored = false;
    try {
      if (onceKey) {
        try {
          await this.keys.insertOne({ _id: onceKey, at: new Date() });
          keyed = true;
        } catch (err) {
          if (isDuplicateKey(err)) return;
          throw err;
        }
      }
      const seq = await this.sequence.next(identity._id, type);
      const event: MailEventDoc = { _id: claimId(identity._id, seq), identityId: identity._id, orgId: identity.orgId, seq, type, data, at: new Date(), undispatched: true };
      await this.events.create(event);
      stored = true;
      this.trim();
      await this.changes.publish('mail-event', identity._id).catch((err) => this.log.warn({ err }, 'mail event not announced; streams find it on their next look'));
      await this.tell(event);
    } catch (err) {
      if (stored) this.log.error({ err, type, identityId: identity._id }, 'mail event recorded, not announced; the outbox sweep tells it');
      else {
        this.log.error({ err, type, identityId: identity._id }, 'mail event not recorded');
        // The once-key must not outlive an event that was never stored: a retry of the same outcome records it.
        if (keyed) await this.keys.deleteOne({ _id: onceKey! }).catch(() => {});
      }
    }
  }

  /**
   * Tells again (onEvent) of events stored more than `olderThanMs` ago and never marked told: their
   * process died between storing and telling, or telling failed. Telling is idempotent per event
   * (a webhook delivery's id is unique), so two processes sweeping at once deliver nothing twice.
   */
  async redispatch(olderThanMs: number): Promise<number> {
    const stale = await this.events.find({ undispatched: true, at: { $lt: new Date(Date.now() - olderThanMs) } }).sort({ at: 1 }).limit(200).lean();
    for (const event of stale) await this.tell(event);
    return stale.length;
  }

  private async tell(event: MailEventDoc): Promise<void> {
    let told = true;
    await this.onEvent(event).catch((err) => {
      told = false;
      this.log.error({ err, type: event.type, identityId: event.identityId }, 'mail event subscriber failed; the outbox sweep tries again');
    });
    if (told) await this.events.updateOne({ _id: event._id }, { $unset: { undispatched: 1 } }).catch((err) => this.log.warn({ err }, 'mail event not marked told; the sweep tells it again (idempotent)'));
  }

  /**
   * Housekeeping, at most once a minute per process (FerretDB 1.x has no TTL indexes): events and
   * once-keys older than the retention go. Their numbers' claims stay, so an identity's numbering never restarts.
   */
  private trim(): void {
    const now = Date.now();
    if (now - this.lastTrim < 60_000) return;
    this.lastTrim = now;
    const cutoff = new Date(now - RETAIN_MS);
    this.events.deleteMany({ at: { $lt: cutoff } }).catch((err) => this.log.warn({ err }, 'old mail events not trimmed'));
    // A once-key only has to outlast the retries of its outcome (a delivery worker's, a redelivered report).
    this.keys.deleteMany({ at: { $lt: cutoff } }).catch((err) => this.log.warn({ err }, 'old mail event keys not trimmed'));
  }

  /** The identity's latest event number (0 before its first). */
  top(identityId: string): Promise<number> {
    return this.sequence.top(identityId);
  }

  /**
   * Events after `seq`, in order, at most `limit`. A claimed number whose event is not stored yet stops
   * the read (its writer is between the claim and the insert) until it is HOLE_WAIT_MS old, then it is
   * skipped; an unclaimed number is the end.
   */
  async after(identityId: string, seq: number, limit = 100): Promise<{ events: MailEventDoc[]; cursor: number }> {
    const events: MailEventDoc[] = [];
    let cursor = seq;
    while (events.length < limit) {
      const next = await this.events.findById(claimId(identityId, cursor + 1)).lean();
      if (next) {
        events.push(next);
        cursor = next.seq;
        continue;
      }
      const claim = await this.claims.findOne({ _id: claimId(identityId, cursor + 1) });
      if (claim && Date.now() - claim.at.getTime() > RETAIN_MS) {
        // Trimmed: a client resuming from an old id (or from 0) jumps over everything trimmed at once,
        // rather than two queries per number it missed.
        cursor = await this.lastTrimmed(identityId, cursor + 1);
        continue;
      }
      if (claim && Date.now() - claim.at.getTime() > HOLE_WAIT_MS) {
        cursor += 1;
        continue;
      }
      break;
    }
    return { events, cursor };
  }

  /**
   * The last number, from `trimmed` on, whose claim is older than the retention (its event is gone): a
   * binary search on the claims' times, which grow with the numbers. About 2 log2(n) index lookups.
   */
  private async lastTrimmed(identityId: string, trimmed: number): Promise<number> {
    const cutoff = Date.now() - RETAIN_MS;
    let [low, high] = [trimmed, await this.top(identityId)];
    while (low < high) {
      const mid = Math.ceil((low + high) / 2);
      const claim = await this.claims.findOne({ _id: claimId(identityId, mid) });
      if (claim && claim.at.getTime() < cutoff) low = mid;
      else high = mid - 1;
    }
    return low;
  }

  /** Resolves when the identity has a new event (in this process or, through the change feed, another). */
  waitFor(identityId: string, timeoutMs: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const set = this.waiters.get(identityId) ?? new Set();
      this.waiters.set(identityId, set);
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        set.delete(done);
        if (!set.size) this.waiters.delete(identityId);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal.addEventListener('abort', done);
      set.add(done);
    });
  }

  private wake(identityId: string): void {
    for (const waiter of [...(this.waiters.get(identityId) ?? [])]) waiter();
  }
}
