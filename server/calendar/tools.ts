import { z } from 'zod';
import { toolDefiner, type ToolDefinition } from '../platform/mcp-tool.js';
import { presentEvent, type CalendarService } from './calendar-service.js';
import { createEventBody, eventParams, listQuery } from './schemas.js';

const owner = (principal: { orgId: string; identityId: string }) => ({ orgId: principal.orgId, identityId: principal.identityId });
const timesHelp = 'Timed events take ISO 8601 date-times with offset (startAt, endAt); all-day events take dates (YYYY-MM-DD) with isAllDay: true, endAt being the day after the last day.';

export interface CalendarToolDeps {
  calendar: CalendarService;
}

const defineTool = toolDefiner<CalendarToolDeps>();

/** MCP tools of the calendar: the same service calls as /v0/calendar. */
export const calendarTools: ToolDefinition<CalendarToolDeps>[] = [
  defineTool({
    name: 'calendar_list',
    title: 'List calendar events',
    description: 'Lists this identity\'s events that overlap from..to (either may be omitted), earliest first, at most limit (default 50).',
    scope: 'calendar:read',
    input: z.object({ limit: z.number().int().min(1).max(100).optional(), from: listQuery.shape.from, to: listQuery.shape.to }),
    run: async ({ calendar }, principal, input) => {
      const query = listQuery.parse(input);
      const events = (await calendar.list(owner(principal), query)).map(presentEvent);
      return { events, count: events.length };
    },
  }),
  defineTool({
    name: 'calendar_create',
    title: 'Create a calendar event',
    description: `Creates an event. ${timesHelp}`,
    scope: 'calendar:write',
    input: createEventBody,
    run: async ({ calendar }, principal, input) => presentEvent(await calendar.create(owner(principal), input)),
  }),
  defineTool({
    name: 'calendar_update',
    title: 'Update a calendar event',
    description: `Changes the given fields of an event. ${timesHelp}`,
    scope: 'calendar:write',
    input: createEventBody.partial().extend({ eventId: eventParams.shape.eventId }),
    run: async ({ calendar }, principal, input) => {
      const { eventId, ...change } = input;
      return presentEvent(await calendar.update(owner(principal), eventId, change));
    },
  }),
  defineTool({
    name: 'calendar_delete',
    title: 'Delete a calendar event',
    description: 'Deletes one of this identity\'s calendar events.',
    scope: 'calendar:write',
    input: eventParams,
    run: async ({ calendar }, principal, input) => {
      await calendar.delete(owner(principal), input.eventId);
      return { eventId: input.eventId, deleted: true };
    },
  }),
];
