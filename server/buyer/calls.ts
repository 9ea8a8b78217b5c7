import type { AppContext } from '../context.js';
import { decodeCursor } from '../platform/pagination.js';
import { paymentActivity } from './activity.js';
import type { MandateOwner } from './mandate-service.js';
import type { ActivityQuery, MandateBody, PayBody } from './schemas.js';

/**
 * What the buyer routes (server/buyer/routes.ts) and the buyer MCP tools (server/buyer/tools.ts) both run,
 * so a mandate, a payment or a page of activity is the same whichever door the agent came in by.
 */

export async function createMandateFor(app: AppContext, owner: MandateOwner, body: MandateBody) {
  const doc = await app.mandates.create(owner, {
    maxPerCallAtomic: body.maxPerCallUsdc, dailyCapAtomic: body.dailyCapUsdc, validUntil: body.validUntil, allowedHosts: body.allowedHosts,
  });
  return app.mandates.present(doc);
}

export async function listMandatesFor(app: AppContext, owner: MandateOwner) {
  const mandates = await Promise.all((await app.mandates.list(owner)).map((m) => app.mandates.present(m)));
  return { mandates, count: mandates.length };
}

export async function getMandateFor(app: AppContext, owner: MandateOwner, id: string) {
  return app.mandates.present(await app.mandates.get(owner, id));
}

export async function revokeMandateFor(app: AppContext, owner: MandateOwner, id: string) {
  return app.mandates.present(await app.mandates.revoke(owner, id));
}

export async function payFor(app: AppContext, owner: MandateOwner, body: PayBody) {
  return app.buyer.pay(owner, {
    url: body.url, method: body.method, headers: body.headers, body: body.body,
    maxAmountAtomic: body.maxAmountUsdc ?? body.maxAmount, dryRun: body.dryRun, mandateId: body.mandateId,
  });
}

export async function activityFor(app: AppContext, owner: MandateOwner, query: ActivityQuery) {
  const page = await paymentActivity(app, owner, query.limit, query.pageToken ? decodeCursor(query.pageToken) : undefined);
  return { activity: page.items, count: page.items.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
}
