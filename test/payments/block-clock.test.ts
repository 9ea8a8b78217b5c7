import { createPublicClient, http } from 'viem';
import { startAnvil, type AnvilNode } from '../../server/dev/chain/anvil.js';
import { BlockClock } from '../../server/settlement/block-clock.js';

let node: AnvilNode;
beforeAll(async () => { node = await startAnvil({ blockTime: 1 }); });
afterAll(async () => { await node?.stop(); });

/** Polls `condition` until it holds; fails saying what it waited for after a deadline generous for a loaded machine. */
async function until(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !(await condition());) {
    if (Date.now() > deadline) throw new Error(`still waiting after ${timeoutMs} ms for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('BlockClock on a chain too young for a cadence hint', () => {
  let manual: AnvilNode;
  beforeAll(async () => { manual = await startAnvil(); });
  afterAll(async () => { await manual?.stop(); });

  it('gets the hint once the chain has the blocks, before the clock could have measured a cadence', async () => {
    // Blocks mined by the test, with timestamps a second apart, each only once the clock has seen the one
    // before: which blocks the clock sees does not depend on how fast this machine is.
    const client = createPublicClient({ transport: http(manual.rpcUrl) });
    await client.request({ method: 'anvil_setBlockTimestampInterval' as never, params: [1] as never });
    const mine = () => client.request({ method: 'evm_mine' as never });
    for (let i = 0; i < 4; i++) await mine();
    const clock = new BlockClock(client as never, { busyPollMs: 50, warmUpMs: 60_000 });
    const sightings: bigint[] = [];
    clock.onBlock((block) => sightings.push(block));
    clock.start();
    try {
      await until('the clock to see block 4', () => clock.latest === 4n);
      await mine();
      await until('the clock to see block 5', () => clock.latest === 5n);
      // Started at block 4: the hint, six blocks of timestamps, could not be read then.
      expect(clock.intervalMs).toBeUndefined();
      await mine();
      await until('the clock to see block 6', () => clock.latest === 6n);
      await mine();
      await until('the clock to see block 7', () => clock.latest === 7n);
      // Four sightings, three gaps: the clock measures a cadence from four consecutive gaps of its own, so
      // what it knows comes from the chain's timestamps (read once block 6 is there), whole seconds.
      expect(sightings).toEqual([4n, 5n, 6n, 7n]);
      await until('the hint to be read', () => clock.intervalMs !== undefined);
      expect(clock.intervalMs).toBe(1000);
      // (When the next block is due also needs the phase, which takes close asks around a block: the tests
      // below cover it.)
    } finally {
      clock.stop();
    }
  });
});

describe('BlockClock on a chain that mines every second', () => {
  it('while busy, it asks just after each block is due rather than only every busyPollMs', async () => {
    const client = createPublicClient({ transport: http(node.rpcUrl) });
    while ((await client.getBlockNumber({ cacheTime: 0 })) < 7n) await new Promise((r) => setTimeout(r, 100));
    // Polls every 3 s: on a chain of 1 s blocks that alone would see at most two of the next four blocks.
    const clock = new BlockClock(client as never, { busyPollMs: 3_000, warmUpMs: 60_000 });
    const sightings: bigint[] = [];
    clock.onBlock((block) => sightings.push(block));
    clock.start();
    try {
      await until('the clock to know when the next block is due', () => clock.nextBlockAt() !== undefined);
      // The first poll after the cadence is known may still be the 3 s one: from the first two sightings
      // of consecutive blocks after that (which polls every 3 s would never give), the next blocks.
      const known = sightings.length;
      const consecutive = () => sightings.length >= known + 2 && sightings.at(-1) === sightings.at(-2)! + 1n;
      await until('two consecutive blocks seen', consecutive);
      const from = sightings.length - 1;
      await until('four more sightings', () => sightings.length >= from + 4);
      const seen = sightings.slice(from);
      for (let i = 1; i < seen.length; i++) expect(seen[i]).toBe(seen[i - 1]! + 1n);
    } finally {
      clock.stop();
    }
  });
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
      // On time until the clock has kept pace with the last three blocks: a loaded machine (a full CI run)
      // can stall it past a block or two, and the late block below is only telling once it keeps pace.
      const keepingPace = () => mined.slice(-3).every((n) => sightings.includes(n));
      for (let i = 8; !keepingPace() && i <= 30; i++) mined.push(await mineAt(i * 1_000));
      const due = Math.round((Date.now() - start) / 1_000) * 1_000 + 1_000;
      // The next comes 200 ms late (a node serving its head late, a timer that drifts), the ones after on time.
      const late = await mineAt(due + 200);
      mined.push(late, await mineAt(due + 1_000), await mineAt(due + 2_000));
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
  });
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

      // When the clock saw each block (its listeners are told in the same tick as it reads its answer).
      const arrivals = new Map<bigint, number>();
      clock.onBlock((block) => arrivals.set(block, Date.now()));
      // A block arrives a second after the last one; asked every few ms meanwhile, the clock pins the phase to
      // its arrival when two of its asks bracket it closely enough. On a CPU-starved machine two asks can be
      // too far apart for that: the clock then still names no next block, and the next arrival is another
      // chance (three at most: with four gaps the clock would measure the test's own cadence instead).
      let asked = 0;
      let seen = clock.latest!;
      for (let attempt = 0; attempt < 3 && !clock.phaseKnown; attempt++) {
        await new Promise((r) => setTimeout(r, attempt === 0 ? 400 : 1_000));
        asked = Date.now();
        await mine();
        seen += 1n;
        await until(`the clock to see block ${seen}`, () => clock.latest! >= seen);
        if (!clock.phaseKnown) expect(clock.nextBlock()).toBeUndefined();
      }
      // Asked every few ms until a block arrived between two asks: the phase is pinned to that arrival.
      expect(clock.phaseKnown).toBe(true);
      const next = clock.nextBlock()!;
      expect(next.number).toBe(seen + 1n);
      // Never before the block can come (it was made after `asked`), and no later than when the clock saw it
      // arrive: the cut-off is that arrival's, not a projection from earlier sightings. (How close that is
      // to the block's making, milliseconds on an idle machine, is a figure for the bench.)
      expect(next.at).toBeGreaterThanOrEqual(asked + 1000);
      expect(next.at).toBeLessThanOrEqual(arrivals.get(seen)! + 1000);
    } finally {
      clock.stop();
    }
  });
});
