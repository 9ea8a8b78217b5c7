import type { Model } from 'mongoose';
import { AppError, isDuplicateKey } from '../platform/errors.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { Logger } from '../platform/logger.js';
import type { DeliveryDoc } from './models.js';
import type { DeliveryLog } from './delivery-log.js';
import { claimIds, type AttemptClaims, type DeliveryJobs } from './delivery-job.js';

// A seller's "retry" (the API) and "retry now" (the console): a delivery's due attempt brought forward,
// or a finished delivery given a new round of the full schedule, each decided once however many clicks
// or processes ask at the same moment.

export class ManualRetry {
  constructor(
    private readonly deliveries: Model<DeliveryDoc>,
    private readonly claims: AttemptClaims,
    private readonly log: DeliveryLog,
    private readonly deliveryJobs: DeliveryJobs,
    private readonly logs: ActivityLog,
    private readonly logger: Logger,
  ) {}

  /**
   * "Retry now": a pending or failing delivery gets its due attempt at once instead of at nextAttemptAt;
   * a finished one (failed or delivered) starts a new round, as retry does. The early job carries the same
   * round and attempt number as the scheduled one, so the attempt claim lets only one of them send; the
   * other finds the attempt made (or being made by a live process, which records it).
   * Nothing here writes the delivery, so no conditional update is relied on. `seen` is the round and
   * attempt count the person was shown: when the delivery has moved on since (the attempt they meant to
   * hurry was made, perhaps delivered), nothing is sent again.
   */
  async retryNow(orgId: string, id: string, seen?: { round: number; attemptCount: number }): Promise<{ delivery: DeliveryDoc; outcome: 'hurried' | 'new_round' | 'moved_on' }> {
    const current = await this.log.get(orgId, id);
    if (seen && (current.round !== seen.round || current.attemptCount !== seen.attemptCount)) return { delivery: current, outcome: 'moved_on' };
    if (current.status !== 'pending') return { delivery: await this.retry(orgId, id), outcome: 'new_round' };
    const roundBase = current.roundBase ?? 0;
    await this.deliveryJobs.now({ deliveryId: id, round: current.round, roundBase, made: current.attemptCount - roundBase });
    this.logger.info({ deliveryId: id, paymentId: current.paymentId, attempt: current.attemptCount + 1, round: current.round }, 'webhook attempt brought forward by hand');
    await this.logs.record({ orgId, action: 'webhooks.retried', category: 'webhooks', description: `payment.received delivery for ${current.paymentId}: next attempt (#${current.attemptCount + 1}) sent now by hand`, targetType: 'webhook_delivery', targetId: id });
    return { delivery: current, outcome: 'hurried' };
  }

  /** Starts a new round of the full schedule for a delivery that has finished (failed or delivered). */
  async retry(orgId: string, id: string): Promise<DeliveryDoc> {
    const current = await this.log.get(orgId, id);
    if (current.status === 'pending') throw new AppError(409, 'delivery_pending', 'This delivery is still being attempted');
    const round = current.round + 1;
    // Of concurrent retries (two clicks, two processes), the one that inserts the round's claim starts it.
    if (!(await this.claimRound(id, round))) throw new AppError(409, 'delivery_pending', 'This delivery is already being retried');
    const now = new Date();
    // Unconditional: only the round's claimant writes, and while a delivery is finished no attempt job writes it.
    await this.deliveries.updateOne({ _id: id, orgId },
      { $set: { status: 'pending', round, roundBase: current.attemptCount, nextAttemptAt: now, updatedAt: now, lastError: null, deliveredAt: null, failedAt: null } });
    await this.log.changedByHand(current);
    const doc = { ...current, status: 'pending' as const, round, roundBase: current.attemptCount, nextAttemptAt: now, updatedAt: now, lastError: null, deliveredAt: null, failedAt: null };
    await this.deliveryJobs.now({ deliveryId: id, round, roundBase: doc.attemptCount, made: 0 });
    this.logger.info({ deliveryId: id, paymentId: doc.paymentId, round }, 'webhook delivery retried by hand: new round');
    await this.logs.record({ orgId, action: 'webhooks.retried', category: 'webhooks', description: `${doc.event} delivery for ${doc.paymentId} retried by hand`, targetType: 'webhook_delivery', targetId: id });
    return doc;
  }

  /**
   * The right to start round `round`: a unique insert, as for attempts. A claim whose holder died before
   * it started the round (the lease ran out and the delivery is still at an earlier round) is taken over
   * with the next generation, `<round>#1`, ..., which again only one process can insert.
   */
  private async claimRound(deliveryId: string, round: number): Promise<boolean> {
    const ids = claimIds(`${deliveryId}:round:${round}`);
    for (let generation = 0; generation < 20; generation++) {
      const id = ids(generation).at(-1)!;
      try {
        await this.claims.insertOne({ _id: id, expiresAt: new Date(Date.now() + this.deliveryJobs.leaseMs) });
        return true;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        const holder = await this.claims.findOne({ _id: id });
        if (holder && holder.expiresAt.getTime() > Date.now()) return false;
        const delivery = await this.deliveries.findById(deliveryId, { round: 1 }).lean();
        if (!delivery || delivery.round >= round) return false;
      }
    }
    return false;
  }
}
