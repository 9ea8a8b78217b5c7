// The node:http JSON-RPC transport (server/chain/json-rpc-http.ts): what it sends and how it reads what
// comes back. Its failures as rpc-fault.ts classifies them (refused, hung, 5xx, JSON-RPC errors) are
// tested through the failover in rpc-failover.test.ts; here, the HTTP exchange itself, against the real
// test chain and a gateway of our own on loopback where the case needs an answer no node gives.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createPublicClient, HttpRequestError } from 'viem';
import { jsonRpcHttp } from '../../server/chain/json-rpc-http.js';
import { testChain } from '../support/chain.js';

let gateway: Server;
let gatewayUrl: string;
let seen: Array<{ authorization?: string; body: { method: string; id: number }; socket: unknown }> = [];
let answer: (body: { method: string; id: number }) => { status: number; text: string } = (body) => ({ status: 200, text: JSON.stringify({ jsonrpc: '2.0', id: body.id, result: '0x2105' }) });

beforeAll(async () => {
  gateway = createServer(async (req: IncomingMessage, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw) as { method: string; id: number };
    seen.push({ authorization: req.headers.authorization, body, socket: req.socket });
    const { status, text } = answer(body);
    res.writeHead(status, { 'content-type': 'application/json' }).end(text);
  });
  gateway.listen(0, '127.0.0.1');
  await once(gateway, 'listening');
  gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
});
afterEach(() => {
  seen = [];
  answer = (body) => ({ status: 200, text: JSON.stringify({ jsonrpc: '2.0', id: body.id, result: '0x2105' }) });
});
afterAll(async () => {
  gateway.closeAllConnections();
  await new Promise((resolve) => gateway.close(resolve));
});

// A generous timeout unless a case is about the timeout: a call answered slowly on a loaded machine must not
// fail as "took too long" where the case checks something else.
const client = (url: string, timeoutMs = 30_000) => createPublicClient({ transport: jsonRpcHttp(url, { timeoutMs }) });

test('reads and a transaction on the real chain, as viem http would', async () => {
  const chain = testChain();
  const ours = client(chain.rpcUrl);
  expect(await ours.getChainId()).toBe(await chain.publicClient.getChainId());
  expect(await ours.getBlockNumber({ cacheTime: 0 })).toBe(await chain.publicClient.getBlockNumber({ cacheTime: 0 }));
  // A node's answer about the call comes back as viem's error, with the node's words.
  await expect(ours.sendRawTransaction({ serializedTransaction: '0x02deadbeef' })).rejects.toThrow(/rlp|decode|invalid|transaction/i);
});

test('keeps its connection between calls', async () => {
  const ours = client(gatewayUrl);
  for (let i = 0; i < 5; i++) await ours.getChainId();
  expect(seen).toHaveLength(5);
  expect(new Set(seen.map((s) => s.socket)).size).toBe(1);
  expect(new Set(seen.map((s) => s.body.id)).size).toBe(5);
});

test('credentials in the URL go as basic auth, never in the request line', async () => {
  const url = new URL(gatewayUrl);
  url.username = 'key';
  url.password = 's3cr%20t';
  await client(url.href).getChainId();
  expect(seen[0]!.authorization).toBe(`Basic ${Buffer.from('key:s3cr t').toString('base64')}`);
});

test('a 2xx answer that is not JSON-RPC, a non-2xx status and an oversized answer fail as HTTP errors', async () => {
  answer = () => ({ status: 200, text: '<html>gateway</html>' });
  const notJson = await client(gatewayUrl).getChainId().catch((e: Error) => e);
  expect((notJson as Error & { walk: (f: (e: unknown) => boolean) => unknown }).walk((e) => e instanceof HttpRequestError)).toBeTruthy();
  expect((notJson as Error).message).toMatch(/not a JSON-RPC answer/);

  answer = () => ({ status: 502, text: 'bad gateway' });
  const bad = await client(gatewayUrl).getChainId().catch((e: Error) => e);
  expect(((bad as Error & { walk: (f: (e: unknown) => boolean) => unknown }).walk((e) => e instanceof HttpRequestError) as HttpRequestError).status).toBe(502);

  // 12 MB built and sent by the gateway in this same process: under a loaded full run that takes a while,
  // and this case is about the size cap, not the timeout.
  answer = (body) => ({ status: 200, text: JSON.stringify({ jsonrpc: '2.0', id: body.id, result: `0x${'00'.repeat(6_000_000)}` }) });
  await expect(client(gatewayUrl, 30_000).getChainId()).rejects.toThrow(/over 10485760 bytes/);
});

test('a gateway that never answers fails within the timeout', async () => {
  const silent = createServer(() => { /* never answers */ });
  silent.listen(0, '127.0.0.1');
  await once(silent, 'listening');
  try {
    const started = Date.now();
    await expect(client(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`, 300).getChainId()).rejects.toThrow(/took too long/);
    expect(Date.now() - started).toBeLessThan(3_000);
  } finally {
    silent.closeAllConnections();
    silent.close();
  }
});
