import type Router from '@koa/router';
import { z } from 'zod';
import { authenticatedRouter, principalOf, requirePlatformOrScope, type AuthDeps } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { presentLog, type ActivityLog } from '../platform/activity-log.js';
import { decodeCursor } from '../platform/pagination.js';

export const logsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50),
  /** nextPageToken of the page before: the entries older than its last. */
  pageToken: z.string().max(512).optional(),
});

export interface LogRouteDeps extends AuthDeps {
  logs: ActivityLog;
}

/**
 * GET /v0/logs: a platform key sees its org's log, an identity key its own identity's entries. A seller
 * key (a machine credential of the payment set-up) sees neither: the org log names identities and keys.
 */
export function logRoutes({ keys, identities, logs }: LogRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities });
  router.get('/v0/logs', requirePlatformOrScope('logs:read'), async (ctx) => {
    const principal = principalOf(ctx);
    const { limit, pageToken } = parseInput(logsQuery, ctx.query, 'query');
    const page = await logs.list(
      principal.tier === 'identity' ? { orgId: principal.orgId, identityId: principal.identityId } : { orgId: principal.orgId },
      limit, pageToken ? decodeCursor(pageToken) : undefined,
    );
    ctx.body = { logs: page.items.map(presentLog), count: page.items.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
  });
  return router;
}
