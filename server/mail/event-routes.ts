import type Router from '@koa/router';
import { z } from 'zod';
import { authenticatedRouter, identityIdOf, requireScope } from '../platform/auth/authenticate.js';
import type { Logger } from '../platform/logger.js';
import { parseInput } from '../platform/validate.js';
import { DEFAULT_MAIL_EVENTS, MAIL_EVENT_TYPES, presentEvent, type MailEventType } from './mail-events.js';
import type { MailRouteDeps } from './routes.js';

/** A stream that heard nothing looks again this often anyway (a change-feed notice can be missed). */
const IDLE_LOOK_MS = 5_000;
/** A comment line this often keeps proxies and clients from closing an idle stream. */
const HEARTBEAT_MS = 15_000;

const eventList = z.string().transform((v) => v.split(',').map((e) => e.trim()).filter(Boolean))
  .pipe(z.array(z.enum(MAIL_EVENT_TYPES, { message: `must be among ${MAIL_EVENT_TYPES.join(', ')}` })).min(1).max(MAIL_EVENT_TYPES.length));
const eventId = z.string().regex(/^\d{1,15}$/, 'must be the id of an event this stream sent (a number)').transform(Number);

export const eventStreamQuery = z.object({
  events: eventList.optional(),
  /** For clients that cannot set the Last-Event-ID header (the browser EventSource sets it by itself on reconnect). */
  lastEventId: eventId.optional(),
});
export const lastEventIdHeader = eventId;

export interface EventStreamRouteDeps extends MailRouteDeps {
  log: Logger;
}

/**
 * `GET /v0/events`: the identity's mail events as server-sent events, for an agent without a public URL.
 * Each event's `id` is its number in the identity's event log, so a client that reconnects with
 * `Last-Event-ID` gets exactly what it missed (events are kept 7 days), from whichever process it reaches.
 */
export function eventStreamRoutes({ keys, identities, mail, log }: EventStreamRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/events' });
  const streamLog = log.child({ area: 'mail-events' });

  router.get('/', requireScope('mail:read'), async (ctx) => {
    const identityId = identityIdOf(ctx);
    const query = parseInput(eventStreamQuery, ctx.query, 'query');
    const header = ctx.get('last-event-id');
    const resumeFrom = header ? parseInput(z.object({ 'last-event-id': lastEventIdHeader }), { 'last-event-id': header }, 'query')['last-event-id'] : query.lastEventId;
    const wanted = new Set<MailEventType>(query.events ?? DEFAULT_MAIL_EVENTS);
    const events = mail.events;
    let cursor = resumeFrom ?? await events.top(identityId);

    ctx.req.socket.setTimeout(0);
    ctx.req.socket.setNoDelay(true);
    ctx.status = 200;
    ctx.type = 'text/event-stream';
    ctx.set('Cache-Control', 'no-cache, no-transform');
    ctx.set('X-Accel-Buffering', 'no'); // nginx: pass each event on at once
    // Written to the socket directly: a stream that ends because the client left is the normal end of an
    // event stream, not an error for Koa to report.
    ctx.respond = false;
    const stream = ctx.res;
    stream.writeHead(200);
    const closed = new AbortController();
    const stop = () => closed.abort();
    stream.once('close', stop);
    stream.write(`retry: 2000\n: stream of ${[...wanted].join(', ')} from event ${cursor}\n\n`);

    const pump = async () => {
      let lastWrite = Date.now();
      while (!closed.signal.aborted) {
        const page = await events.after(identityId, cursor, 100);
        for (const event of page.events) {
          if (wanted.has(event.type)) stream.write(`id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(presentEvent(event))}\n\n`);
          lastWrite = Date.now();
        }
        cursor = page.cursor;
        if (page.events.length === 100) continue;
        if (Date.now() - lastWrite >= HEARTBEAT_MS) {
          stream.write(': keep-alive\n\n');
          lastWrite = Date.now();
        }
        await events.waitFor(identityId, Math.min(IDLE_LOOK_MS, HEARTBEAT_MS), closed.signal);
      }
    };
    pump().catch((err) => {
      if (!closed.signal.aborted) streamLog.warn({ err, identityId }, 'event stream ended by an error');
    }).finally(() => { if (!stream.writableEnded) stream.end(); });
  });

  return router;
}
