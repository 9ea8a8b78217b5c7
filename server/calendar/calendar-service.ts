import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../platform/keys.js';
import type { Connection, Model } from 'mongoose';
import type { Config } from '../platform/config.js';
import type { SecretBox } from '../platform/secret-box.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { IdentityService } from '../identities/identity-service.js';
import { AppError, notFound, isDuplicateKey } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { calendarEventSchema, calendarFeedSchema, CALENDAR_FEEDS_COLLECTION, type CalendarEventDoc, type CalendarFeedDoc } from './calendar-model.js';
import { renderFeed } from './ical-feed.js';

export interface CalendarOwner { orgId: string; identityId: string }

export interface EventFields {
  title?: string;
  description?: string;
  startAt?: string;
  endAt?: string;
  isAllDay?: boolean;
  location?: string;
  metadata?: Record<string, unknown>;
}

const DAY_MS = 86_400_000;
const isDateOnly = (value: string) => /^\d{4}-\d{2}-\d{2}$/.test(value);
const day = (date: Date) => date.toISOString().slice(0, 10);
/** A date bound of a range query means that day's UTC midnight. */
export const rangeBound = (value: string) => new Date(isDateOnly(value) ? `${value}T00:00:00.000Z` : value);
const invalid = (field: string, message: string) => new AppError(400, 'validation_error', `body.${field}: ${message}`, { issues: [{ path: `body.${field}`, message }] });
const FEED_SEAL_CONTEXT = (identityId: string) => `calendar-feed:${identityId}`;
const FEED_EVENT_CAP = 5_000;

export function presentEvent(event: CalendarEventDoc) {
  return {
    eventId: event._id,
    title: event.title,
    description: event.description ?? '',
    startAt: event.isAllDay ? day(event.startAt) : event.startAt.toISOString(),
    endAt: event.isAllDay ? day(event.endAt) : event.endAt.toISOString(),
    isAllDay: event.isAllDay,
    location: event.location ?? '',
    metadata: event.metadata ?? {},
    createdAt: event.createdAt.toISOString(),
    updatedAt: event.updatedAt.toISOString(),
  };
}

/** Start and end of an event from what the caller gave: dates for all-day events, date-times otherwise. */
function timesOf(fields: { startAt: string; endAt?: string; isAllDay: boolean }): { startAt: Date; endAt: Date } {
  let startAt: Date;
  let endAt: Date;
  if (fields.isAllDay) {
    if (!isDateOnly(fields.startAt)) throw invalid('startAt', 'an all-day event takes a date (YYYY-MM-DD)');
    if (fields.endAt !== undefined && !isDateOnly(fields.endAt)) throw invalid('endAt', 'an all-day event takes a date (YYYY-MM-DD), the day after its last day');
    startAt = rangeBound(fields.startAt);
    endAt = fields.endAt !== undefined ? rangeBound(fields.endAt) : new Date(startAt.getTime() + DAY_MS);
  } else {
    if (isDateOnly(fields.startAt)) throw invalid('startAt', 'a timed event takes a date-time with offset; set isAllDay for a whole day');
    if (fields.endAt === undefined) throw invalid('endAt', 'is required for a timed event');
    if (isDateOnly(fields.endAt)) throw invalid('endAt', 'a timed event takes a date-time with offset');
    startAt = new Date(fields.startAt);
    endAt = new Date(fields.endAt);
  }
  if (endAt <= startAt) throw invalid('endAt', 'must be after startAt');
  return { startAt, endAt };
}

/** An identity's events, and its public iCal feed. */
export class CalendarService {
  private readonly events: Model<CalendarEventDoc>;
  private readonly feeds: Model<CalendarFeedDoc>;

  constructor(conn: Connection, private readonly config: Config, private readonly secrets: SecretBox, private readonly identities: IdentityService, private readonly logs: ActivityLog) {
    this.events = conn.models.CalendarEvent ?? conn.model<CalendarEventDoc>('CalendarEvent', calendarEventSchema, 'calendar_events');
    this.feeds = conn.models.CalendarFeed ?? conn.model<CalendarFeedDoc>('CalendarFeed', calendarFeedSchema, CALENDAR_FEEDS_COLLECTION);
  }

  private async log(owner: CalendarOwner, action: string, description: string, targetId?: string, metadata: Record<string, unknown> = {}) {
    await this.logs.record({ ...owner, action, category: 'calendar', description, ...(targetId ? { targetType: 'event', targetId } : {}), metadata });
  }

  async create(owner: CalendarOwner, input: EventFields & { title: string; startAt: string }): Promise<CalendarEventDoc> {
    const isAllDay = input.isAllDay ?? false;
    const times = timesOf({ startAt: input.startAt, endAt: input.endAt, isAllDay });
    const now = new Date();
    const event = await this.events.create({
      _id: newId('evt'), ...owner, title: input.title, description: input.description ?? '', ...times, isAllDay,
      location: input.location ?? '', metadata: input.metadata ?? {}, createdAt: now, updatedAt: now,
    });
    await this.log(owner, 'calendar.event_created', `Event ${input.title} created`, event._id);
    return event.toObject();
  }

  async get(owner: CalendarOwner, eventId: string): Promise<CalendarEventDoc> {
    const event = await this.events.findOne({ _id: eventId, identityId: owner.identityId }).lean();
    if (!event) throw notFound('Event not found');
    return event;
  }

  /** Events overlapping [from, to), earliest first. */
  async list(owner: CalendarOwner, query: { limit: number; from?: string; to?: string }): Promise<CalendarEventDoc[]> {
    const filter: Record<string, unknown> = { identityId: owner.identityId };
    if (query.to) filter.startAt = { $lt: rangeBound(query.to) };
    if (query.from) filter.endAt = { $gt: rangeBound(query.from) };
    return this.events.find(filter).sort({ startAt: 1, _id: 1 }).limit(query.limit).lean();
  }

  /** Changes are merged over the event as it is, then checked as a whole (e.g. a new endAt against the old startAt). */
  async update(owner: CalendarOwner, eventId: string, change: EventFields): Promise<CalendarEventDoc> {
    const current = presentEvent(await this.get(owner, eventId));
    const isAllDay = change.isAllDay ?? current.isAllDay;
    const switching = change.isAllDay !== undefined && change.isAllDay !== current.isAllDay;
    if (switching && (change.startAt === undefined || (!isAllDay && change.endAt === undefined))) {
      throw invalid('startAt', `changing isAllDay needs a new startAt${isAllDay ? '' : ' and endAt'}`);
    }
    const times = timesOf({
      startAt: change.startAt ?? current.startAt,
      endAt: change.endAt ?? (switching ? undefined : current.endAt),
      isAllDay,
    });
    const set: Record<string, unknown> = { ...times, isAllDay, updatedAt: new Date() };
    for (const field of ['title', 'description', 'location', 'metadata'] as const) if (change[field] !== undefined) set[field] = change[field];
    const updated = await this.events.findOneAndUpdate({ _id: eventId, identityId: owner.identityId }, { $set: set }, { returnDocument: 'after' }).lean();
    if (!updated) throw notFound('Event not found');
    await this.log(owner, 'calendar.event_updated', `Event ${updated.title} updated`, eventId, { fields: Object.keys(change) });
    return updated;
  }

  async delete(owner: CalendarOwner, eventId: string): Promise<void> {
    const deleted = await this.events.findOneAndDelete({ _id: eventId, identityId: owner.identityId }).lean();
    if (!deleted) throw notFound('Event not found');
    await this.log(owner, 'calendar.event_deleted', `Event ${deleted.title} deleted`, eventId);
  }

  private feedUrl(token: string) {
    return `${this.config.BASE_URL}/v0/calendar/feed/${token}.ics`;
  }

  async publicStatus(owner: CalendarOwner): Promise<{ enabled: boolean; url: string | null }> {
    const feed = await this.feeds.findById(owner.identityId).lean();
    if (!feed) return { enabled: false, url: null };
    return { enabled: true, url: this.feedUrl(this.secrets.openText(feed.sealedToken, FEED_SEAL_CONTEXT(owner.identityId))) };
  }

  /**
   * Enabling is idempotent (an enabled feed keeps its URL); disabling deletes the token, so the old URL
   * is dead for good and the next enable draws a new one.
   */
  async setPublic(owner: CalendarOwner, enabled: boolean): Promise<{ enabled: boolean; url: string | null }> {
    if (!enabled) {
      const removed = await this.feeds.deleteOne({ _id: owner.identityId });
      if (removed.deletedCount) await this.log(owner, 'calendar.public_disabled', 'Public iCal feed disabled');
      return { enabled: false, url: null };
    }
    const existing = await this.publicStatus(owner);
    if (existing.enabled) return existing;
    const token = randomBytes(32).toString('base64url');
    try {
      await this.feeds.create({ _id: owner.identityId, orgId: owner.orgId, tokenHash: sha256Hex(token), sealedToken: this.secrets.seal(token, FEED_SEAL_CONTEXT(owner.identityId)), enabledAt: new Date() });
    } catch (err) {
      if (isDuplicateKey(err)) return this.publicStatus(owner); // a concurrent enable won
      throw err;
    }
    await this.log(owner, 'calendar.public_enabled', 'Public iCal feed enabled');
    return { enabled: true, url: this.feedUrl(token) };
  }

  /** The iCal text behind a feed token, or null (unknown token, disabled feed, revoked identity). */
  async feedText(token: string): Promise<string | null> {
    const feed = await this.feeds.findOne({ tokenHash: sha256Hex(token) }).lean();
    if (!feed) return null;
    const identity = await this.identities.getLive(feed._id);
    if (!identity) return null;
    const events = await this.events.find({ identityId: feed._id }).sort({ startAt: 1, _id: 1 }).limit(FEED_EVENT_CAP).lean();
    return renderFeed({ name: identity.displayName, uidDomain: new URL(this.config.BASE_URL).hostname }, events);
  }
}
