// A process's stop, step by step: last added first, steps added together side by side (a stop waits for
// the slowest background round, not for their sum), and a failing step logged while the others still run.
import { ShutdownSteps } from '../../server/platform/shutdown.js';
import { capturedLog } from '../support/captured-log.js';

test('steps run last added first; steps added together run side by side, each logged on its own', async () => {
  const order: string[] = [];
  const steps = new ShutdownSteps();
  steps.add('database connection', async () => { order.push('database connection'); });
  // Two rounds that each finish only once the other has begun: run one after the other, they never would.
  let aBegins!: () => void;
  let bBegins!: () => void;
  const aBegan = new Promise<void>((resolve) => { aBegins = resolve; });
  const bBegan = new Promise<void>((resolve) => { bBegins = resolve; });
  const rounds: Array<{ name: string; stop: () => Promise<void> }> = [];
  steps.addTogether(rounds);
  // Filled after being added, as startBackgroundWork does: read when the stop runs.
  rounds.push({ name: 'round a', stop: async () => { aBegins(); await bBegan; order.push('round a'); } });
  rounds.push({ name: 'round b', stop: async () => { bBegins(); await aBegan; order.push('round b'); } });
  steps.add('HTTP listener', async () => { order.push('HTTP listener'); });

  const { log, lines } = capturedLog();
  const stopped = await Promise.race([
    steps.run(log).then(() => 'stopped'),
    new Promise((resolve) => { setTimeout(() => resolve('stuck: the rounds ran one after the other'), 5_000).unref(); }),
  ]);
  expect(stopped).toBe('stopped');
  expect(order[0]).toBe('HTTP listener');
  expect(order.slice(1, 3).sort()).toEqual(['round a', 'round b']);
  expect(order[3]).toBe('database connection');
  expect(lines.filter((l) => l.msg.startsWith('stopping: a step failed'))).toEqual([]);
});

test('a step that fails, alone or among others, is logged by name and every other step still runs', async () => {
  const ran: string[] = [];
  const steps = new ShutdownSteps();
  steps.add('database connection', async () => { ran.push('database connection'); });
  steps.addTogether([
    { name: 'webhook outbox sweep', stop: async () => { throw new Error('connection closed'); } },
    { name: 'channel sweep', stop: async () => { ran.push('channel sweep'); } },
  ]);
  steps.add('metrics listener', async () => { throw new Error('not listening'); });
  const { log, lines } = capturedLog();
  await steps.run(log);
  expect(ran).toEqual(['channel sweep', 'database connection']);
  expect(lines.filter((l) => l.msg === 'stopping: a step failed; going on with the others').map((l) => [l.step, l.err]))
    .toEqual([['metrics listener', 'not listening'], ['webhook outbox sweep', 'connection closed']]);
  // Run once: a second stop has nothing left to run.
  await steps.run(log);
  expect(ran).toEqual(['channel sweep', 'database connection']);
});
