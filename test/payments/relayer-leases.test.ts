// Relayer leases on the real test database (FerretDB unless MONGODB_URI points at MongoDB): one holder per
// account however many processes race for it, expiry and hand-over, and a late holder that stops.
import { RelayerLeases } from '../../server/payments/relayer-leases.js';
import { useTestConnection } from '../support/server.js';

const conn = useTestConnection();

const ADDRESS = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';

/** A process's view of the leases, with a clock the test moves. */
function processWith(clock: { now: number }, times = { ttlMs: 10_000, skewMs: 1_000 }) {
  return new RelayerLeases(conn(), times, () => clock.now);
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

it('counts live members for the fair share; a member that stops heartbeating drops out', async () => {
  const clock = { now: Date.now() };
  const members = [processWith(clock), processWith(clock), processWith(clock)];
  const before = await members[0]!.liveMembers();
  await Promise.all(members.map((m) => m.heartbeatMember()));
  expect(await members[0]!.liveMembers()).toBe(before + 3);
  await members[2]!.leaveMembership();
  expect(await members[0]!.liveMembers()).toBe(before + 2);
  clock.now += 12_000; // past the TTL and the margin: members that stopped heartbeating no longer count
  expect(await members[0]!.liveMembers()).toBe(0);
});
