// lazily(): a module loaded by its first caller, once, whoever asks at the same time; a failed load is not
// kept, so the next caller tries again.
import { lazily } from '../../server/platform/lazily.js';

it('loads once for every caller, concurrent ones included', async () => {
  let loads = 0;
  const load = lazily(async () => ({ n: ++loads }));
  const [a, b] = await Promise.all([load(), load()]);
  expect(await load()).toBe(a);
  expect(b).toBe(a);
  expect(loads).toBe(1);
});

it('tries again after a failed load', async () => {
  let loads = 0;
  const load = lazily(async () => {
    loads++;
    if (loads === 1) throw new Error('not there yet');
    return 'module';
  });
  await expect(load()).rejects.toThrow('not there yet');
  expect(await load()).toBe('module');
  expect(await load()).toBe('module');
  expect(loads).toBe(2);
});
