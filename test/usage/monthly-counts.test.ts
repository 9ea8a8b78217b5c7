// Usage counted as it happens (usage/monthly-counts.ts), by several processes on one real MongoDB-wire
// server: each writes only its own totals, so the deployment's total is their sum, a write repeated after
// a failure never counts twice, and a process reads its own counts before it has written them.
import { MonthlyCounts } from '../../server/usage/monthly-counts.js';
import { useTestConnection } from '../support/server.js';

const conn = useTestConnection();
let n = 0;
const orgId = () => `org_counts_${process.pid}_${++n}`;

it('three processes counting one org at once: every count is in the total, whichever process reads it, written or not', async () => {
  const org = orgId();
  const month = new Date().toISOString().slice(0, 7);
  const processes = ['p1', 'p2', 'p3'].map((id) => new MonthlyCounts(conn(), `${id}-${n}`, 60_000));
  for (let i = 0; i < 50; i++) processes.forEach((p, k) => p.add(org, 'facilitatorCalls', k + 1));
  processes[0]!.add(org, 'storageBytes', 500);
  processes[1]!.add(org, 'storageBytes', -200);
  // Nothing written yet: each process sees only its own.
  expect((await processes[0]!.totals(org, month)).facilitatorCalls).toBe(50);
  await Promise.all(processes.map((p) => p.flush()));
  processes[2]!.add(org, 'mailSent');
  const reader = new MonthlyCounts(conn(), `reader-${n}`);
  expect(await reader.totals(org, month)).toEqual({ facilitatorCalls: 50 * (1 + 2 + 3), mailSent: 0, mailReceived: 0, storageBytes: 300 });
  // The process with an unwritten count reads it; storage is not per month.
  expect(await processes[2]!.totals(org, month)).toEqual({ facilitatorCalls: 300, mailSent: 1, mailReceived: 0, storageBytes: 300 });
  expect(await reader.totals(org, '2020-01')).toEqual({ facilitatorCalls: 0, mailSent: 0, mailReceived: 0, storageBytes: 300 });
  expect(await reader.orgsIn(month)).toContain(org);
});

it('a write sent again (its answer lost in an outage) sets the same total: nothing is counted twice', async () => {
  const org = orgId();
  const month = new Date().toISOString().slice(0, 7);
  // The same process's write of the same total, twice: what a retry after a lost acknowledgement sends.
  for (let attempt = 0; attempt < 2; attempt++) {
    const sameProcess = new MonthlyCounts(conn(), `retry-${n}`, 60_000);
    for (let i = 0; i < 7; i++) sameProcess.add(org, 'mailSent');
    await sameProcess.flush();
  }
  expect((await new MonthlyCounts(conn(), `retry-reader-${n}`).totals(org, month)).mailSent).toBe(7);
});

it('a count added in one month is not another month\'s', async () => {
  const org = orgId();
  const counts = new MonthlyCounts(conn(), `months-${n}`, 60_000);
  counts.add(org, 'mailReceived', 2, new Date('2026-01-31T23:59:59.999Z'));
  counts.add(org, 'mailReceived', 5, new Date('2026-02-01T00:00:00.000Z'));
  await counts.flush();
  const reader = new MonthlyCounts(conn(), `months-reader-${n}`);
  expect((await reader.totals(org, '2026-01')).mailReceived).toBe(2);
  expect((await reader.totals(org, '2026-02')).mailReceived).toBe(5);
  // Past months, once written, leave the process's memory; their counts stay in the database.
  expect((await counts.totals(org, '2026-01')).mailReceived).toBe(2);
});
