import { Schema } from 'mongoose';
import type { SealedSecret } from '../platform/secret-box.js';

export interface CalendarEventDoc {
  _id: string; // eventId
  orgId: string;
  identityId: string;
  title: string;
  description: string;
  /** All-day events are stored at UTC midnight; endAt is exclusive (the day after the last day), as in iCal. */
  startAt: Date;
  endAt: Date;
  isAllDay: boolean;
  location: string;
  metadata: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
}

export const calendarEventSchema = new Schema<CalendarEventDoc>({
  _id: String,
  orgId: { type: String, required: true },
  identityId: { type: String, required: true },
  title: { type: String, required: true },
  description: { type: String, default: '' },
  startAt: { type: Date, required: true },
  endAt: { type: Date, required: true },
  isAllDay: { type: Boolean, default: false },
  location: { type: String, default: '' },
  metadata: { type: Schema.Types.Mixed, default: {} },
  createdAt: { type: Date, required: true },
  updatedAt: { type: Date, required: true },
}, { versionKey: false, minimize: false });
calendarEventSchema.index({ identityId: 1, startAt: 1, _id: 1 });

/**
 * The identity's public feed, when enabled. The token is looked up by its hash; the token itself is kept
 * sealed only so the owner can be shown the same URL again.
 */
export interface CalendarFeedDoc {
  _id: string; // identityId
  orgId: string;
  tokenHash: string;
  sealedToken: SealedSecret;
  enabledAt: Date;
}

export const calendarFeedSchema = new Schema<CalendarFeedDoc>({
  _id: String,
  orgId: { type: String, required: true },
  tokenHash: { type: String, required: true, unique: true },
  sealedToken: { type: Schema.Types.Mixed, required: true },
  enabledAt: { type: Date, required: true },
}, { versionKey: false });

export const CALENDAR_FEEDS_COLLECTION = 'calendar_feeds';
export const calendarSealedFields = [{ collection: CALENDAR_FEEDS_COLLECTION, path: 'sealedToken' }];
