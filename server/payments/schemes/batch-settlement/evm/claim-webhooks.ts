import { createHash } from 'node:crypto';
import { Schema, type Connection, type Model } from 'mongoose';
import type { ChannelClaimedEvent } from 'agentgate-x402-wire';
import { isDuplicateKey } from '../../../../platform/errors.js';
import { findByIds } from '../../../../platform/find-by-ids.js';
import type { DeliveryQueue, Outbox } from '../../../../webhooks/webhook-service.js';
import type { Endpoints } from '../../../endpoints.js';
import type { ChannelActionDoc } from './settle.js';
import type { ChannelCall, ChannelCalls } from './calls.js';
import { callChargeOf, chargedCumulativeOf } from './voucher-amounts.js';

// `channel.claimed`: the webhook that lets a seller reconcile calls paid through batch-settlement channels.
//
// How they are grouped, and why: one event per claim transaction and endpoint, listing the calls whose
// value that transaction carried, each with its signed receipt. Not one event per call: a channel call is
// paid (its voucher accepted) in milliseconds, hundreds a minute from one buyer, and a `payment.received`
// each would be a flood of deliveries for nothing a seller can act on (no money moved yet). A claim is
// when money moves: the sweep claims up to 100 channels in one transaction, at most every few minutes, so
// the events follow the transactions a seller sees on chain. Per endpoint, because webhooks are configured
// per endpoint (its URL and secret); more than 100 calls for one endpoint come in parts (`part`/`parts`).
//
// Exactly once: each event's id follows from the claim, the endpoint and the part, and the delivery is a
// unique insert of that id (the webhook engine's enqueue), so two processes dispatching one claim make one
// delivery. What was dispatched is marked by a unique insert of its own (`channel_claim_webhooks`), never
// by writing the claim action (which the settlement executor owns); the outbox sweep dispatches claims of
// the last hour left unmarked (a process died between the claim and its events).

export const CHANNEL_CLAIMED = 'channel.claimed' as const;
/** Calls listed in one event: a body stays well under a receiver's usual size limits (~1 KB per call). */
export const CALLS_PER_EVENT = 100;
/** How far back the sweep looks for claims whose events were not dispatched. */
const SWEEP_WINDOW_MS = 60 * 60_000;

interface DispatchedDoc { _id: string; events: number; at: Date }
const dispatchedSchema = new Schema<DispatchedDoc>({ _id: String, events: Number, at: Date }, { versionKey: false });

/** What the outbox needs: the claim actions, the calls they carried, the endpoints, and the delivery queue. */
export interface ChannelClaimOutboxDeps {
  conn: Connection;
  actions: () => Model<ChannelActionDoc>;
  calls: ChannelCalls;
  endpoints: Endpoints;
  deliveries: DeliveryQueue;
}

export class ChannelClaimOutbox implements Outbox {
  private readonly dispatched: Model<DispatchedDoc>;

  constructor(private readonly deps: ChannelClaimOutboxDeps) {
    this.dispatched = (deps.conn.models.ChannelClaimWebhook as Model<DispatchedDoc>) ?? deps.conn.model<DispatchedDoc>('ChannelClaimWebhook', dispatchedSchema, 'channel_claim_webhooks');
  }

  /** The events of one successful claim (or refund with claims), enqueued; idempotent. Returns how many. */
  async dispatch(action: ChannelActionDoc): Promise<number> {
    // A seller with no webhook on any endpoint is sent no event (as an endpoint without one is not):
    // the calls a claim carried, one read per call, are not read for nobody.
    const listening = (await this.deps.endpoints.list(action.orgId)).some((endpoint) => endpoint.webhookUrl);
    const calls = listening ? await this.deps.calls.claimedBy(action) : [];
    const byEndpoint = new Map<string, ChannelCall[]>();
    for (const call of calls) {
      const endpointId = call.voucher.endpointId;
      if (!endpointId) continue;
      byEndpoint.set(endpointId, [...(byEndpoint.get(endpointId) ?? []), call]);
    }
    const claimKey = createHash('sha256').update(action._id).digest('hex').slice(0, 24);
    const network = String((action.work as { network?: unknown }).network ?? '');
    let events = 0;
    for (const [endpointId, list] of byEndpoint) {
      const endpoint = await this.deps.endpoints.byId(action.orgId, endpointId);
      if (!endpoint || endpoint.deletedAt || !endpoint.webhookUrl) continue;
      const parts = Math.ceil(list.length / CALLS_PER_EVENT);
      for (let part = 1; part <= parts; part++) {
        const slice = list.slice((part - 1) * CALLS_PER_EVENT, part * CALLS_PER_EVENT);
        const claim = slice[0]!.claim!;
        const body: ChannelClaimedEvent = {
          event: CHANNEL_CLAIMED, claimId: action._id, createdAt: claim.claimedAt.toISOString(), network, txHash: claim.txHash ?? '', endpointId, part, parts,
          amountUsdcRaw: slice.reduce((sum, c) => sum + callChargeOf(c.voucher), 0n).toString(),
          calls: slice.map((c) => ({
            paymentId: c.callId, channelId: c.channel._id, payerAddress: c.channel.payer, amountUsdcRaw: callChargeOf(c.voucher).toString(), cumulativeAmountUsdcRaw: chargedCumulativeOf(c.voucher).toString(),
            resourceUrl: c.voucher.resource, acceptedAt: c.voucher.createdAt.toISOString(), receipt: c.voucher.signedReceipt ?? null,
          })),
        };
        await this.deps.deliveries.enqueue({ eventId: `evt_chcl_${claimKey}_${endpointId}_${part}`, event: CHANNEL_CLAIMED, orgId: action.orgId, endpointId, subjectId: claim.txHash ?? action._id, body: JSON.stringify(body) });
        events++;
      }
    }
    await this.dispatched.create({ _id: action._id, events, at: new Date() }).catch((err) => { if (!isDuplicateKey(err)) throw err; });
    return events;
  }

  /** Dispatches the claims of the last hour, older than `olderThanMs`, whose events are not marked dispatched. */
  async sweep(olderThanMs: number, shouldStop: () => boolean = () => false): Promise<number> {
    const now = Date.now();
    const recent = await this.deps.actions().find({ kind: { $in: ['claim', 'refund'] }, status: 'succeeded', updatedAt: { $gte: new Date(now - SWEEP_WINDOW_MS), $lte: new Date(now - olderThanMs) } }).lean();
    if (recent.length === 0) return 0;
    const done = new Set((await findByIds(recent.map((a) => a._id), (id) => this.dispatched.findById(id).lean())).map((d) => d._id));
    let dispatched = 0;
    for (const action of recent) {
      if (shouldStop()) break;
      if (done.has(action._id)) continue;
      await this.dispatch(action);
      dispatched++;
    }
    return dispatched;
  }
}
