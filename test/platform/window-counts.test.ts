// The counts behind request and mail-send limits on their own: two connections to one database stand in
// for two processes of a deployment. Their periodic sync is off unless a test runs it, so what one process
// sees of the other is only what the counting itself wrote. (The deployment as users run it, 2 serve behind
// a round-robin balancer: test/cluster/rate-limits.test.ts.)
import { WindowCounts } from '../../server/platform/limits/window-counts.js';
import { processConnections } from '../support/connections.js';

const connections = processConnections(3);

const HOUR = 3_600_000;
/** `live` processes counting one window of an hour (no test crosses its end but by a rare chance), never syncing by themselves. */
const processes = (live: number) => connections().slice(0, live).map((conn, i) => new WindowCounts(conn, {
  id: `process-${i}`, liveCount: () => live, liveIds: async () => new Set(Array.from({ length: live }, (_, j) => `process-${j}`)),
}, HOUR, { syncEveryMs: HOUR }));
const twoProcesses = () => processes(2) as [WindowCounts, WindowCounts];
const ok = async (take: ReturnType<WindowCounts['take']>) => (await take).ok;
const countsOf = async (bucket: string) => connections()[0]!.collection('rate_limit_counts').find({ bucket }).toArray();
const stored = async (bucket: string) => (await countsOf(bucket)).map((d) => [d.process, d.count]).sort();

it('a burst alternating between two processes, one request at a time, is admitted exactly the limit: what either admitted without a round trip is seen by the other before it counts near the limit', async () => {
  const [a, b] = twoProcesses();
  const bucket = `key:${Math.random()}`;
  let admitted = 0;
  for (let i = 0; i < 60; i++) if (await ok((i % 2 ? b : a).take(bucket, 40))) admitted++;
  expect(admitted).toBe(40);
  expect(await stored(bucket)).toEqual([['process-0', 20], ['process-1', 20]]);
  await Promise.all([a.stop(), b.stop()]);
});

it('each process admits its share of half the limit without waiting (an answer at hand, not a promise), and counts exactly after it', async () => {
  const [a, b, c] = processes(3);
  const bucket = `key:${Math.random()}`;
  // Three live processes: a share of half of 42 is 7 each.
  const takes = Array.from({ length: 8 }, () => a.take(bucket, 42));
  expect(takes.map((t) => t instanceof Promise)).toEqual([false, false, false, false, false, false, false, true]);
  // The others' shares spent too, so the eighth does not wait for them to close the bucket.
  for (const other of [b, c]) for (let i = 0; i < 7; i++) expect(other.take(bucket, 42)).toMatchObject({ ok: true });
  expect(await Promise.all(takes.map(ok))).toEqual(Array(8).fill(true));
  // The seventh, the last of the share, wrote the count at once (the bucket closed); the eighth was counted exactly.
  expect(await stored(bucket)).toEqual([['process-0', 8], ['process-1', 7], ['process-2', 7]]);
  await Promise.all([a, b, c].map((p) => p.stop()));
});

it('before its first exact count, a process waits for every other live process to close the bucket, so what they admitted without a round trip is counted', async () => {
  const [a, b, c] = processes(3);
  const bucket = `key:${Math.random()}`;
  // c admits 3 on its fast path: not written (its periodic sync is off here), unseen by the others; b admits none.
  for (let i = 0; i < 3; i++) expect(c.take(bucket, 40)).toMatchObject({ ok: true });
  // a spends its share and goes on counting exactly, one request at a time (none in flight together).
  let admittedByA = 0;
  const burst = (async () => { for (let i = 0; i < 50; i++) if (await ok(a.take(bucket, 40))) admittedByA++; })();
  // a waits for b and c (up to 2 s, for a process that died): without that wait, it counted its burst in the
  // meantime, reading no count of c's, and admitted 40 on top of c's 3.
  await Promise.race([burst, new Promise((resolve) => setTimeout(resolve, 700))]);
  // Then b and c sync, as they do every 250 ms: each sees the bucket closed by a and closes it too, c writing its 3.
  expect((await countsOf(bucket)).filter((d) => d.closed).map((d) => d.process)).toEqual(['process-0']);
  await Promise.all([b.sync(), c.sync()]);
  await burst;
  expect(admittedByA).toBe(37);
  expect(await stored(bucket)).toEqual([['process-0', 37], ['process-1', 0], ['process-2', 3]]);
  // c counts exactly from now on: the window is full.
  expect(await ok(c.take(bucket, 40))).toBe(false);
  await Promise.all([a, b, c].map((p) => p.stop()));
});

it('a process counted live that never closes the bucket (it died a moment ago) holds the first exact count 2 s at most, and the log names it', async () => {
  const warned: Array<{ notClosed: string[] }> = [];
  const [conn] = connections();
  const a = new WindowCounts(conn!, { id: 'process-0', liveCount: () => 2, liveIds: async () => new Set(['process-0', 'gone']) }, HOUR,
    { syncEveryMs: HOUR, log: { warn: (fields: { notClosed: string[] }) => { warned.push(fields); } } as never });
  const bucket = `key:${Math.random()}`;
  let admitted = 0;
  for (let i = 0; i < 12; i++) if (await ok(a.take(bucket, 40))) admitted++;
  expect(admitted).toBe(12);
  // Waited once for the bucket and window, not at every exact count.
  expect(warned).toEqual([expect.objectContaining({ notClosed: ['gone'] })]);
  await a.stop();
});

it('eight requests in flight at once across two processes: a burst of 120 is admitted 40 times, give or take those in flight', async () => {
  const [a, b] = twoProcesses();
  const bucket = `key:${Math.random()}`;
  let next = 0;
  let admitted = 0;
  await Promise.all(Array.from({ length: 8 }, async (_, lane) => {
    while (next < 120) { next++; if (await ok((lane % 2 ? b : a).take(bucket, 40))) admitted++; }
  }));
  expect(admitted).toBeGreaterThanOrEqual(40);
  expect(admitted).toBeLessThanOrEqual(48);
  await Promise.all([a.sync(), b.sync()]);
  const counts = await stored(bucket);
  expect(counts.reduce((sum, [, c]) => sum + Number(c), 0)).toBe(admitted);
  await Promise.all([a.stop(), b.stop()]);
});

it('what is admitted while a sync is writing is written by the next sync', async () => {
  const [a] = processes(1);
  const bucket = `key:${Math.random()}`;
  for (let i = 0; i < 3; i++) expect(await ok(a.take(bucket, 1000))).toBe(true);
  const syncing = a.sync();
  for (let i = 0; i < 2; i++) expect(await ok(a.take(bucket, 1000))).toBe(true);
  await syncing;
  await a.sync();
  expect(await stored(bucket)).toEqual([['process-0', 5]]);
  await a.stop();
});

