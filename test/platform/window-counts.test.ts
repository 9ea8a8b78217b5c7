// The counts behind request and mail-send limits on their own: two connections to one database stand in
// for two processes of a deployment. Their periodic sync is off unless a test runs it, so what one process
// sees of the other is only what the counting itself wrote. (The deployment as users run it, 2 serve behind
// a round-robin balancer: test/cluster/rate-limits.test.ts.)
import { WindowCounts } from '../../server/platform/limits/window-counts.js';
import { processConnections } from '../support/connections.js';

const connections = processConnections(2);

const HOUR = 3_600_000;
/** Two processes counting one window of an hour (no test crosses its end but by a rare chance), never syncing by themselves. */
const twoProcesses = (live = 2) => connections().map((conn, i) => new WindowCounts(conn, { id: `process-${i}`, liveCount: () => live }, HOUR, HOUR)) as [WindowCounts, WindowCounts];
const ok = async (take: ReturnType<WindowCounts['take']>) => (await take).ok;
const stored = async (bucket: string) => (await connections()[0]!.collection('rate_limit_counts').find({ bucket }).toArray()).map((d) => [d.process, d.count]).sort();

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
  const [a, b] = twoProcesses(4);
  const bucket = `key:${Math.random()}`;
  // Four live processes: a share of half of 40 is 5 each.
  const takes = Array.from({ length: 6 }, () => a.take(bucket, 40));
  expect(takes.map((t) => t instanceof Promise)).toEqual([false, false, false, false, false, true]);
  expect(await Promise.all(takes.map(ok))).toEqual(Array(6).fill(true));
  // The fifth, the last of the share, wrote the count at once; the sixth was counted exactly.
  expect(await stored(bucket)).toEqual([['process-0', 6]]);
  await Promise.all([a.stop(), b.stop()]);
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
  const [a, b] = twoProcesses(1);
  const bucket = `key:${Math.random()}`;
  for (let i = 0; i < 3; i++) expect(await ok(a.take(bucket, 1000))).toBe(true);
  const syncing = a.sync();
  for (let i = 0; i < 2; i++) expect(await ok(a.take(bucket, 1000))).toBe(true);
  await syncing;
  await a.sync();
  expect(await stored(bucket)).toEqual([['process-0', 5]]);
  await Promise.all([a.stop(), b.stop()]);
});
