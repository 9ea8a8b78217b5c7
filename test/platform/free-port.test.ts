// freePort (server/platform/net.ts) hands out ports for servers that bind later. The embedded database
// starts before `agentgate dev`'s own servers bind their configured ports (PORT, CHAT_DEV_PORT, ...), so
// it must never take one of those: a CI run failed with "the local chat workspace's port 30365 is already
// in use" when FerretDB had drawn the port the test had configured for the chat workspace.
import { freePort } from '../../server/platform/net.js';

test('never hands out a port it was told to avoid', async () => {
  // Every even port of the range is promised elsewhere: 400 draws that ignored this would hit one with a
  // probability of 1 - 2^-400.
  const evens = Array.from({ length: 6_000 }, (_, i) => 20_000 + 2 * i);
  const drawn: number[] = [];
  for (let i = 0; i < 400; i++) drawn.push(await freePort(evens));
  expect(drawn.filter((port) => port % 2 === 0)).toEqual([]);
  expect(new Set(drawn).size).toBeGreaterThan(1);
});
