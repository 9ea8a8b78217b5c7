import { createPublicClient, http } from 'viem';
import { startAnvil, type AnvilNode } from '../../server/dev/chain/anvil.js';
import { BlockClock } from '../../server/settlement/block-clock.js';

let node: AnvilNode;
beforeAll(async () => { node = await startAnvil({ blockTime: 1 }); });
afterAll(async () => { await node?.stop(); });

describe('BlockClock on a chain that mines every second', () => {
  it('a chain too young for a cadence hint at start gets it once it has the blocks, before the clock could have measured one', async () => {
    const client = createPublicClient({ transport: http(node.rpcUrl) });
    const head = async () => client.getBlockNumber({ cacheTime: 0 });
    while ((await head()) < 4n) await new Promise((r) => setTimeout(r, 50));
    const clock = new BlockClock(client as never, { busyPollMs: 50, warmUpMs: 60_000 });
    const sightings: bigint[] = [];
    clock.onBlock((block) => sightings.push(block));
    clock.start();
    try {
      while ((clock.latest ?? 0n) < 7n) await new Promise((r) => setTimeout(r, 20));
      // Started at block 4 (or 5): the hint, six blocks of timestamps, could not be read then. Blocks 4..7
      // are at most four sightings, three gaps, and the clock measures a cadence from four consecutive gaps
      // of its own: what it knows now comes from the chain's timestamps, whole seconds.
      expect(sightings[0]).toBeLessThan(6n);
      expect(sightings.length).toBeLessThanOrEqual(4);
      // (When the next block is due also needs the phase, which takes close asks around a block: a loaded
      // machine may not have made them yet. The tests below cover it.)
      expect(clock.intervalMs).toBe(1000);
    } finally {
      clock.stop();
    }
  });

  it('while busy, it asks just after each block is due rather than only every busyPollMs', async () => {
    const client = createPublicClient({ transport: http(node.rpcUrl) });
    while ((await client.getBlockNumber({ cacheTime: 0 })) < 7n) await new Promise((r) => setTimeout(r, 100));
    // Polls every 3 s: on a chain of 1 s blocks that alone would see at most two of the next four blocks.
    const clock = new BlockClock(client as never, { busyPollMs: 3_000, warmUpMs: 60_000 });
    const sightings: bigint[] = [];
    clock.onBlock((block) => sightings.push(block));
    clock.start();
    try {
      while (clock.nextBlockAt() === undefined) await new Promise((r) => setTimeout(r, 20));
      // The first poll after the cadence is known may still be the 3 s one.
      await new Promise((r) => setTimeout(r, 3_200));
      const from = sightings.length;
      await new Promise((r) => setTimeout(r, 4_000));
      const seen = sightings.slice(from);
      expect(seen.length).toBeGreaterThanOrEqual(3);
      // One sighting per block: each block was asked for on its own, none skipped between two polls.
      for (let i = 1; i < seen.length; i++) expect(seen[i]).toBe(seen[i - 1]! + 1n);
    } finally {
      clock.stop();
    }
  }, 25_000);
});

describe('BlockClock on a chain whose block comes late', () => {
  let manual: AnvilNode;
  beforeAll(async () => { manual = await startAnvil(); });
  afterAll(async () => { await manual?.stop(); });

  it('asks again within moments for a block not there when due, rather than at the next block or poll', async () => {
    const client = createPublicClient({ transport: http(manual.rpcUrl) });
    // Blocks mined by hand every second, with timestamps a second apart (the clock's cadence hint).
    await client.request({ method: 'anvil_setBlockTimestampInterval' as never, params: [1] as never });
    const mine = () => client.request({ method: 'evm_mine' as never });
    for (let i = 0; i < 8; i++) await mine();
    // Polls every 3 s: what it sees in between, it sees by asking around each block's due time.
    const clock = new BlockClock(client as never, { busyPollMs: 3_000, warmUpMs: 60_000 });
    const sightings: bigint[] = [];
    clock.onBlock((block) => sightings.push(block));
    const start = Date.now();
    const mineAt = async (at: number) => {
      await new Promise((r) => setTimeout(r, Math.max(0, start + at - Date.now())));
      await mine();
      return client.getBlockNumber({ cacheTime: 0 });
    };
    clock.start();
    try {
      const mined: bigint[] = [];
      for (let i = 1; i <= 7; i++) mined.push(await mineAt(i * 1_000));
      // The eighth comes 200 ms late (a node serving its head late, a timer that drifts), the next ones on time.
      const late = await mineAt(8_200);
      mined.push(late, await mineAt(9_000), await mineAt(10_000));
      // The last block is seen by its due-time ask or, on a loaded machine, by the next 3 s poll at the latest.
      const deadline = Date.now() + 4_000;
      while (sightings.at(-1) !== mined.at(-1) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      // The late block was seen on its own: asked for again soon after it was due, not first at the next
      // block's due time (when both would have been there and the late one never seen as a new head).
      expect(sightings).toContain(late);
      expect(sightings).toContain(late + 1n);
      expect(sightings.at(-1)).toBe(mined.at(-1));
    } finally {
      clock.stop();
    }
  }, 25_000);
});

describe('BlockClock starting in the middle of a block', () => {
  let manual: AnvilNode;
  beforeAll(async () => { manual = await startAnvil(); });
  afterAll(async () => { await manual?.stop(); });

  it('holds nothing for a cut-off it cannot compute: no next block until one is seen to arrive, then the real one', async () => {
    const client = createPublicClient({ transport: http(manual.rpcUrl) });
    await client.request({ method: 'anvil_setBlockTimestampInterval' as never, params: [1] as never });
    const mine = () => client.request({ method: 'evm_mine' as never });
    for (let i = 0; i < 8; i++) await mine();
    // The chain's timestamps say one block a second; the clock starts 600 ms into a block.
    await new Promise((r) => setTimeout(r, 600));
    const clock = new BlockClock(client as never, { busyPollMs: 100, warmUpMs: 60_000 });
    clock.start();
    try {
      while (clock.intervalMs === undefined || clock.latest === undefined) await new Promise((r) => setTimeout(r, 10));
      expect(clock.intervalMs).toBe(1000);
      // It knows the cadence, not when the block it saw was made (up to a whole block before it looked):
      // it names no next block, so the settler sends at once rather than at a cut-off that may be past.
      expect(clock.phaseKnown).toBe(false);
      expect(clock.nextBlock()).toBeUndefined();

      await new Promise((r) => setTimeout(r, 400));
      const asked = Date.now();
      await mine();
      const minedAt = Date.now();
      const seen = clock.latest! + 1n;
      while (clock.latest! < seen) await new Promise((r) => setTimeout(r, 5));
      // Asked every few ms until a block arrived between two asks: the phase is pinned to that arrival.
      expect(clock.phaseKnown).toBe(true);
      const next = clock.nextBlock()!;
      expect(next.number).toBe(seen + 1n);
      // Never before the block can come, and well within the margin a batch leaves before it.
      expect(next.at).toBeGreaterThanOrEqual(asked + 1000);
      expect(next.at).toBeLessThanOrEqual(minedAt + 1000 + 150);
    } finally {
      clock.stop();
    }
  }, 30_000);
});
