import { decodeCursor } from '../platform/pagination.js';
import { notFound } from '../platform/errors.js';
import { paymentActivity, type ActivityDeps } from './activity.js';
import type { MandateOwner, MandateService } from './mandate-service.js';
import type { PayService } from './pay-service.js';
import type { ActivityQuery, MandateBody, PayBody } from './schemas.js';

/**
 * What the buyer routes (server/buyer/routes.ts) and the buyer MCP tools (server/buyer/tools.ts) both run,
 * so a mandate, a payment or a page of activity is the same whichever door the agent came in by.
 */

export interface BuyerDeps extends ActivityDeps {
  mandates: MandateService;
  buyer: PayService;
}

export async function createMandateFor({ mandates }: Pick<BuyerDeps, 'mandates'>, owner: MandateOwner, body: MandateBody) {
  const doc = await mandates.create(owner, {
    maxPerCallAtomic: body.maxPerCallUsdc, dailyCapAtomic: body.dailyCapUsdc, validUntil: body.validUntil, allowedHosts: body.allowedHosts,
  });
  return mandates.present(doc);
}

export async function listMandatesFor({ mandates, buyer }: Pick<BuyerDeps, 'mandates'> & Partial<Pick<BuyerDeps, 'buyer'>>, owner: MandateOwner) {
  // What voided or refunded auth-capture payments give back is counted before the mandates are shown.
  await buyer?.syncEscrows(owner);
  const presented = await Promise.all((await mandates.list(owner)).map((m) => mandates.present(m)));
  return { mandates: presented, count: presented.length };
}

export async function getMandateFor({ mandates, buyer }: Pick<BuyerDeps, 'mandates'> & Partial<Pick<BuyerDeps, 'buyer'>>, owner: MandateOwner, id: string) {
  await buyer?.syncEscrows(owner);
  return mandates.present(await mandates.get(owner, id));
}

export async function revokeMandateFor({ mandates }: Pick<BuyerDeps, 'mandates'>, owner: MandateOwner, id: string) {
  return mandates.present(await mandates.revoke(owner, id));
}

export async function payFor({ buyer }: Pick<BuyerDeps, 'buyer'>, owner: MandateOwner, body: PayBody) {
  return buyer.pay(owner, {
    url: body.url, method: body.method, headers: body.headers, body: body.body,
    maxAmountAtomic: body.maxAmountUsdc ?? body.maxAmount, dryRun: body.dryRun, mandateId: body.mandateId, network: body.network,
  });
}

export async function activityFor(deps: ActivityDeps & Partial<Pick<BuyerDeps, 'buyer'>>, owner: MandateOwner, query: ActivityQuery) {
  await deps.buyer?.syncEscrows(owner);
  const page = await paymentActivity(deps, owner, query.limit, query.pageToken ? decodeCursor(query.pageToken) : undefined);
  return { activity: page.items, count: page.items.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
}

/** The identity's payment channels (x402 batch-settlement) with what the chain says of each. */
export async function listChannelsFor({ buyer }: Pick<BuyerDeps, 'buyer'>, owner: MandateOwner) {
  const channels = buyer.channels.wallets.available ? await buyer.channels.list(owner) : [];
  return { channels, count: channels.length };
}

/** Asks the seller of one of the identity's channels for its remainder back (404: not this identity's channel). */
export async function refundChannelFor({ buyer }: Pick<BuyerDeps, 'buyer'>, owner: MandateOwner, channelId: string) {
  const result = buyer.channels.wallets.available ? await buyer.channels.refund(owner, channelId) : undefined;
  if (!result) throw notFound('Channel not found');
  return result;
}

/**
 * Starts the timed withdrawal of one of the identity's channels (its seller does not refund): what the
 * channel holds above what accepted vouchers committed comes back after the channel's withdraw delay.
 */
export async function withdrawChannelFor({ buyer }: Pick<BuyerDeps, 'buyer'>, owner: MandateOwner, channelId: string) {
  const started = buyer.channels.wallets.available ? await buyer.channels.withdrawals.start(owner, channelId, 'request') : undefined;
  if (!started) throw notFound('Channel not found');
  return started;
}
