/** What the test reads the vouchers through: the app's mongoose connection (app.db) or a driver Db. */
type Db = { collection(name: string): { find(filter: object): { toArray(): Promise<Array<Record<string, unknown>>> } } };

/**
 * A channel's vouchers once no more than `heldStill` of them are held. Our seller middleware answers a paid
 * call without waiting for its capture's write (middleware/channel-payment.ts), which lands moments later:
 * a test that reads the seller's records or runs the sweep right after its calls waits for it, as a
 * seller's own look a moment later would find it. Fails after `timeoutMs` saying what it saw.
 */
export async function vouchersOnceCaptured(db: Db, channelId: string, heldStill = 0, timeoutMs = 30_000): Promise<Array<{ cumulative: string; charged?: string; status: string; seq: number }>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = (await db.collection('channel_vouchers').find({ channelId: channelId.toLowerCase() }).toArray())
      .map((v) => ({ cumulative: v.cumulative as string, charged: v.charged as string | undefined, status: v.status as string, seq: v.seq as number }))
      .sort((a, b) => a.seq - b.seq);
    const held = found.filter((v) => v.status === 'held').length;
    if (held <= heldStill) return found;
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs / 1000} s for the captures of channel ${channelId}: ${held} of its ${found.length} vouchers still held`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
