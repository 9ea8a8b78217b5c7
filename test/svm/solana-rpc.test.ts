// The Solana JSON-RPC our backend settles through (server/chain/solana/solana-rpc.ts): @solana/kit's RPC
// over node:http keep-alive connections. Against the real local Solana for what a node answers, and a
// gateway of our own on loopback for what no healthy node does (a hang, an HTTP error, a u64 past 2^53).
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { generateKeyPairSigner, isSolanaError } from '@solana/kit';
import { solanaRpc } from '../../server/chain/solana/solana-rpc.js';
import { startDevSolana, type DevSolana } from '../../server/dev/solana/dev-solana.js';

let chain: DevSolana;
let gateway: Server;
let gatewayUrl: string;
let seen: Array<{ method: string; socket: unknown }> = [];
let answer: (body: { id: number; method: string }, res: import('node:http').ServerResponse) => void;

const healthy = (body: { id: number }, res: import('node:http').ServerResponse) => {
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: body.id, result: { context: { slot: 1 }, value: 5 } }));
};

beforeAll(async () => {
  chain = await startDevSolana();
  gateway = createServer(async (req: IncomingMessage, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw) as { id: number; method: string };
    seen.push({ method: body.method, socket: req.socket });
    answer(body, res);
  });
  gateway.listen(0, '127.0.0.1');
  await once(gateway, 'listening');
  gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
});
beforeEach(() => {
  seen = [];
  answer = healthy;
});
afterAll(async () => {
  gateway.closeAllConnections();
  await new Promise((resolve) => gateway.close(resolve));
  await chain.stop();
});

test('reads, and a refused send, on the real local Solana, as kit\'s own RPC gives them', async () => {
  const rpc = solanaRpc(chain.rpcUrl, { timeoutMs: 30_000 });
  const owner = await generateKeyPairSigner();
  chain.ledger.airdrop(owner.address, 2_500_000n);
  const { value: lamports } = await rpc.getBalance(owner.address).send();
  expect(lamports).toBe(2_500_000n);
  const { value: latest } = await rpc.getLatestBlockhash().send();
  expect(typeof latest.blockhash).toBe('string');
  expect(typeof latest.lastValidBlockHeight).toBe('bigint');
  // A JSON-RPC error is kit's SolanaError with the node's code, as from kit's own transport.
  const refused = await rpc.sendTransaction('AAAA' as never, { encoding: 'base64' }).send().catch((err: unknown) => err);
  expect(isSolanaError(refused)).toBe(true);
  expect((refused as { context: { __code?: number } }).context.__code).toEqual(expect.any(Number));
});

test('keeps its connection between calls', async () => {
  const rpc = solanaRpc(gatewayUrl, { timeoutMs: 30_000 });
  for (let i = 0; i < 5; i++) await rpc.getBalance('11111111111111111111111111111111' as never).send();
  expect(seen.map((s) => s.method)).toEqual(Array(5).fill('getBalance'));
  expect(new Set(seen.map((s) => s.socket)).size).toBe(1);
});

test('an amount past 2^53 arrives exact', async () => {
  answer = (body, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(`{"jsonrpc":"2.0","id":${body.id},"result":{"context":{"slot":1},"value":18446744073709551615}}`);
  };
  const rpc = solanaRpc(gatewayUrl, { timeoutMs: 30_000 });
  const { value } = await rpc.getBalance('11111111111111111111111111111111' as never).send();
  expect(value).toBe(18_446_744_073_709_551_615n);
});

test('a node that never answers fails the call at the timeout, not never', async () => {
  answer = () => { /* holds the request */ };
  const rpc = solanaRpc(gatewayUrl, { timeoutMs: 300 });
  await expect(rpc.getBalance('11111111111111111111111111111111' as never).send()).rejects.toThrow(/no answer from .* within 300 ms/);
});

test('an HTTP error status fails the call, naming it', async () => {
  answer = (_body, res) => { res.writeHead(429, { 'content-type': 'text/plain' }).end('slow down'); };
  const rpc = solanaRpc(gatewayUrl, { timeoutMs: 30_000 });
  await expect(rpc.getBalance('11111111111111111111111111111111' as never).send()).rejects.toThrow(/answered HTTP 429: slow down/);
});

test('an abort signal ends the call', async () => {
  answer = () => { /* holds the request */ };
  const rpc = solanaRpc(gatewayUrl, { timeoutMs: 30_000 });
  const controller = new AbortController();
  const call = rpc.getBalance('11111111111111111111111111111111' as never).send({ abortSignal: controller.signal });
  controller.abort(new Error('the buyer went away'));
  await expect(call).rejects.toThrow('the buyer went away');
});
