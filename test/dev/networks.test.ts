// `agentgate dev` runs three local EVM chains with no extra step (Base Sepolia 84532, Polygon Amoy 80002,
// Arbitrum Sepolia 421614) and a local Solana (standing in for Devnet), and a route of our middleware
// offers all four: the official @x402/fetch v2 client, set up for one network at a time as a buyer holding
// USDC there would be, pays it on each, and the money moves on that network's chain, in that network's
// token (under its own EIP-712 name on EVM).
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { createPublicClient, http, parseAbi, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { toCaip2Network } from 'agentgate-x402-wire';
import { paymentMiddleware } from '../../adapters/express.js';
import { syncEndpoints } from '../../middleware/index.js';
import { balanceOf } from '../../server/chain/usdc.js';
import { DEV_NETWORKS } from '../../server/dev/chain/dev-chain.js';
import { startDevProcess, type DevProcess } from '../support/dev-process.js';
import { address } from '@solana/kit';
import { devSolanaSigner } from '../../server/dev/solana/dev-solana.js';
import { findAssociatedTokenPda, TOKEN_PROGRAM_ADDRESS } from '@solana-program/token';
import { ExactSvmScheme } from '@x402/svm/exact/client';

let dev: DevProcess;
/** Each dev network's RPC URL and token, as `agentgate dev` printed them. */
const chains = new Map<string, { rpcUrl: string; usdc: Address }>();
let url: string;
let close: () => void;
/** The local Solana's RPC URL, as `agentgate dev` printed it. */
let solanaRpc: string;
const DEVNET = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1';
const EVERY_NETWORK = [...DEV_NETWORKS.map((n) => toCaip2Network(n.network)), DEVNET];

beforeAll(async () => {
  dev = await startDevProcess('networks');
  for (const line of dev.output.split('\n')) {
    const printed = /local chain (\S+) \(chain id \d+, "([a-z-]+)".*USDC (0x[0-9a-fA-F]{40})/.exec(line);
    if (printed) chains.set(printed[2]!, { rpcUrl: printed[1]!, usdc: printed[3] as Address });
    const solana = /local Solana (\S+) \("solana-devnet"/.exec(line);
    if (solana) solanaRpc = solana[1]!;
  }
  const routes = { 'GET /report': { price: '$0.01', description: 'Report' } };
  const app = express();
  app.use(paymentMiddleware({ backendUrl: dev.seller.backendUrl, apiKey: dev.seller.sellerKey, routes }));
  app.get('/report', (_req, res) => { res.json({ report: 'done' }); });
  const listening = app.listen(0, '127.0.0.1');
  await once(listening, 'listening');
  close = () => { listening.closeAllConnections(); listening.close(); };
  const origin = `http://127.0.0.1:${(listening.address() as AddressInfo).port}`;
  await syncEndpoints({ backendUrl: dev.seller.backendUrl, platformKey: dev.seller.platformKey, publicOrigin: origin, routes });
  url = `${origin}/report`;
}, 180_000);

afterAll(async () => {
  close?.();
  await dev?.stop();
}, 60_000);

test('agentgate dev prints three local chains, each token under its network\'s EIP-712 name', async () => {
  expect([...chains.keys()]).toEqual(DEV_NETWORKS.map((n) => n.network));
  for (const network of DEV_NETWORKS) {
    const { rpcUrl, usdc } = chains.get(network.network)!;
    const client = createPublicClient({ transport: http(rpcUrl) });
    expect(await client.getChainId()).toBe(network.chainId);
    expect(await client.readContract({ address: usdc, abi: parseAbi(['function name() view returns (string)']), functionName: 'name' })).toBe(network.tokenName);
  }
});

test.each(DEV_NETWORKS.map((n) => [n.network] as const))('the official v2 client pays the route on %s', async (network) => {
  const caip2 = toCaip2Network(network) as `eip155:${number}`;
  const { rpcUrl, usdc } = chains.get(network)!;
  const unpaid = await fetch(url);
  expect(decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!).accepts.map((a) => a.network)).toEqual(EVERY_NETWORK);

  const buyer = privateKeyToAccount(dev.seller.buyerPrivateKey);
  const balance = (account: Address) => balanceOf({ client: createPublicClient({ transport: http(rpcUrl) }), token: usdc, account });
  const before = await balance(buyer.address);
  const client = registerExactEvmScheme(new x402Client(), { signer: buyer, networks: [caip2] }).setSpendControls({ allowedAssets: [{ network: caip2, asset: usdc, maxAmountPerPayment: '10000' }] });
  const paid = await wrapFetchWithPayment(fetch, client)(url);
  expect(paid.status).toBe(200);
  expect(await balance(buyer.address)).toBe(before - 10_000n);
});

test('an agent funds its wallet from the dev faucet on each chain, and payments_pay pays the route on Polygon Amoy where it holds USDC', async () => {
  const call = async (method: string, path: string, key?: string, body?: unknown) => {
    const res = await fetch(`${dev.seller.backendUrl}${path}`, { method, headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: await res.json() as any };
  };
  const signup = await call('POST', '/v0/agent-signup', undefined, {});
  expect(signup.status).toBe(201);
  const key = signup.body.identity.rawKey as string;
  // The faucet on every dev chain: the same wallet address on each.
  for (const network of DEV_NETWORKS) {
    const funded = await call('POST', '/v0/dev/faucet', key, { amountUsdc: '1', network: network.network });
    expect({ network: network.network, status: funded.status }).toEqual({ network: network.network, status: 200 });
  }
  const wallet = await call('GET', '/v0/wallet', key);
  expect(wallet.body.networks.map((n: { network: string; balanceUsdc: string }) => `${n.network} ${n.balanceUsdc}`)).toEqual([...DEV_NETWORKS.map((n) => `${n.network} 1`), 'solana-devnet 0']);
  for (const network of DEV_NETWORKS) {
    const { rpcUrl, usdc } = chains.get(network.network)!;
    expect(await balanceOf({ client: createPublicClient({ transport: http(rpcUrl) }), token: usdc, account: wallet.body.address })).toBe(1_000_000n);
  }
  expect((await call('POST', '/v0/payments/mandates', key, { maxPerCallUsdc: '0.05', dailyCapUsdc: '1', validUntil: new Date(Date.now() + 86_400_000).toISOString() })).status).toBe(201);
  const paid = await call('POST', '/v0/payments/pay', key, { url, network: 'polygon-amoy' });
  expect({ status: paid.status, error: paid.body.error }).toEqual({ status: 200, error: undefined });
  expect(paid.body).toMatchObject({ paid: true, content: { report: 'done' }, cost: { network: 'polygon-amoy', amountUsdc: '0.01' } });
  const amoy = chains.get('polygon-amoy')!;
  expect(await balanceOf({ client: createPublicClient({ transport: http(amoy.rpcUrl) }), token: amoy.usdc, account: wallet.body.address })).toBe(990_000n);
});

test('on the local Solana: the official SVM client pays the route, and an agent funded by the faucet pays it with payments_pay', async () => {
  // The dev buyer, which `agentgate dev` funds on the local Solana.
  const buyer = await devSolanaSigner('buyer');
  const usdcOf = async (owner: string) => {
    const res = await fetch(solanaRpc, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getTokenAccountBalance', params: [await tokenAccount(owner)] }) });
    const body = await res.json() as { result?: { value: { amount: string } } };
    return BigInt(body.result?.value.amount ?? 0);
  };
  const tokenAccount = async (owner: string) => (await findAssociatedTokenPda({ mint: address('4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU'), owner: address(owner), tokenProgram: TOKEN_PROGRAM_ADDRESS }))[0];
  const before = await usdcOf(buyer.address);
  const paid = await wrapFetchWithPayment(fetch, new x402Client().register(DEVNET, new ExactSvmScheme(buyer, { rpcUrl: solanaRpc })))(url);
  expect(paid.status).toBe(200);
  expect(await usdcOf(buyer.address)).toBe(before - 10_000n);

  const call = async (method: string, path: string, key?: string, body?: unknown) => {
    const res = await fetch(`${dev.seller.backendUrl}${path}`, { method, headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: await res.json() as any };
  };
  const key = (await call('POST', '/v0/agent-signup', undefined, {})).body.identity.rawKey as string;
  expect((await call('POST', '/v0/dev/faucet', key, { amountUsdc: '1', network: 'solana-devnet' })).status).toBe(200);
  expect((await call('POST', '/v0/payments/mandates', key, { maxPerCallUsdc: '0.05', dailyCapUsdc: '1', validUntil: new Date(Date.now() + 86_400_000).toISOString() })).status).toBe(201);
  const agentPaid = await call('POST', '/v0/payments/pay', key, { url, network: 'solana-devnet' });
  expect({ status: agentPaid.status, error: agentPaid.body.error }).toEqual({ status: 200, error: undefined });
  expect(agentPaid.body).toMatchObject({ paid: true, content: { report: 'done' }, cost: { network: 'solana-devnet', amountUsdc: '0.01' } });
  const wallet = await call('GET', '/v0/wallet', key);
  expect(wallet.body.networks).toContainEqual(expect.objectContaining({ network: 'solana-devnet', balanceUsdc: '0.99' }));
});
