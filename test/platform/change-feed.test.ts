// The change feed on its own, three connections to one database standing in for three processes.
import type { Connection } from 'mongoose';
import { ChangeFeed, type ChangeTopic } from '../../server/platform/change-feed.js';
import { processConnections } from '../support/connections.js';

const connections = processConnections(3);

/** A feed that records what it was told; polled by hand unless `pollMs` is given. */
async function recordingFeed(conn: Connection, options: { pollMs?: number; holeCheckMs?: number } = {}) {
  const feed = new ChangeFeed(conn, { pollMs: options.pollMs ?? 60_000, holeCheckMs: options.holeCheckMs ?? 60_000 });
  const seen: string[] = [];
  let resets = 0;
  for (const topic of ['api-key', 'identity'] as ChangeTopic[]) feed.on(topic, (id) => seen.push(`${topic}:${id}`));
  feed.onReset(() => { resets++; });
  await feed.start();
  return { feed, seen, resets: () => resets };
}

type Entry = { _id: number; topic: string; id: string; at: Date };
const entries = () => connections()[0]!.collection<Entry>('change_feed');
async function highest(): Promise<number> {
  const [last] = await entries().find().sort({ _id: -1 }).limit(1).toArray();
  return last?._id ?? 0;
}

it('numbers concurrent publishes from several processes 1, 2, 3, ... without a gap, and every process sees every change', async () => {
  const feeds = await Promise.all(connections().map((conn) => recordingFeed(conn)));
  const published = Array.from({ length: 45 }, (_, i) => ({ topic: (i % 2 ? 'api-key' : 'identity') as ChangeTopic, id: `x${i}` }));
  await Promise.all(published.map((change, i) => feeds[i % 3]!.feed.publish(change.topic, change.id)));

  const numbers = (await entries().find().toArray()).map((d) => d._id).sort((x, y) => x - y);
  expect(numbers).toEqual(Array.from({ length: 45 }, (_, i) => i + 1));
  for (const { feed, seen } of feeds) {
    await feed.poll();
    expect(new Set(seen)).toEqual(new Set(published.map((c) => `${c.topic}:${c.id}`)));
    await feed.stop();
  }
});

it('applies entries in number order: one committed before a lower number waits for it', async () => {
  const { feed, seen, resets } = await recordingFeed(connections()[1]!);
  const n = await highest();
  // n + 2 commits first (another writer's n + 1 is still in flight).
  await entries().insertOne({ _id: n + 2, topic: 'api-key', id: 'later', at: new Date() });
  await feed.poll();
  expect(seen).toEqual([]);
  await entries().insertOne({ _id: n + 1, topic: 'api-key', id: 'earlier', at: new Date() });
  await feed.poll();
  expect(seen).toEqual(['api-key:earlier', 'api-key:later']);
  expect(resets()).toBe(0);
  await feed.stop();
});

it('skips a hole that never fills and drops everything cached, since it may have missed changes', async () => {
  const { feed, seen, resets } = await recordingFeed(connections()[2]!, { holeCheckMs: 50 });
  await entries().insertOne({ _id: (await highest()) + 5, topic: 'identity', id: 'after-a-hole', at: new Date() });
  await feed.poll(); // the first check notices entries above the hole
  expect(resets()).toBe(0);
  // Later checks find it still there; once it has stayed open for holeCheckMs, the feed skips it and
  // resets (polled until then, with a deadline).
  const until = async (done: () => boolean) => {
    const deadline = Date.now() + 30_000;
    while (!done() && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
      await feed.poll();
    }
  };
  await until(() => resets() > 0);
  expect(resets()).toBe(1);
  // Past the hole now: the next entry is applied in order, with no further reset.
  await entries().insertOne({ _id: (await highest()) + 1, topic: 'identity', id: 'next', at: new Date() });
  await until(() => seen.length > 0);
  expect(seen).toEqual(['identity:next']);
  expect(resets()).toBe(1);
  await feed.stop();
});

it('polls on its own once started, and stops polling when stopped', async () => {
  const writer = await recordingFeed(connections()[0]!);
  const reader = await recordingFeed(connections()[1]!, { pollMs: 50 });
  await writer.feed.publish('identity', 'polled');
  const until = Date.now() + 30_000;
  while (!reader.seen.includes('identity:polled') && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  expect(reader.seen).toContain('identity:polled');
  await reader.feed.stop();
  // A witness polling at the same pace sees the entry: the stopped reader had the time to, and did not.
  const witness = await recordingFeed(connections()[2]!, { pollMs: 50 });
  await writer.feed.publish('identity', 'after-stop');
  const witnessUntil = Date.now() + 30_000;
  while (!witness.seen.includes('identity:after-stop') && Date.now() < witnessUntil) await new Promise((r) => setTimeout(r, 10));
  expect(witness.seen).toContain('identity:after-stop');
  expect(reader.seen).not.toContain('identity:after-stop');
  await witness.feed.stop();
  await writer.feed.stop();
});
