import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { assertAllowedUrl, blockedReason, guardedFetch, GuardedFetchError, type HostResolver } from '../../server/platform/ssrf.js';

let target: http.Server;
let base: string;
let port: number;
const hits: string[] = [];

beforeAll(async () => {
  target = http.createServer((req, res) => {
    hits.push(`${req.method} ${req.url} host=${req.headers.host} auth=${req.headers.authorization ?? '-'}`);
    const url = new URL(req.url!, 'http://x');
    if (url.pathname === '/ok') { res.setHeader('content-type', 'text/plain'); res.end('hello'); return; }
    if (url.pathname === '/redirect') { res.statusCode = Number(url.searchParams.get('status') ?? 302); res.setHeader('location', url.searchParams.get('to')!); res.end(); return; }
    if (url.pathname === '/big') { res.end(Buffer.alloc(Number(url.searchParams.get('n')), 'a')); return; }
    if (url.pathname === '/big-chunked') {
      res.setHeader('transfer-encoding', 'chunked');
      let sent = 0;
      const push = () => { if (sent >= 200_000) return res.end(); sent += 10_000; res.write(Buffer.alloc(10_000, 'b')); setImmediate(push); };
      push();
      return;
    }
    if (url.pathname === '/slow') { setTimeout(() => res.end('late'), 5_000).unref(); return; }
    if (url.pathname === '/echo') {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => res.end(JSON.stringify({ method: req.method, body: Buffer.concat(chunks).toString() })));
      return;
    }
    res.statusCode = 404;
    res.end();
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  port = (target.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  target.closeAllConnections();
  await new Promise((resolve) => target.close(resolve));
});

const refusedWith = async (promise: Promise<unknown>, code: string) => {
  const err = await promise.then(() => null, (e) => e);
  expect(err).toBeInstanceOf(GuardedFetchError);
  expect((err as GuardedFetchError).code).toBe(code);
  return err as GuardedFetchError;
};

describe('blockedReason', () => {
  const blocked = [
    '0.0.0.0', '10.1.2.3', '100.64.0.1', '100.127.255.254', '127.0.0.1', '127.255.255.255', '169.254.169.254', '172.16.0.1', '172.31.255.255',
    '192.168.1.1', '192.0.0.170', '192.0.2.5', '198.18.0.1', '198.51.100.7', '203.0.113.9', '224.0.0.1', '239.255.255.250', '240.0.0.1', '255.255.255.255',
    '::', '::1', 'fe80::1', 'fe80::1%eth0', 'fc00::1', 'fd00:ec2::254', 'ff02::1', 'fec0::1', '2001:db8::1',
    '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:169.254.169.254', '::ffff:10.0.0.1', '::127.0.0.1', '64:ff9b::a9fe:a9fe', '2002:7f00:1::', '2002:a9fe:a9fe::1',
  ];
  const allowed = ['1.1.1.1', '8.8.8.8', '93.184.216.34', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '2a00:1450:4001::200e', '::ffff:8.8.8.8', '2002:808:808::1'];
  it.each(blocked)('refuses %s', (address) => {
    expect(blockedReason(address)).not.toBeNull();
  });
  it.each(allowed)('allows public %s', (address) => {
    expect(blockedReason(address)).toBeNull();
  });
  it('lets loopback (only loopback) through when the caller allows it', () => {
    for (const address of ['127.0.0.1', '127.8.8.8', '::1', '::ffff:127.0.0.1']) expect(blockedReason(address, { allowLoopback: true })).toBeNull();
    for (const address of ['10.0.0.1', '169.254.169.254', '192.168.0.1', 'fe80::1', '::', '0.0.0.0']) expect(blockedReason(address, { allowLoopback: true })).not.toBeNull();
  });
});

describe('assertAllowedUrl', () => {
  it('refuses odd spellings of loopback and metadata addresses, and non-http URLs', async () => {
    for (const url of ['http://127.1/', 'http://0x7f000001/', 'http://2130706433/', 'http://017700000001/', 'http://[::1]/', 'http://[::ffff:127.0.0.1]/', 'http://169.254.169.254/latest/meta-data/', 'http://0/']) {
      await refusedWith(assertAllowedUrl(url), 'blocked_address');
    }
    await refusedWith(assertAllowedUrl('http://metadata.google.internal/computeMetadata/v1/'), 'blocked_address');
    for (const url of ['file:///etc/passwd', 'gopher://x/', 'ftp://example.com/', 'not a url', 'http://user:pw@example.com/']) {
      await refusedWith(assertAllowedUrl(url), 'invalid_url');
    }
  });

  it('refuses a name that resolves to a private address, or to a mix of public and private', async () => {
    const resolve: HostResolver = async (name) => name === 'mixed.test'
      ? [{ address: '93.184.216.34', family: 4 }, { address: '10.0.0.5', family: 4 }]
      : [{ address: '192.168.0.10', family: 4 }];
    const err = await refusedWith(assertAllowedUrl('https://internal.test/', { resolve }), 'blocked_address');
    expect(err.message).toContain('192.168.0.10');
    await refusedWith(assertAllowedUrl('https://mixed.test/', { resolve }), 'blocked_address');
    await refusedWith(assertAllowedUrl('http://localhost/'), 'blocked_address'); // real DNS / hosts file
    expect((await assertAllowedUrl('https://public.test/x', { resolve: async () => [{ address: '93.184.216.34', family: 4 }] })).address).toBe('93.184.216.34');
  });
});

describe('guardedFetch', () => {
  it('fetches an allowed target and refuses loopback unless allowed', async () => {
    const res = await guardedFetch(`${base}/ok`, { allowLoopback: true });
    expect(res).toMatchObject({ status: 200, bodyText: 'hello', url: `${base}/ok` });
    const before = hits.length;
    await refusedWith(guardedFetch(`${base}/ok`), 'blocked_address');
    expect(hits.length).toBe(before); // refused before connecting
  });

  it('re-checks every redirect hop', async () => {
    const to = encodeURIComponent('http://169.254.169.254/latest/meta-data/');
    await refusedWith(guardedFetch(`${base}/redirect?to=${to}`, { allowLoopback: true }), 'blocked_address');
    const toPrivate = encodeURIComponent('http://10.0.0.1/');
    await refusedWith(guardedFetch(`${base}/redirect?status=307&to=${toPrivate}`, { allowLoopback: true }), 'blocked_address');
    const followed = await guardedFetch(`${base}/redirect?to=${encodeURIComponent('/ok')}`, { allowLoopback: true });
    expect(followed).toMatchObject({ status: 200, bodyText: 'hello', url: `${base}/ok` });
  });

  it('caps redirects, and turns a 303 into a GET', async () => {
    const loop = `${base}/redirect?to=${encodeURIComponent('/redirect?to=/redirect%3Fto%3D/ok')}`;
    // three hops: /redirect -> /redirect -> /redirect -> /ok
    await refusedWith(guardedFetch(loop, { allowLoopback: true, maxRedirects: 2 }), 'too_many_redirects');
    expect((await guardedFetch(loop, { allowLoopback: true, maxRedirects: 3 })).bodyText).toBe('hello');
    const seeOther = await guardedFetch(`${base}/redirect?status=303&to=/echo`, { allowLoopback: true, method: 'POST', body: 'payload', headers: { 'content-type': 'text/plain' } });
    expect(JSON.parse(seeOther.bodyText)).toEqual({ method: 'GET', body: '' });
    const kept = await guardedFetch(`${base}/redirect?status=307&to=/echo`, { allowLoopback: true, method: 'POST', body: 'payload' });
    expect(JSON.parse(kept.bodyText)).toEqual({ method: 'POST', body: 'payload' });
  });

  it('caps the response size, declared or streamed', async () => {
    expect((await guardedFetch(`${base}/big?n=1000`, { allowLoopback: true, maxBytes: 1000 })).body).toHaveLength(1000);
    await refusedWith(guardedFetch(`${base}/big?n=1001`, { allowLoopback: true, maxBytes: 1000 }), 'too_large');
    await refusedWith(guardedFetch(`${base}/big-chunked`, { allowLoopback: true, maxBytes: 50_000 }), 'too_large');
  });

  it('gives up after the time limit', async () => {
    await refusedWith(guardedFetch(`${base}/slow`, { allowLoopback: true, timeoutMs: 200 }), 'timeout');
  });

  it('pins the connection to the address it checked (DNS rebinding)', async () => {
    // The first answer is the allowed one; a rebinding server would answer differently on the next lookup.
    const answers = ['127.0.0.1', '10.9.9.9'];
    const lookups: string[] = [];
    const resolve: HostResolver = async (name) => { lookups.push(name); return [{ address: answers.shift() ?? '10.9.9.9', family: 4 }]; };
    const res = await guardedFetch(`http://rebind.test:${port}/ok`, { allowLoopback: true, resolve });
    expect(res.bodyText).toBe('hello');
    expect(lookups).toEqual(['rebind.test']); // resolved once; the socket did not look the name up again
    expect(hits.at(-1)).toContain(`host=rebind.test:${port}`);
    // A second request resolves afresh and is refused on the rebound answer.
    await refusedWith(guardedFetch(`http://rebind.test:${port}/ok`, { allowLoopback: true, resolve }), 'blocked_address');
  });

  it('drops credentials when a redirect leaves the origin', async () => {
    const resolve: HostResolver = async () => [{ address: '127.0.0.1', family: 4 }];
    await guardedFetch(`${base}/redirect?to=${encodeURIComponent(`http://other.test:${port}/ok`)}`, { allowLoopback: true, resolve, headers: { authorization: 'Bearer secret' } });
    expect(hits.at(-2)).toContain('auth=Bearer secret');
    expect(hits.at(-1)).toContain(`host=other.test:${port} auth=-`);
  });

  it('refuses a header Node cannot send as a request error, and leaves no timer behind', async () => {
    // Node throws inside http.request() for these; the guard used to arm its timeout first, and that
    // timer later threw from nowhere and killed the process.
    for (const value of ['a\r\nb', 'a\u0000b', 'caf\u0113']) {
      await refusedWith(guardedFetch(`${base}/ok`, { allowLoopback: true, timeoutMs: 150, headers: { 'x-a': value } }), 'invalid_request');
    }
    await new Promise((resolve) => setTimeout(resolve, 300)); // past the timeout: a stray timer would throw here
    expect((await guardedFetch(`${base}/ok`, { allowLoopback: true })).bodyText).toBe('hello');
  });
});
