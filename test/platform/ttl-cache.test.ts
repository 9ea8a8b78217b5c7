// The per-process cache in front of seller settings, endpoints and keys: concurrent misses share a load,
// and nothing read before a deletion is served or kept after it.
import { TtlCache } from '../../server/platform/ttl-cache.js';

const deferred = <T>() => {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => { resolve = r; });
  return { promise, resolve };
};

it('concurrent misses of one key share one load, and the value is kept', async () => {
  const cache = new TtlCache<string>(60_000);
  const read = deferred<string>();
  let loads = 0;
  const load = () => { loads++; return read.promise; };
  const asked = Array.from({ length: 64 }, () => cache.through('seller', load));
  read.resolve('v1');
  expect(await Promise.all(asked)).toEqual(Array(64).fill('v1'));
  expect(loads).toBe(1);
  expect(await cache.through('seller', async () => 'v2')).toBe('v1');
});

it('a shared load is awaited once, even when it is a thenable that may run only once (a mongoose query)', async () => {
  const cache = new TtlCache<string>(60_000);
  let runs = 0;
  const query = { then(resolve: (v: string) => void, reject: (e: Error) => void) { if (++runs > 1) reject(new Error('Query was already executed')); else setTimeout(() => resolve('doc'), 5); } };
  const asked = Array.from({ length: 8 }, () => cache.through('endpoint', () => query as unknown as Promise<string>));
  expect(await Promise.all(asked)).toEqual(Array(8).fill('doc'));
  expect(runs).toBe(1);
});

it('a caller after a deletion does not join a load that started before it, and that load is not kept', async () => {
  const cache = new TtlCache<string>(60_000);
  const stale = deferred<string>();
  const first = cache.through('seller', () => stale.promise);
  cache.delete('seller'); // the seller changed while the first read was on its way
  const second = cache.through('seller', async () => 'fresh');
  stale.resolve('old');
  expect(await first).toBe('old');
  expect(await second).toBe('fresh');
  expect(await cache.through('seller', async () => 'again')).toBe('fresh');
});

it('a value refused by keep is returned but not cached; a failed load is not cached either', async () => {
  const cache = new TtlCache<string | null>(60_000);
  expect(await cache.through('key', async () => null, (v) => v !== null)).toBeNull();
  expect(await cache.through('key', async () => 'live', (v) => v !== null)).toBe('live');
  await expect(cache.through('other', async () => { throw new Error('db down'); })).rejects.toThrow('db down');
  expect(await cache.through('other', async () => 'ok')).toBe('ok');
});
