// startRounds, what every background sweep runs on: a round still running when the next is due is not
// stacked with it, a failure is reported (but not one cut short by stopping), and stop waits for the
// round under way, within a bound. Rounds here end when the test says so, never by a clock.
import { startRounds } from '../../server/platform/rounds.js';

/** A round that runs until the test ends it. */
function controlledRounds() {
  const started: Array<{ end: () => void; fail: (err: Error) => void }> = [];
  const round = () => new Promise<void>((resolve, reject) => { started.push({ end: resolve, fail: reject }); });
  return { started, round };
}
const tick = async (until: () => boolean) => { while (!until()) await new Promise((r) => setTimeout(r, 5)); };

it('runs one round at a time: while one runs, the rounds that fall due are skipped', async () => {
  const { started, round } = controlledRounds();
  const stop = startRounds({ everyMs: 5, round, onError: () => {} });
  await tick(() => started.length === 1);
  // Many periods pass while the first round runs: no second round starts.
  await new Promise((r) => setTimeout(r, 60));
  expect(started).toHaveLength(1);
  started[0]!.end();
  await tick(() => started.length === 2);
  started[1]!.end();
  await stop();
});

it('reports a failed round and goes on; a round cut short by stopping is not reported', async () => {
  const { started, round } = controlledRounds();
  const errors: string[] = [];
  const stop = startRounds({ everyMs: 5, round, onError: (err) => errors.push(err.message) });
  await tick(() => started.length === 1);
  started[0]!.fail(new Error('database away'));
  await tick(() => started.length === 2);
  expect(errors).toEqual(['database away']);
  const stopping = stop();
  started[1]!.fail(new Error('interrupted by shutdown'));
  await stopping;
  expect(errors).toEqual(['database away']);
});

it('stop waits for the round under way, and no round starts after it', async () => {
  const { started, round } = controlledRounds();
  const stop = startRounds({ everyMs: 5, round, onError: () => {}, runNow: true });
  expect(started).toHaveLength(1); // runNow: the first round starts at once
  let stopped = false;
  const stopping = stop().then(() => { stopped = true; });
  await new Promise((r) => setTimeout(r, 30));
  expect(stopped).toBe(false);
  started[0]!.end();
  await stopping;
  await new Promise((r) => setTimeout(r, 30));
  expect(started).toHaveLength(1);
});

it('stop waits for a round that does not end only up to its bound, then leaves it as a crash would', async () => {
  const { started, round } = controlledRounds();
  const stop = startRounds({ everyMs: 5, round, onError: () => {}, runNow: true, stopWaitMs: 50 });
  expect(started).toHaveLength(1);
  // The round never ends: the stop returns all the same (a stop that waited for it would never resolve).
  await stop();
  await new Promise((r) => setTimeout(r, 30));
  expect(started).toHaveLength(1);
});
