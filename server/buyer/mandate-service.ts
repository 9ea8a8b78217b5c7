import type { Connection, Model } from 'mongoose';
import type { ActivityLog } from '../logs/activity-log.js';
import { AppError, notFound } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { formatUsdc } from '../../middleware/price.js';
import { mandateSchema, type MandateDoc } from './mandate-model.js';
import type { PayRefusal } from './pay-result.js';

export interface MandateOwner { orgId: string; identityId: string }

export interface CreateMandateInput {
  maxPerCallAtomic: bigint;
  dailyCapAtomic: bigint;
  validUntil: Date;
  allowedHosts?: string[];
}

/** What a successful reservation holds until the payment settles (commit) or fails (release). */
export interface Reservation {
  mandateId: string;
  day: string;
  amount: number;
}

/** "Today" for caps is the UTC calendar day. */
export const utcDay = (at: Date) => at.toISOString().slice(0, 10);

const mandateNotFound = () => notFound('Mandate not found');

export function presentMandate(doc: MandateDoc, now = new Date()) {
  const spentToday = doc.day === utcDay(now) ? doc.spentToday : 0;
  const status = doc.revokedAt ? 'revoked' : doc.validUntil <= now ? 'expired' : 'active';
  return {
    mandateId: doc._id,
    status,
    maxPerCallUsdc: formatUsdc(BigInt(doc.maxPerCallAtomic)),
    dailyCapUsdc: formatUsdc(BigInt(doc.dailyCapAtomic)),
    validUntil: doc.validUntil.toISOString(),
    allowedHosts: doc.allowedHosts ?? null,
    spentTodayUsdc: formatUsdc(BigInt(spentToday)),
    remainingTodayUsdc: formatUsdc(BigInt(Math.max(0, doc.dailyCapAtomic - spentToday))),
    totalSpentUsdc: formatUsdc(BigInt(doc.totalSpent)),
    callCount: doc.callCount,
    createdAt: doc.createdAt.toISOString(),
    lastUsedAt: doc.lastUsedAt?.toISOString() ?? null,
    revokedAt: doc.revokedAt?.toISOString() ?? null,
  };
}

/** `api.example.com` matches itself (any port); `*.example.com` matches its subdomains. */
export function hostAllowed(allowedHosts: string[] | null, url: URL): boolean {
  if (!allowedHosts || allowedHosts.length === 0) return true;
  const hostname = url.hostname.toLowerCase();
  const host = url.host.toLowerCase();
  return allowedHosts.some((entry) => {
    const rule = entry.toLowerCase();
    if (rule.startsWith('*.')) return hostname.endsWith(rule.slice(1));
    return rule === hostname || rule === host;
  });
}

/**
 * Mandates and the atomic reservation that enforces them. A payment reserves its amount with one
 * conditional update before anything is signed: the filter carries the cap (`spentToday <= cap - amount`),
 * so of any number of concurrent payments only those that fit are let through.
 */
export class MandateService {
  readonly mandates: Model<MandateDoc>;

  constructor(conn: Connection, private readonly logs: ActivityLog) {
    this.mandates = conn.models.Mandate ?? conn.model<MandateDoc>('Mandate', mandateSchema, 'mandates');
  }

  async create(owner: MandateOwner, input: CreateMandateInput): Promise<MandateDoc> {
    if (input.maxPerCallAtomic > input.dailyCapAtomic) throw new AppError(400, 'validation_error', 'body.maxPerCallUsdc: must not exceed dailyCapUsdc');
    if (input.validUntil.getTime() <= Date.now()) throw new AppError(400, 'validation_error', 'body.validUntil: must be in the future');
    const now = new Date();
    const doc: MandateDoc = {
      _id: newId('mdt'), orgId: owner.orgId, identityId: owner.identityId,
      maxPerCallAtomic: Number(input.maxPerCallAtomic), dailyCapAtomic: Number(input.dailyCapAtomic), validUntil: input.validUntil,
      allowedHosts: input.allowedHosts?.length ? input.allowedHosts.map((h) => h.toLowerCase()) : null,
      day: utcDay(now), spentToday: 0, totalSpent: 0, callCount: 0, createdAt: now,
    };
    await this.mandates.create(doc);
    await this.logs.record({ ...owner, action: 'payments.mandate_created', category: 'payments', description: `Mandate ${doc._id}: ${formatUsdc(input.maxPerCallAtomic)} USDC per call, ${formatUsdc(input.dailyCapAtomic)} USDC per day`, targetType: 'mandate', targetId: doc._id });
    return doc;
  }

  async list(owner: MandateOwner): Promise<MandateDoc[]> {
    return this.mandates.find({ identityId: owner.identityId }).sort({ createdAt: -1, _id: -1 }).lean();
  }

  async get(owner: MandateOwner, id: string): Promise<MandateDoc> {
    const doc = await this.mandates.findOne({ _id: id, identityId: owner.identityId }).lean();
    if (!doc) throw mandateNotFound();
    return doc;
  }

  async revoke(owner: MandateOwner, id: string): Promise<MandateDoc> {
    const doc = await this.mandates.findOneAndUpdate({ _id: id, identityId: owner.identityId, revokedAt: null }, { $set: { revokedAt: new Date() } }, { returnDocument: 'after' }).lean();
    if (!doc) {
      const existing = await this.get(owner, id);
      return existing; // already revoked: revoking again is a no-op
    }
    await this.logs.record({ ...owner, action: 'payments.mandate_revoked', category: 'payments', severity: 'warning', description: `Mandate ${id} revoked`, targetType: 'mandate', targetId: id });
    return doc;
  }

  /**
   * Picks a mandate that allows `amount` to `url` and reserves the amount on it. With several mandates
   * the newest that fits pays. A refusal names the most specific reason.
   */
  async reserve(owner: MandateOwner, url: URL, amount: bigint, options: { mandateId?: string } = {}): Promise<{ ok: true; reservation: Reservation; mandate: MandateDoc } | PayRefusal> {
    const now = new Date();
    const all = options.mandateId
      ? await this.mandates.find({ _id: options.mandateId, identityId: owner.identityId }).lean()
      : await this.list(owner);
    if (all.length === 0) {
      return refusal('mandate_not_found', options.mandateId ? `mandate ${options.mandateId} not found` : 'this identity has no spending mandate; create one with POST /v0/payments/mandates');
    }
    const live = all.filter((m) => !m.revokedAt && m.validUntil > now);
    if (live.length === 0) {
      return all.some((m) => !m.revokedAt)
        ? refusal('mandate_expired', 'every mandate of this identity has expired')
        : refusal('mandate_revoked', 'every mandate of this identity is revoked');
    }
    const forHost = live.filter((m) => hostAllowed(m.allowedHosts, url));
    if (forHost.length === 0) return refusal('mandate_host_not_allowed', `no active mandate allows paying ${url.host}`);

    let last: PayRefusal | undefined;
    for (const mandate of forHost) {
      if (amount > BigInt(mandate.maxPerCallAtomic)) {
        last ??= refusal('mandate_per_call_exceeded', `the price ${formatUsdc(amount)} USDC is over the mandate's per-call limit of ${formatUsdc(BigInt(mandate.maxPerCallAtomic))} USDC`);
        continue;
      }
      const outcome = await this.reserveOn(mandate, Number(amount), now);
      if (outcome.ok) return { ok: true, reservation: outcome.reservation, mandate: outcome.mandate };
      if (outcome.code === 'mandate_daily_cap_exceeded' || !last) last = outcome;
    }
    return last!;
  }

  private async reserveOn(mandate: MandateDoc, amount: number, now: Date): Promise<{ ok: true; reservation: Reservation; mandate: MandateDoc } | PayRefusal> {
    const today = utcDay(now);
    const live = { _id: mandate._id, revokedAt: null, validUntil: { $gt: now } };
    // The cap never changes after creation, so `cap - amount` can sit in the filter as a constant.
    const headroom = mandate.dailyCapAtomic - amount;
    for (let attempt = 0; attempt < 3; attempt++) {
      const sameDay = await this.mandates.findOneAndUpdate(
        { ...live, day: today, spentToday: { $lte: headroom } },
        { $inc: { spentToday: amount } }, { returnDocument: 'after' },
      ).lean();
      if (sameDay) return { ok: true, reservation: { mandateId: mandate._id, day: today, amount }, mandate: sameDay };
      if (headroom >= 0) {
        // First payment of a new UTC day: the day's counter starts over with this amount.
        const newDay = await this.mandates.findOneAndUpdate(
          { ...live, day: { $ne: today } },
          { $set: { day: today, spentToday: amount } }, { returnDocument: 'after' },
        ).lean();
        if (newDay) return { ok: true, reservation: { mandateId: mandate._id, day: today, amount }, mandate: newDay };
      }
      const current = await this.mandates.findById(mandate._id).lean();
      if (!current || current.revokedAt) return refusal('mandate_revoked', `mandate ${mandate._id} is revoked`);
      if (current.validUntil <= now) return refusal('mandate_expired', `mandate ${mandate._id} expired at ${current.validUntil.toISOString()}`);
      if (current.day === today) {
        return refusal('mandate_daily_cap_exceeded', `paying ${formatUsdc(BigInt(amount))} USDC would exceed the daily cap of ${formatUsdc(BigInt(current.dailyCapAtomic))} USDC (${formatUsdc(BigInt(Math.max(0, current.dailyCapAtomic - current.spentToday)))} USDC left today)`);
      }
      // The day rolled over between the two updates: try again.
    }
    return refusal('mandate_daily_cap_exceeded', 'the daily cap could not be reserved');
  }

  /** Gives a failed payment's amount back to the day it was reserved on (a later day starts at zero anyway). */
  async release(reservation: Reservation): Promise<void> {
    await this.mandates.updateOne({ _id: reservation.mandateId, day: reservation.day }, { $inc: { spentToday: -reservation.amount } });
  }

  /** The reservation became a payment. */
  async commit(reservation: Reservation): Promise<MandateDoc | null> {
    return this.mandates.findOneAndUpdate({ _id: reservation.mandateId }, { $inc: { totalSpent: reservation.amount, callCount: 1 }, $set: { lastUsedAt: new Date() } }, { returnDocument: 'after' }).lean();
  }
}

function refusal(code: PayRefusal['code'], message: string): PayRefusal {
  return { ok: false, code, message };
}
