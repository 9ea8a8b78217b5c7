// Relayer leases and the registry of processes on the real test database (FerretDB unless MONGODB_URI
// points at MongoDB): one holder per account however many processes race for it, expiry and hand-over, a
// late holder that stops; who is live, and how the pool is divided among them.
import { randomBytes } from 'node:crypto';
import { RelayerLeases } from '../../server/settlement/relayer-leases.js';
import { SettlementRegistry } from '../../server/settlement/registry.js';
import { fairShares } from '../../server/settlement/relayer-pool.js';
import { useTestConnection } from '../support/server.js';

const conn = useTestConnection();

const ADDRESS = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';

/** A process's view of the leases, with a clock the test moves. */
function processWith(clock: { now: number }, times = { ttlMs: 10_000, skewMs: 1_000 }) {
  return new RelayerLeases(conn(), `test:${randomBytes(4).toString('hex')}`, times, () => clock.now);
}

it('of 20 processes racing for a free account, exactly one gets it, in every round', async () => {
  for (let round = 0; round < 5; round++) {
    const address = `0x${String(round).padStart(40, 'a')}`;
    const clock = { now: Date.now() };
    const racers = Array.from({ length: 20 }, () => processWith(clock));
    const seen = await racers[0]!.newest([address]);
    const won = await Promise.all(racers.map((r) => r.acquire(address, seen.get(address.toLowerCase()))));
    expect(won.filter(Boolean)).toHaveLength(1);
    const newest = await racers[0]!.newest([address]);
    expect(newest.get(address.toLowerCase())).toMatchObject({ generation: 1 });
  }
});

it('a live lease is not taken; an expired one is, only after the skew margin, by one process; the old holder then stops', async () => {
  const clock = { now: Date.now() };
  const [first, second, third] = [processWith(clock), processWith(clock), processWith(clock)];
  const held = (await first.acquire(ADDRESS, (await first.newest([ADDRESS])).get(ADDRESS.toLowerCase())))!;
  expect(held).toMatchObject({ generation: 1 });
  // The holder stops sending a skew margin before the lease expires.
  expect(held.validUntil).toBe(clock.now + 9_000);

  const view = async () => (await second.newest([ADDRESS])).get(ADDRESS.toLowerCase());
  expect(second.isFree(await view())).toBe(false);
  expect(await second.acquire(ADDRESS, await view())).toBeUndefined();

  // Expired, but within the margin: still not free (the holder's clock may be behind ours).
  clock.now += 10_500;
  expect(second.isFree(await view())).toBe(false);
  // Past the margin: free, and of two processes taking it over, one wins the next generation.
  clock.now += 1_000;
  const seen = await view();
  const [a, b] = await Promise.all([second.acquire(ADDRESS, seen), third.acquire(ADDRESS, seen)]);
  expect([a, b].filter(Boolean)).toHaveLength(1);
  expect((a ?? b)!.generation).toBe(2);

  // The first holder comes back from its pause: its renewal finds the successor, so it must stop.
  expect(await first.renew(held)).toBeUndefined();
});

it('a holder that renews in time keeps the lease; a released lease is free at once', async () => {
  const clock = { now: Date.now() };
  const [holder, other] = [processWith(clock), processWith(clock)];
  const address = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
  let lease = (await holder.acquire(address, undefined))!;
  for (let i = 0; i < 3; i++) {
    clock.now += 5_000;
    lease = (await holder.renew(lease))!;
    expect(lease).toBeDefined();
    expect(lease.validUntil).toBe(clock.now + 9_000);
    expect(await other.acquire(address, (await other.newest([address])).get(address.toLowerCase()))).toBeUndefined();
  }
  await holder.release(lease);
  const taken = await other.acquire(address, (await other.newest([address])).get(address.toLowerCase()));
  expect(taken).toMatchObject({ generation: 2 });
});

it('the registry shows live processes and the lanes they hold; one that stops heartbeating drops out, one that leaves at once', async () => {
  const clock = { now: Date.now() };
  const registry = (name: string) => new SettlementRegistry(conn(), name, { ttlMs: 10_000, skewMs: 1_000, heartbeatMs: 60_000, refreshMs: 0 }, () => clock.now);
  const [a, b, c] = [registry('reg-a'), registry('reg-b'), registry('reg-c')];
  const report = (lanes: string[]) => () => ({
    role: 'serve' as const, accepts: true, pool: ['0xaa', '0xbb'], lanes: lanes.map((address) => ({ address, state: 'active' as const, inFlight: 0 })),
    queued: 0, oldestQueuedMs: 0, posts: {},
  });
  await a.join(report(['0xaa']));
  await b.join(report(['0xbb']));
  await c.join(report([]));
  let view = await a.refresh();
  expect(view.live.map((p) => p._id).filter((id) => id.startsWith('reg-')).sort()).toEqual(['reg-a', 'reg-b', 'reg-c']);
  expect(view.lanes.get('0xaa')).toMatchObject({ holder: 'reg-a', state: 'active' });
  expect(view.lanes.get('0xbb')).toMatchObject({ holder: 'reg-b' });
  expect(view.pool).toEqual(['0xaa', '0xbb']);

  await c.leave();
  view = await a.refresh();
  expect(view.live.map((p) => p._id)).not.toContain('reg-c');
  // Gone, but still listed among all registrations: its inbox entries may still wait for a lane.
  expect(view.all.map((p) => p._id)).toContain('reg-c');

  clock.now += 12_000; // past the TTL and the margin: processes that stopped heartbeating are no longer live
  view = await a.refresh();
  expect(view.live.filter((p) => p._id.startsWith('reg-'))).toEqual([]);
  expect(view.lanes.size).toBe(0);
  await Promise.all([a.leave(), b.leave()]);
});

it('divides the pool evenly, the remainder to the processes that hold the most already, the same for everyone', () => {
  const holding = new Map([['p1', 3], ['p2', 0]]);
  expect(Object.fromEntries(fairShares(3, ['p1'], new Map()))).toEqual({ p1: 3 });
  // A process that started alone and took all three keeps two when a second joins; the second gets one.
  expect(Object.fromEntries(fairShares(3, ['p2', 'p1'], holding))).toEqual({ p1: 2, p2: 1 });
  // Two keys among four processes: two get one each, the others none, and who gets them does not move.
  expect(Object.fromEntries(fairShares(2, ['d', 'c', 'b', 'a'], new Map([['c', 1], ['d', 1]])))).toEqual({ c: 1, d: 1, a: 0, b: 0 });
  expect(Object.fromEntries(fairShares(4, ['a', 'b'], new Map()))).toEqual({ a: 2, b: 2 });
});
