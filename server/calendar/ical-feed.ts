import ical, { ICalCalendarMethod } from 'ical-generator';
import type { CalendarEventDoc } from './calendar-model.js';

/**
 * RFC 5545 text for a set of events. ical-generator does the escaping (commas, semicolons, newlines) and
 * the 75-octet line folding. DTSTAMP is the event's last change, so the same data gives the same bytes.
 */
export function renderFeed(calendar: { name: string; uidDomain: string }, events: CalendarEventDoc[]): string {
  const cal = ical({
    name: calendar.name,
    prodId: { company: 'agentgate', product: 'calendar', language: 'EN' },
    method: ICalCalendarMethod.PUBLISH,
  });
  for (const event of events) {
    cal.createEvent({
      id: `${event._id}@${calendar.uidDomain}`,
      start: event.startAt,
      end: event.endAt,
      allDay: event.isAllDay,
      summary: event.title,
      description: event.description || undefined,
      location: event.location || undefined,
      stamp: event.updatedAt,
      created: event.createdAt,
      lastModified: event.updatedAt,
    });
  }
  return cal.toString();
}
