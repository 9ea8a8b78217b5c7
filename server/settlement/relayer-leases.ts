import type { Collection, Connection } from 'mongoose';
import { isDuplicateKey } from '../platform/errors.js';

/**
 * One generation of one relayer account's lease. A process holds the account while its generation is the
 * newest and unexpired. Taking the account over is inserting the next generation: the unique `_id`
 * (`<address>#<generation>`) lets exactly one process win, on any engine (FerretDB 1.x makes no
 * conditional update atomic, so nothing here relies on one). Only the holder ever writes its own document
 * (heartbeats, release), and a holder that was too slow to heartbeat finds the next generation and stops.
 */
interface LeaseDoc {
  _id: string;
  address: string;
  generation: number;
  holder: string;
  acquiredAt: Date;
  expiresAt: Date;
  releasedAt?: Date;
}

export interface HeldLease {
  address: string;
  generation: number;
  /** Local time after which this process must not send from the account (it may have lost the lease). */
  validUntil: number;
}

export interface LeaseTimes {
  /** How long a lease lives without a heartbeat. */
  ttlMs: number;
  /**
   * Margin for clock skew between processes: a holder stops sending this long before its lease expires,
   * and another process takes it over only this long after.
   */
  skewMs: number;
}

/** lower-case address -> the newest generation document. */
type Newest = Map<string, LeaseDoc>;

export class RelayerLeases {
  private readonly leases: Collection<LeaseDoc>;
  private indexed: Promise<unknown> | undefined;

  /** `holder`: this process, as named in lease documents, the registry and logs (registry.ts processId). */
  constructor(conn: Connection, readonly holder: string, private readonly times: LeaseTimes, private readonly now: () => number = Date.now, suffix = '') {
    this.leases = conn.collection<LeaseDoc>(`relayer_leases${suffix}`) as unknown as Collection<LeaseDoc>;
  }

  private ensureIndexes(): Promise<unknown> {
    return (this.indexed ??= this.leases.createIndex({ address: 1, generation: -1 }));
  }

  /** The newest generation of each address in the pool. */
  async newest(addresses: string[]): Promise<Newest> {
    await this.ensureIndexes();
    const docs = await this.leases.find({ address: { $in: addresses.map((a) => a.toLowerCase()) } }).sort({ generation: -1 }).toArray();
    const newest: Newest = new Map();
    for (const doc of docs) if (!newest.has(doc.address)) newest.set(doc.address, doc);
    return newest;
  }

  /** Free: never leased, released, or expired for longer than the skew margin (its holder has stopped by then). */
  isFree(doc: LeaseDoc | undefined): boolean {
    return !doc || doc.releasedAt !== undefined || doc.expiresAt.getTime() + this.times.skewMs < this.now();
  }

  /** Whether `doc` is a live lease of another process. */
  heldByOther(doc: LeaseDoc | undefined): boolean {
    return !!doc && !this.isFree(doc) && doc.holder !== this.holder;
  }

  /** Tries to take `address` given the newest generation seen; undefined when another process won. */
  async acquire(address: string, seen: LeaseDoc | undefined): Promise<HeldLease | undefined> {
    if (!this.isFree(seen)) return undefined;
    const generation = (seen?.generation ?? 0) + 1;
    const start = this.now();
    const key = address.toLowerCase();
    try {
      await this.leases.insertOne({
        _id: `${key}#${generation}`, address: key, generation, holder: this.holder,
        acquiredAt: new Date(start), expiresAt: new Date(start + this.times.ttlMs),
      });
    } catch (err) {
      if (isDuplicateKey(err)) return undefined;
      throw err;
    }
    return { address: key, generation, validUntil: start + this.times.ttlMs - this.times.skewMs };
  }

  /**
   * Extends a held lease. Returns the lease with its new validity, or undefined when it was lost (a newer
   * generation exists: this process was too slow and another took over). Validity is counted from before
   * the write, so a slow write never stretches it.
   */
  async renew(lease: HeldLease): Promise<HeldLease | undefined> {
    const start = this.now();
    await this.leases.updateOne({ _id: `${lease.address}#${lease.generation}` }, { $set: { expiresAt: new Date(start + this.times.ttlMs) } });
    const successor = await this.leases.findOne({ address: lease.address, generation: { $gt: lease.generation } });
    if (successor) return undefined;
    return { ...lease, validUntil: start + this.times.ttlMs - this.times.skewMs };
  }

  /** Gives the account back at once (graceful stop or rebalancing), after this process stopped sending from it. */
  async release(lease: HeldLease): Promise<void> {
    await this.leases.updateOne({ _id: `${lease.address}#${lease.generation}`, holder: this.holder }, { $set: { releasedAt: new Date(this.now()) } });
  }

  /** How many live leases each holder has, for rebalancing. */
  holders(newest: Newest): Map<string, number> {
    const counts = new Map<string, number>();
    for (const doc of newest.values()) if (!this.isFree(doc)) counts.set(doc.holder, (counts.get(doc.holder) ?? 0) + 1);
    return counts;
  }
}
