// Turns: one task at a time per key, in the order asked; a failed task does not stop the next; other keys
// run alongside.
import { Turns } from '../../server/platform/turns.js';

const tick = () => new Promise((r) => setTimeout(r, 5));

it('runs a key\'s tasks one after the other, in order, past a failure, while another key runs alongside', async () => {
  const turns = new Turns();
  const log: string[] = [];
  let running = 0;
  let most = 0;
  const task = (name: string, fail = false) => async () => {
    running++;
    most = Math.max(most, running);
    log.push(`${name} start`);
    await tick();
    log.push(`${name} end`);
    running--;
    if (fail) throw new Error(name);
    return name;
  };
  const a = [turns.run('a', task('a1')), turns.run('a', task('a2', true)), turns.run('a', task('a3'))];
  const b = turns.run('b', async () => { log.push('b'); return 'b'; });
  const settled = await Promise.allSettled([...a, b]);
  expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
  expect(log.filter((l) => l.startsWith('a'))).toEqual(['a1 start', 'a1 end', 'a2 start', 'a2 end', 'a3 start', 'a3 end']);
  expect(most).toBe(1);
  // b did not wait for a's tasks.
  expect(log.indexOf('b')).toBeLessThan(log.indexOf('a1 end'));
});
