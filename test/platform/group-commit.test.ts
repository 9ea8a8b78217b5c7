// Group commit on the real MongoDB-wire server: grouped inserts are still unique-index inserts (a
// duplicate inside one insertMany, or across two, fails only its own caller), grouped updates report
// whether each one took effect, and a command that fails as a whole fails each of its callers.
import type { Collection } from 'mongodb';
import { GroupedInserts, GroupedUpdates } from '../../server/platform/group-commit.js';
import { useTestConnection } from '../support/server.js';

interface Claim { _id: string; key: string; status: string; at?: number }

const conn = useTestConnection();
let claims: Collection<Claim>;

beforeAll(async () => {
  claims = conn().db!.collection<Claim>('claims') as unknown as Collection<Claim>;
  await claims.createIndex({ key: 1 }, { unique: true });
});

it('writes what one turn of the event loop asks for in one command, and each duplicate fails only itself', async () => {
  const sizes: number[] = [];
  const inserts = new GroupedInserts(() => claims, { onCommand: (size) => sizes.push(size) });
  // 30 claims on 10 keys, all asked for at once: one command, one winner per key.
  const asked = Array.from({ length: 30 }, (_, i) => ({ _id: `a${i}`, key: `k${i % 10}`, status: 'held' }));
  const results = await Promise.all(asked.map((doc) => inserts.insert(doc)));
  expect(sizes).toEqual([30]);
  expect(results.filter((r) => r === 'inserted')).toHaveLength(10);
  for (let key = 0; key < 10; key++) {
    const forKey = results.filter((_, i) => i % 10 === key);
    expect(forKey.filter((r) => r === 'inserted')).toHaveLength(1);
  }
  const stored = await claims.find({ _id: { $in: asked.map((d) => d._id) } }).toArray();
  expect(stored.map((d) => d.key).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `k${i}`).sort());
  // The winner of each key is the caller that was told "inserted".
  for (const doc of stored) expect(results[asked.findIndex((a) => a._id === doc._id)]).toBe('inserted');
});

it('a key claimed by an earlier command (or another process) is a duplicate in a later one', async () => {
  const first = new GroupedInserts(() => claims);
  const second = new GroupedInserts(() => conn().db!.collection<Claim>('claims') as unknown as Collection<Claim>);
  expect(await first.insert({ _id: 'b1', key: 'kb', status: 'held' })).toBe('inserted');
  const [again, other] = await Promise.all([second.insert({ _id: 'b2', key: 'kb', status: 'held' }), second.insert({ _id: 'b3', key: 'kb2', status: 'held' })]);
  expect([again, other]).toEqual(['duplicate', 'inserted']);
});

it('requests that arrive while a command is on its way leave together in the next one', async () => {
  const sizes: number[] = [];
  const inserts = new GroupedInserts(() => claims, { onCommand: (size) => sizes.push(size) });
  const first = inserts.insert({ _id: 'c0', key: 'kc0', status: 'held' });
  await new Promise((r) => setImmediate(r)); // the first command has left
  const rest = Array.from({ length: 5 }, (_, i) => inserts.insert({ _id: `c${i + 1}`, key: `kc${i + 1}`, status: 'held' }));
  await Promise.all([first, ...rest]);
  expect(sizes).toEqual([1, 5]);
});

it('grouped updates say whether each took effect, reading back only when the total falls short', async () => {
  await claims.insertMany([{ _id: 'd1', key: 'kd1', status: 'verified' }, { _id: 'd2', key: 'kd2', status: 'settled', at: 1 }, { _id: 'd3', key: 'kd3', status: 'verified' }]);
  const updates = new GroupedUpdates(() => claims);
  const settle = (id: string, at: number) => updates.update({
    filter: { _id: id, status: { $ne: 'settled' } }, update: { $set: { status: 'settled', at } },
    tookEffect: (doc) => doc?.at === at,
  });
  const results = await Promise.all([settle('d1', 7), settle('d2', 8), settle('d3', 9)]);
  expect(results.map((r) => r.matched)).toEqual([true, false, true]);
  expect((await claims.findOne({ _id: 'd2' }))?.at).toBe(1); // settled before: left as it was
  expect(await Promise.all([settle('d1', 10), settle('d3', 11)])).toEqual([{ matched: false }, { matched: false }]);
  await expect(updates.update({ filter: { _id: 'd1' }, update: { $set: { status: 'failed' } } })).resolves.toEqual({ matched: true });
});

it('a command that fails as a whole fails every caller in it, and the next command goes on', async () => {
  const inserts = new GroupedInserts(() => claims);
  // An update operator in a document to insert is refused for the whole command by the driver.
  const bad = [inserts.insert({ _id: 'e1', key: 'ke1', status: 'held', $bad: 1 } as unknown as Claim), inserts.insert({ _id: 'e2', key: 'ke2', status: 'held' })];
  const settled = await Promise.allSettled(bad);
  expect(settled.some((s) => s.status === 'rejected')).toBe(true);
  expect(await inserts.insert({ _id: 'e3', key: 'ke3', status: 'held' })).toBe('inserted');
});
