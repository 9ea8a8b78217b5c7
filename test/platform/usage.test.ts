// Usage counts (platform/usage.ts) on the real MongoDB-wire server: a second in which hundreds of keys
// were used is written in commands of a few statements, because the embedded engine (FerretDB) stops
// answering for good once more multi-statement update statements are under way than its connection pool
// holds (platform/group-commit.ts). One bulk write of them all hung it.
import { UsageTracker, keyUsage } from '../../server/platform/usage.js';
import { useTestConnection } from '../support/server.js';

const conn = useTestConnection();

it('hundreds of keys used in one second, twice: every count is stored, and the database still answers', async () => {
  const usage = new UsageTracker(conn());
  const subjects = Array.from({ length: 400 }, (_, i) => keyUsage(`k${i}`));
  // The first second creates their documents; the second one updates them all (what hung FerretDB).
  for (let second = 0; second < 2; second++) {
    for (const subject of subjects) usage.record(subject);
    await usage.flush();
  }
  usage.record(subjects[0]!);
  await usage.flush();

  // A tracker with nothing pending reads only what the database stored.
  const counts = await new UsageTracker(conn()).read(subjects);
  expect(counts.get(subjects[0]!)?.count).toBe(3);
  expect(subjects.slice(1).filter((s) => counts.get(s)?.count !== 2)).toEqual([]);
}, 60_000);
