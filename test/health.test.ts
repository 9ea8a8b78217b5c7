// Probes for orchestrators: /health is liveness, /ready answers 200 only while the database, the chain and
// the SMTP listener answer, and names what does not.
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { startTestServer, type TestServer } from './support/server.js';
import { testChain } from './support/chain.js';

let server: TestServer;
let proxy: Server;

beforeAll(async () => {
  // The backend reaches the chain through this forwarding proxy, so the test can take the chain away.
  proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const upstream = await fetch(testChain().rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.concat(chunks) });
      res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(await upstream.text());
    });
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  server = await startTestServer({ CHAIN_RPC_URL: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` });
});
afterAll(async () => {
  await server?.close();
  proxy?.close();
});

test('/health answers while the process runs', async () => {
  const res = await server.request('GET', '/health');
  expect(res).toMatchObject({ status: 200, body: { status: 'ok' } });
});

test('/ready checks the database, the chain and the SMTP listener, and answers 503 naming what is down', async () => {
  const ready = await server.request('GET', '/ready');
  expect(ready).toMatchObject({ status: 200, body: { status: 'ready', checks: { database: 'ok', chain: 'ok', smtp: 'ok' } } });
  proxy.closeAllConnections();
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
  const down = await server.request('GET', '/ready');
  expect(down.status).toBe(503);
  expect(down.body).toMatchObject({ error: 'not_ready', status: 503, checks: { database: 'ok', smtp: 'ok', chain: expect.stringMatching(/^down: /) } });
  expect(down.body.message).toBe('not ready: chain');
});

test('GET / on a dev server is a landing page with the links and the dev accounts', async () => {
  const res = await fetch(`${server.url}/`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/html');
  const html = await res.text();
  for (const href of ['/console', '/docs', '/openapi.json', '/health', '/ready']) expect(html).toContain(`href="${href}"`);
  expect(html).toContain('0x70997970C51812dc3A010C7d01b50e0d17dc79C8');
  // /metrics answers 404 until configured: the page says how to turn it on instead of linking the 404.
  expect((await fetch(`${server.url}/metrics`)).status).toBe(404);
  expect(html).toContain('<code>/metrics</code> (Prometheus) is off: start with <code>METRICS_TOKEN=&lt;16 or more characters&gt;</code>');
});
