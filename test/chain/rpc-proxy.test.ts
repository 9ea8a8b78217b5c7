// The fault-injecting RPC proxy (test/support/rpc-proxy.ts) does what each fault says, in front of the
// real test chain: tests of failover and settlement rest on it, so it is tested on its own first.
import { keccak256, parseEther, parseGwei, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { DEV_CHAIN_ID } from '../../server/dev/chain/dev-chain.js';
import { setEthBalance, testChain } from '../support/chain.js';
import { startRpcProxy, type RpcProxy } from '../support/rpc-proxy.js';

let proxy: RpcProxy;
beforeAll(async () => {
  proxy = await startRpcProxy(testChain().rpcUrl);
});
afterEach(() => {
  proxy.clearFaults();
  proxy.resetCounts();
});
afterAll(async () => {
  await proxy?.close();
});

let nextId = 1;
const call = (method: string, params: unknown[] = []) => ({ jsonrpc: '2.0', id: nextId++, method, params });

/** One HTTP exchange with the proxy, as a client would make it; a hung one is given up after `timeoutMs`. */
async function post(body: unknown, timeoutMs = 5_000): Promise<{ status: number; text: string; json: any }> {
  const res = await fetch(proxy.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  let json: unknown;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, text, json };
}

/** A signed transfer from a fresh funded account: the raw bytes and their hash. */
async function signedTransfer(): Promise<{ raw: Hex; hash: Hex }> {
  const sender = privateKeyToAccount(generatePrivateKey());
  await setEthBalance(sender.address, parseEther('1'));
  const raw = await sender.signTransaction({
    chainId: DEV_CHAIN_ID, type: 'eip1559', to: privateKeyToAccount(generatePrivateKey()).address, value: 1n,
    nonce: 0, gas: 21_000n, maxFeePerGas: parseGwei('100'), maxPriorityFeePerGas: parseGwei('1'),
  });
  return { raw, hash: keccak256(raw) };
}

const mined = async (hash: Hex) => (await testChain().publicClient.waitForTransactionReceipt({ hash, timeout: 10_000 })).status;

test('forwards single and batch calls unchanged, and counts what it saw and passed on per method', async () => {
  const direct = await testChain().publicClient.getChainId();
  expect(Number((await post(call('eth_chainId'))).json.result)).toBe(direct);
  const batch = await post([call('eth_chainId'), call('eth_blockNumber')]);
  expect(batch.json).toHaveLength(2);
  expect(Number(batch.json[0].result)).toBe(direct);
  expect(batch.json[1].result).toMatch(/^0x/);
  expect(proxy.counts()).toEqual({ eth_chainId: 2, eth_blockNumber: 1 });
  expect(proxy.calls()).toBe(3);
  expect(proxy.forwarded('eth_chainId')).toBe(2);
});

test('rpcError answers the matching method with the error object, for the next N calls only, and leaves others alone', async () => {
  const fault = proxy.rpcError({ code: -32005, message: 'rate limited' }, { method: 'eth_blockNumber', times: 1 });
  const first = await post(call('eth_blockNumber'));
  expect(first.status).toBe(200);
  expect(first.json.error).toEqual({ code: -32005, message: 'rate limited' });
  expect((await post(call('eth_blockNumber'))).json.result).toMatch(/^0x/);
  expect((await post(call('eth_chainId'))).json.result).toMatch(/^0x/);
  expect(fault.hits).toBe(1);
  expect(proxy.forwarded('eth_blockNumber')).toBe(1);

  // In a batch only the matching call gets the error; the others are forwarded and answered.
  proxy.rpcError({ code: -32603, message: 'internal error' }, { method: 'eth_blockNumber' });
  const batch = await post([call('eth_chainId'), call('eth_blockNumber')]);
  expect(batch.json[0].result).toMatch(/^0x/);
  expect(batch.json[1].error).toEqual({ code: -32603, message: 'internal error' });
});

test('httpStatus answers with that status and forwards nothing', async () => {
  proxy.httpStatus(503, { times: 1 });
  const res = await post(call('eth_chainId'));
  expect(res.status).toBe(503);
  expect(res.json).toBeUndefined();
  expect(proxy.forwarded()).toBe(0);
  proxy.httpStatus({ status: 429, headers: { 'retry-after': '1' }, body: 'slow down' }, { times: 1 });
  expect(await post(call('eth_chainId'))).toMatchObject({ status: 429, text: 'slow down' });
  expect((await post(call('eth_chainId'))).status).toBe(200);
});

test('refuse drops the connection without an answer; hang never answers', async () => {
  proxy.refuse({ method: 'eth_chainId', times: 1 });
  await expect(post(call('eth_chainId'))).rejects.toThrow(/fetch failed/);
  proxy.hang({ method: 'eth_chainId', times: 1 });
  // Given up by the client after 2 s: on a loaded machine a shorter wait could end before the proxy even
  // read the request (and it would not be counted below).
  await expect(post(call('eth_chainId'), 2_000)).rejects.toThrow(/aborted|timeout/i);
  expect(proxy.calls('eth_chainId')).toBe(2);
  expect(proxy.forwarded()).toBe(0);
  expect((await post(call('eth_chainId'))).json.result).toMatch(/^0x/);
});

test('delay answers late, and correctly', async () => {
  proxy.delay(400, { method: 'eth_chainId' });
  const started = Date.now();
  const res = await post(call('eth_chainId'));
  expect(Date.now() - started).toBeGreaterThanOrEqual(390);
  expect(res.json.result).toMatch(/^0x/);
});

test('afterForward faults let the node take the transaction, then fail the answer (the ambiguous send)', async () => {
  const cases: Array<[string, () => unknown, (sent: Promise<unknown>) => Promise<void>]> = [
    ['rpcError', () => proxy.afterForward.rpcError({ code: -32603, message: 'internal error' }, { method: 'eth_sendRawTransaction', times: 1 }),
      async (sent) => expect(((await sent) as { json: any }).json.error).toEqual({ code: -32603, message: 'internal error' })],
    ['refuse', () => proxy.afterForward.refuse({ method: 'eth_sendRawTransaction', times: 1 }),
      async (sent) => { await expect(sent).rejects.toThrow(/fetch failed/); }],
    ['hang', () => proxy.afterForward.hang({ method: 'eth_sendRawTransaction', times: 1 }),
      async (sent) => { await expect(sent).rejects.toThrow(/aborted|timeout/i); }],
    ['httpStatus', () => proxy.afterForward.httpStatus(502, { method: 'eth_sendRawTransaction', times: 1 }),
      async (sent) => expect(((await sent) as { status: number }).status).toBe(502)],
  ];
  for (const [, inject, check] of cases) {
    const tx = await signedTransfer();
    inject();
    await check(post(call('eth_sendRawTransaction', [tx.raw]), 1_000));
    expect(await mined(tx.hash)).toBe('success');
  }
  expect(proxy.forwarded('eth_sendRawTransaction')).toBe(cases.length);
});

test('down() refuses connections on the same port until up(); faults can be cleared', async () => {
  const fault = proxy.rpcError({ code: -32000, message: 'nonce too low' });
  expect((await post(call('eth_chainId'))).json.error.message).toBe('nonce too low');
  fault.clear();
  expect((await post(call('eth_chainId'))).json.result).toMatch(/^0x/);

  await proxy.down();
  const refused = await post(call('eth_chainId')).then(() => undefined, (err: Error) => err);
  expect((refused?.cause as { code?: string } | undefined)?.code).toBe('ECONNREFUSED');
  await proxy.up();
  expect((await post(call('eth_chainId'))).json.result).toMatch(/^0x/);

  proxy.hang();
  proxy.clearFaults();
  expect((await post(call('eth_chainId'))).json.result).toMatch(/^0x/);
});

test('down() also ends exchanges left hanging', async () => {
  proxy.hang({ times: 1 });
  const hung = post(call('eth_chainId'), 30_000);
  while (proxy.calls('eth_chainId') === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  await proxy.down();
  await expect(hung).rejects.toThrow(/fetch failed|other side closed|terminated/i);
  await proxy.up();
});
