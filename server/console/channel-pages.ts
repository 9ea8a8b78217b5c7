import type Router from '@koa/router';
import type { Context } from 'koa';
import type { ChainService } from '../chain/chain-service.js';
import type { DidService } from '../did/did-service.js';
import { notFound } from '../platform/errors.js';
import { decodeCursor } from '../platform/pagination.js';
import { parseInput } from '../platform/validate.js';
import type { PaymentService } from '../payments/payment-service.js';
import { sessionOf, type ConsoleGuards } from './access.js';
import { checkSignedReceipt } from './receipt-check.js';
import { explorerTxUrl } from './explorer.js';
import { channelIdParam, cursorQuery, idParam, PAGE_SIZE } from './schemas.js';
import { channelCallPage, channelPage, channelsPage } from './views/channels.js';
import { sendHtml } from './render.js';

export interface ChannelPageDeps {
  payments: PaymentService;
  /** The service's DID document, which call receipts are checked against (as payments' are). */
  did: DidService;
  chain: ChainService | undefined;
}

/**
 * Channels: the seller's batch-settlement channels, one channel with its calls, and one call (at
 * /console/payments/chc_…, where a payment's page is, so a call id found anywhere opens the same way).
 * Everything is read by the session's org: another org's channel or call is a 404.
 */
export function channelPages(router: Router, deps: ChannelPageDeps, guards: ConsoleGuards): void {
  const orgOf = (ctx: Context) => sessionOf(ctx).orgId;
  const calls = () => deps.payments.channels.calls;

  router.get('/channels', guards.session, async (ctx) => {
    const { cursor } = parseInput(cursorQuery, ctx.query, 'query');
    const page = await calls().listChannels(orgOf(ctx), PAGE_SIZE, cursor ? decodeCursor(cursor) : undefined);
    sendHtml(ctx, channelsPage({ session: sessionOf(ctx), channels: page.items, paged: !!cursor, ...(page.nextPageToken ? { older: `/console/channels?cursor=${page.nextPageToken}` } : {}) }));
  });

  router.get('/channels/:channelId', guards.session, async (ctx) => {
    const { channelId } = parseInput(channelIdParam, ctx.params, 'params');
    const { cursor } = parseInput(cursorQuery, ctx.query, 'query');
    const [summary, page] = await Promise.all([calls().summary(orgOf(ctx), channelId), calls().calls(orgOf(ctx), channelId, PAGE_SIZE, cursor ? decodeCursor(cursor) : undefined)]);
    sendHtml(ctx, channelPage({ session: sessionOf(ctx), summary, calls: page.items, paged: !!cursor, ...(page.nextPageToken ? { older: `/console/channels/${channelId}?cursor=${page.nextPageToken}` } : {}) }));
  });

  // A call's page; anything else under /payments/ goes on to the payment pages (payment-pages.ts), before
  // any check: /payments/rows (the list's live refresh) and /payments/export.csv are theirs, not ids.
  router.get('/payments/:id', guards.session, async (ctx, next) => {
    if (!String(ctx.params.id).startsWith('chc_')) return next();
    const { id } = parseInput(idParam, ctx.params, 'params');
    const call = await calls().find(orgOf(ctx), id);
    if (!call) throw notFound('Payment not found');
    const receiptCheck = call.voucher.signedReceipt ? await checkSignedReceipt(call.voucher, deps.did.serviceDocument()) : undefined;
    const explorerUrl = explorerTxUrl(deps.chain, call.claim?.txHash ?? undefined);
    sendHtml(ctx, channelCallPage({ session: sessionOf(ctx), call, ...(receiptCheck ? { receiptCheck } : {}), ...(explorerUrl ? { explorerUrl } : {}) }));
  });
}
