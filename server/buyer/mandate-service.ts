import type { Connection, Model } from 'mongoose';
import type { ActivityLog } from '../platform/activity-log.js';
import { AppError, notFound, isDuplicateKey } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { formatUsdc } from 'agentgate-x402-wire';
import { mandateLedgerSchema, mandateSchema, mandateSpendSchema, type MandateDoc, type MandateLedgerDoc, type MandateSpendDoc } from './mandate-model.js';
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
  reservationId: string;
  mandateId: string;
  day: string;
  amount: number;
}

export interface MandateUsage {
  spentToday: number;
  totalSpent: number;
  callCount: number;
  lastUsedAt?: Date;
}

/** "Today" for caps is the UTC calendar day. */
export const utcDay = (at: Date) => at.toISOString().slice(0, 10);

const mandateNotFound = () => notFound('Mandate not found');
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Appending to a day's ledger retries when another writer took the step; this bounds a pathological pile-up. */
const MAX_APPEND_ATTEMPTS = 200;

export function presentMandate(doc: MandateDoc, usage: MandateUsage, now = new Date()) {
  const status = doc.revokedAt ? 'revoked' : doc.validUntil <= now ? 'expired' : 'active';
  return {
    mandateId: doc._id,
    status,
    maxPerCallUsdc: formatUsdc(BigInt(doc.maxPerCallAtomic)),
    dailyCapUsdc: formatUsdc(BigInt(doc.dailyCapAtomic)),
    validUntil: doc.validUntil.toISOString(),
    allowedHosts: doc.allowedHosts ?? null,
    spentTodayUsdc: formatUsdc(BigInt(usage.spentToday)),
    remainingTodayUsdc: formatUsdc(BigInt(Math.max(0, doc.dailyCapAtomic - usage.spentToday))),
    totalSpentUsdc: formatUsdc(BigInt(usage.totalSpent)),
    callCount: usage.callCount,
    createdAt: doc.createdAt.toISOString(),
    lastUsedAt: usage.lastUsedAt?.toISOString() ?? null,
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
 * Mandates and the reservation that enforces them. A payment reserves its amount before anything is
 * signed by appending one step to the mandate's ledger for the UTC day; the step's number is unique, so
 * of any number of concurrent payments each sees the true total before it and only those that fit get in.
 */
export class MandateService {
  readonly mandates: Model<MandateDoc>;
  private readonly ledger: Model<MandateLedgerDoc>;
  private readonly spends: Model<MandateSpendDoc>;

  constructor(conn: Connection, private readonly logs: ActivityLog) {
    this.mandates = conn.models.Mandate ?? conn.model<MandateDoc>('Mandate', mandateSchema, 'mandates');
    this.ledger = conn.models.MandateLedger ?? conn.model<MandateLedgerDoc>('MandateLedger', mandateLedgerSchema, 'mandate_ledger');
    this.spends = conn.models.MandateSpend ?? conn.model<MandateSpendDoc>('MandateSpend', mandateSpendSchema, 'mandate_spends');
  }

  async create(owner: MandateOwner, input: CreateMandateInput): Promise<MandateDoc> {
    if (input.maxPerCallAtomic > input.dailyCapAtomic) throw new AppError(400, 'validation_error', 'body.maxPerCallUsdc: must not exceed dailyCapUsdc');
    if (input.validUntil.getTime() <= Date.now()) throw new AppError(400, 'validation_error', 'body.validUntil: must be in the future');
    const doc: MandateDoc = {
      _id: newId('mdt'), orgId: owner.orgId, identityId: owner.identityId,
      maxPerCallAtomic: Number(input.maxPerCallAtomic), dailyCapAtomic: Number(input.dailyCapAtomic), validUntil: input.validUntil,
      allowedHosts: input.allowedHosts?.length ? input.allowedHosts.map((h) => h.toLowerCase()) : null, createdAt: new Date(),
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
    if (!doc) return this.get(owner, id); // already revoked (or not ours: 404)
    await this.logs.record({ ...owner, action: 'payments.mandate_revoked', category: 'payments', severity: 'warning', description: `Mandate ${id} revoked`, targetType: 'mandate', targetId: id });
    return doc;
  }

  /** Today's spend (reserved and in flight included), lifetime spend and paid calls. */
  async usage(mandate: MandateDoc, now = new Date()): Promise<MandateUsage> {
    const [last, spends] = await Promise.all([this.lastStep(mandate._id, utcDay(now)), this.spends.find({ mandateId: mandate._id }, { amount: 1, createdAt: 1 }).lean()]);
    const lastUsedAt = spends.reduce<Date | undefined>((latest, s) => (!latest || s.createdAt > latest ? s.createdAt : latest), undefined);
    return { spentToday: last?.spentAfter ?? 0, totalSpent: spends.reduce((sum, s) => sum + s.amount, 0), callCount: spends.filter((s) => !String(s._id).includes(':back:')).length, lastUsedAt };
  }

  async present(mandate: MandateDoc) {
    return presentMandate(mandate, await this.usage(mandate));
  }

  /**
   * Picks a mandate that allows `amount` to `url` and reserves the amount on it. With several mandates
   * the newest that fits pays. A refusal names the most specific reason. `url` null: the money goes to
   * no host (a refund a seller gives from the wallet), which only a mandate not limited to hosts allows.
   */
  async reserve(owner: MandateOwner, url: URL | null, amount: bigint, options: { mandateId?: string } = {}): Promise<{ ok: true; reservation: Reservation; mandate: MandateDoc } | PayRefusal> {
    const now = new Date();
    const all = options.mandateId
      ? await this.mandates.find({ _id: options.mandateId, identityId: owner.identityId }).lean()
      : await this.list(owner);
    if (all.length === 0) {
      return refusal('mandate_not_found', options.mandateId ? `mandate ${options.mandateId} not found` : `this identity has no spending mandate; create one with ${CREATE_MANDATE}`);
    }
    const live = all.filter((m) => !m.revokedAt && m.validUntil > now);
    if (live.length === 0) {
      return all.some((m) => !m.revokedAt)
        ? refusal('mandate_expired', `every mandate of this identity has expired; create a new one with ${CREATE_MANDATE}`)
        : refusal('mandate_revoked', `every mandate of this identity is revoked; create a new one with ${CREATE_MANDATE}`);
    }
    const forHost = live.filter((m) => (url ? hostAllowed(m.allowedHosts, url) : !m.allowedHosts?.length));
    if (forHost.length === 0) return refusal('mandate_host_not_allowed', url ? `no active mandate allows paying ${url.host}` : `every active mandate of this identity is limited to allowedHosts, and a refund pays no host; create one without allowedHosts with ${CREATE_MANDATE}`);

    let last: PayRefusal | undefined;
    for (const mandate of forHost) {
      if (amount > BigInt(mandate.maxPerCallAtomic)) {
        last ??= refusal('mandate_per_call_exceeded', `the price ${formatUsdc(amount)} USDC is over the mandate's per-call limit of ${formatUsdc(BigInt(mandate.maxPerCallAtomic))} USDC`);
        continue;
      }
      const outcome = await this.reserveOn(mandate, Number(amount), now);
      if (outcome.ok) return { ok: true, reservation: outcome.reservation, mandate };
      if (outcome.code === 'mandate_daily_cap_exceeded' || !last) last = outcome;
    }
    return last!;
  }

  private async reserveOn(mandate: MandateDoc, amount: number, now: Date): Promise<{ ok: true; reservation: Reservation } | PayRefusal> {
    const reservation: Reservation = { reservationId: newId('rsv'), mandateId: mandate._id, day: utcDay(now), amount };
    const appended = await this.append(reservation, amount, (spent) => spent + amount <= mandate.dailyCapAtomic);
    if (appended.ok) return { ok: true, reservation };
    return refusal('mandate_daily_cap_exceeded', `paying ${formatUsdc(BigInt(amount))} USDC would exceed the daily cap of ${formatUsdc(BigInt(mandate.dailyCapAtomic))} USDC (${formatUsdc(BigInt(Math.max(0, mandate.dailyCapAtomic - appended.spent)))} USDC left today)`);
  }

  /** Gives a failed payment's amount back to the day it was reserved on (a later day starts at zero anyway). */
  async release(reservation: Reservation): Promise<void> {
    await this.append({ ...reservation, reservationId: `${reservation.reservationId}:release` }, -reservation.amount, () => true);
  }

  /**
   * The reservation became a payment. `charged`: an upto payment reserved its maximum and was charged
   * less; the difference goes back to the day, and the spend counts what was charged.
   */
  async commit(reservation: Reservation, charged?: bigint): Promise<MandateDoc | null> {
    const amount = charged === undefined ? reservation.amount : Math.min(reservation.amount, Number(charged));
    if (amount < reservation.amount) await this.append({ ...reservation, reservationId: `${reservation.reservationId}:unused` }, amount - reservation.amount, () => true);
    try {
      await this.spends.create({ _id: reservation.reservationId, mandateId: reservation.mandateId, amount, createdAt: new Date() });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
    // No write to the mandate itself: on FerretDB it could undo a concurrent revocation. lastUsedAt is
    // derived from the spends.
    return this.mandates.findById(reservation.mandateId).lean();
  }

  /**
   * Gives back part of a payment the mandate counted (an auth-capture payment voided or refunded):
   * once per `key` (a unique insert of a negative spend), then off the day it was reserved on.
   */
  async giveBack(reservation: Pick<Reservation, 'reservationId' | 'mandateId' | 'day'>, amount: bigint, key: string): Promise<void> {
    if (amount <= 0n) return;
    try {
      await this.spends.create({ _id: `${reservation.reservationId}:back:${key}`, mandateId: reservation.mandateId, amount: -Number(amount), createdAt: new Date() });
    } catch (err) {
      if (isDuplicateKey(err)) return; // given back already
      throw err;
    }
    await this.append({ ...reservation, amount: 0, reservationId: `${reservation.reservationId}:back:${key}` }, -Number(amount), () => true);
  }

  private lastStep(mandateId: string, day: string) {
    return this.ledger.findOne({ mandateId, day }).sort({ seq: -1 }).lean();
  }

  /**
   * Appends `delta` as the next step of the day's ledger if `allowed(spentBefore)`. Losing the race for a
   * step number means someone else changed the total: read it again and retry.
   */
  private async append(reservation: Reservation, delta: number, allowed: (spentBefore: number) => boolean): Promise<{ ok: true } | { ok: false; spent: number }> {
    for (let attempt = 0; attempt < MAX_APPEND_ATTEMPTS; attempt++) {
      const last = await this.lastStep(reservation.mandateId, reservation.day);
      const spent = last?.spentAfter ?? 0;
      if (!allowed(spent)) return { ok: false, spent };
      const seq = (last?.seq ?? 0) + 1;
      try {
        await this.ledger.create({
          _id: `${reservation.mandateId}:${reservation.day}:${seq}`, mandateId: reservation.mandateId, day: reservation.day, seq,
          delta, spentAfter: Math.max(0, spent + delta), reservationId: reservation.reservationId, createdAt: new Date(),
        });
        return { ok: true };
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        await pause(Math.random() * Math.min(20, 2 + attempt));
      }
    }
    throw new AppError(503, 'mandate_busy', 'too many concurrent payments on this mandate; try again');
  }
}

/** How an agent makes a mandate, named for both doors: refusals tell it what to do next. */
const CREATE_MANDATE = 'payments_create_mandate (POST /v0/payments/mandates)';

function refusal(code: PayRefusal['code'], message: string): PayRefusal {
  return { ok: false, code, message };
}
