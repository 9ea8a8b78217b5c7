/** What the test reads the vouchers through: the app's mongoose connection (app.db) or a driver Db. */
type Db = { collection(name: string): { find(filter: object): { toArray(): Promise<Array<Record<string, unknown>>> } } };

/** A voucher as the seller's records show it (the stored fields, and its capture's). */
export type StoredVoucher = { _id: string; cumulative: string; charged?: string; amount?: string; status: string; seq: number; holdToken?: string } & Record<string, any>;

/**
 * A channel's vouchers as the seller's records show them, by number: a held voucher whose capture was
 * written (`channel_captures`, keyed by its hold id; the voucher itself is never updated) is captured,
 * with what its capture charged.
 */
export async function channelVouchers(db: Db, channelId: string): Promise<StoredVoucher[]> {
  const stored = await db.collection('channel_vouchers').find({ channelId: channelId.toLowerCase() }).toArray();
  const holdIds = stored.filter((v) => v.status === 'held').map((v) => `${v._id}:${v.holdToken}`);
  const captures = new Map((holdIds.length ? await db.collection('channel_captures').find({ _id: { $in: holdIds } }).toArray() : []).map((c) => [c._id, c]));
  return stored.map((v) => {
    const capture = v.status === 'held' ? captures.get(`${v._id}:${v.holdToken}`) : undefined;
    if (!capture) return v as StoredVoucher;
    const { _id, createdAt, orgId, ...charges } = capture;
    return { ...v, ...charges, status: 'captured' } as StoredVoucher;
  }).sort((a, b) => a.seq - b.seq);
}

/** The channel's newest voucher, once it is held (its call being answered). */
export async function heldVoucher(db: Db, channelId: string, timeoutMs = 30_000): Promise<StoredVoucher> {
  for (const deadline = Date.now() + timeoutMs; ;) {
    const held = (await channelVouchers(db, channelId)).at(-1);
    if (held?.status === 'held') return held;
    if (Date.now() > deadline) throw new Error(`no call on channel ${channelId} was held within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A channel's vouchers once no more than `heldStill` of them are held. Our seller middleware answers a paid
 * call without waiting for its capture's write (middleware/schemes/batch-settlement/evm/seller.ts), which lands moments later:
 * a test that reads the seller's records or runs the sweep right after its calls waits for it, as a
 * seller's own look a moment later would find it. Fails after `timeoutMs` saying what it saw.
 */
export async function vouchersOnceCaptured(db: Db, channelId: string, heldStill = 0, timeoutMs = 30_000): Promise<StoredVoucher[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await channelVouchers(db, channelId);
    const held = found.filter((v) => v.status === 'held').length;
    if (held <= heldStill) return found;
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs / 1000} s for the captures of channel ${channelId}: ${held} of its ${found.length} vouchers still held`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
