// findByIds (platform/find-by-ids.ts) on the real MongoDB-wire server: what one `_id: {$in}` query would
// return, from one equality lookup per id (FerretDB reads a whole collection for `$in`).
import { findByIds } from '../../server/platform/find-by-ids.js';
import { useTestConnection } from '../support/server.js';

const conn = useTestConnection();

it('finds every stored id across several rounds of lookups, skips the missing ones and keeps each lookup\'s own conditions', async () => {
  const docs = conn().db!.collection<{ _id: string; kind: string }>('find_by_ids');
  await docs.insertMany(Array.from({ length: 40 }, (_, i) => ({ _id: `d${i}`, kind: i % 2 ? 'odd' : 'even' })));
  const ids = [...Array.from({ length: 40 }, (_, i) => `d${i}`), 'missing-1', 'missing-2'];

  const all = await findByIds(ids, (id) => docs.findOne({ _id: id }));
  expect(all.map((d) => d._id).sort()).toEqual(Array.from({ length: 40 }, (_, i) => `d${i}`).sort());

  const odd = await findByIds(ids, (id) => docs.findOne({ _id: id, kind: 'odd' }));
  expect(odd.map((d) => d._id).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `d${2 * i + 1}`).sort());

  expect(await findByIds([], (id) => docs.findOne({ _id: id }))).toEqual([]);
});
