import Router from '@koa/router';
import type { Context } from 'koa';
import { authenticatedRouter, identityIdOf, principalOf, requireScope, type AuthDeps } from '../platform/auth/authenticate.js';
import { notFound } from '../platform/errors.js';
import { parseInput } from '../platform/validate.js';
import { presentEvent, type CalendarOwner, type CalendarService } from './calendar-service.js';
import { createEventBody, eventParams, feedParams, listQuery, publicBody, updateEventBody } from './schemas.js';

const ownerOf = (ctx: Context): CalendarOwner => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });

export interface CalendarRouteDeps extends AuthDeps {
  calendar: CalendarService;
}

/** The identity's calendar (DESIGN.md): identity key with calendar:read / calendar:write. */
export function calendarRoutes({ keys, identities, calendar }: CalendarRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/calendar' });
  const read = requireScope('calendar:read');
  const write = requireScope('calendar:write');
  const eventId = (ctx: Context) => parseInput(eventParams, ctx.params, 'params').eventId;

  router.get('/', read, async (ctx) => {
    const query = parseInput(listQuery, ctx.query, 'query');
    const events = (await calendar.list(ownerOf(ctx), query)).map(presentEvent);
    ctx.body = { events, count: events.length };
  });

  router.post('/', write, async (ctx) => {
    const body = parseInput(createEventBody, ctx.request.body, 'body');
    ctx.status = 201;
    ctx.body = presentEvent(await calendar.create(ownerOf(ctx), body));
  });

  // Registered before /:eventId; "public" is not an event id anyway.
  router.get('/public', read, async (ctx) => {
    ctx.body = await calendar.publicStatus(ownerOf(ctx));
  });

  router.post('/public', write, async (ctx) => {
    const { enabled } = parseInput(publicBody, ctx.request.body, 'body');
    ctx.body = await calendar.setPublic(ownerOf(ctx), enabled);
  });

  router.get('/:eventId', read, async (ctx) => {
    ctx.body = presentEvent(await calendar.get(ownerOf(ctx), eventId(ctx)));
  });

  router.patch('/:eventId', write, async (ctx) => {
    const id = eventId(ctx);
    const body = parseInput(updateEventBody, ctx.request.body, 'body');
    ctx.body = presentEvent(await calendar.update(ownerOf(ctx), id, body));
  });

  router.delete('/:eventId', write, async (ctx) => {
    const id = eventId(ctx);
    await calendar.delete(ownerOf(ctx), id);
    ctx.body = { eventId: id, deleted: true };
  });

  return router;
}

/** The public iCal feed: no key, the unguessable token in the URL is the capability. */
export function calendarFeedRoutes({ calendar }: { calendar: CalendarService }): Router {
  const router = new Router();
  router.get('/v0/calendar/feed/:token.ics', async (ctx) => {
    const parsed = feedParams.safeParse(ctx.params);
    const text = parsed.success ? await calendar.feedText(parsed.data.token) : null;
    if (text === null) throw notFound('Calendar feed not found');
    ctx.set('Cache-Control', 'private, max-age=300');
    ctx.type = 'text/calendar; charset=utf-8';
    ctx.body = text;
  });
  return router;
}
