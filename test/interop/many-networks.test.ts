/**
 * One backend settling on two networks at once (NETWORKS=base-sepolia,polygon-amoy): the test chain and a
 * second anvil node with Polygon Amoy's chain id, its own FiatToken, Multicall3 and the x402 contracts.
 * An official @x402/express seller offers both networks, paid to a different address on each, with
 * agentgate as its facilitator; official @x402/fetch buyers each holding USDC on one network pay it.
 * What a seller and an operator would check: each payment moved money on its own chain to that
 * network's payTo and nothing on the other, its record names its network, /supported lists every kind on
 * both networks, and one relayer key serves both with a lease on each network.
 */
import express from 'express';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import { BatchSettlementChannelManager, BatchSettlementEvmScheme as ChannelServerScheme } from '@x402/evm/batch-settlement/server';
import { registerExactEvmScheme as registerServerEvm } from '@x402/evm/exact/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import { createPublicClient, createWalletClient, http, maxUint256, parseUnits, toHex, type Address } from 'viem';
import { erc20AllowanceAbi, PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { networkByName } from 'agentgate-x402-wire';
import { startAnvil, type AnvilNode } from '../../server/dev/chain/anvil.js';
import { deployDevChain, installMulticall3, localChain } from '../../server/dev/chain/deploy.js';
import { mint } from '../../server/dev/chain/fiat-token.js';
import { installX402Contracts, DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { DEV_DEPLOYER } from '../../server/dev/chain/dev-accounts.js';
import { balanceOf } from '../../server/chain/usdc.js';
import { fundedBuyer, sendUsdc, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { startRpcProxy, type RpcProxy } from '../support/rpc-proxy.js';
import { openStorefront } from '../support/storefront.js';
import { signAuthorization } from '../support/chain.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { mcpPaywall } from '../../adapters/mcp.js';
import { serveMcp } from '../mcp-paid/support.js';
import { runPythonBuyer, x402Python } from '../support/python-sdk.js';
import { serve, setUpSeller, type RunningApp } from './seller.js';
import { officialChannelClient } from '../support/official-channel-client.js';
import { vouchersOnceCaptured } from '../support/channel-captures.js';
import { readChannelState } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { GAS_BASE, GAS_PER_TRANSFER } from '../../server/settlement/settler.js';
import { createMandate, fundedAgent, pay } from '../buyer/support.js';
import { consoleGet, signIn } from '../console/http-client.js';
import { runCli } from '../../server/cli/main.js';

const AMOY = networkByName('polygon-amoy')!;
const BASE_SEPOLIA = 'eip155:84532';
const PRICE = 10_000n;
let amoy: AnvilNode;
let amoyUsdc: Address;
let amoyRpc: RpcProxy;
let amoyBuyer: ReturnType<typeof privateKeyToAccount>;
let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
const amoyPayTo = privateKeyToAccount(generatePrivateKey()).address;
let shop: RunningApp;

/** Test USDC on Amoy for `to`, from the deployer (the token's minter). */
async function mintOnAmoy(to: Address, amount = parseUnits('1', 6)) {
  const chain = localChain({ chainId: AMOY.chainId, rpcUrl: amoy.rpcUrl });
  const minter = createWalletClient({ chain, account: privateKeyToAccount(DEV_DEPLOYER.privateKey), transport: http(amoy.rpcUrl) });
  const hash = await mint({ minter, token: amoyUsdc, to, amount });
  await createPublicClient({ chain, transport: http(amoy.rpcUrl) }).waitForTransactionReceipt({ hash });
}

/** The buyer's Permit2 allowance on Amoy (an upto permit is spent through Permit2), with gas to send it. */
async function approvePermit2OnAmoy(owner: ReturnType<typeof privateKeyToAccount>) {
  const chain = localChain({ chainId: AMOY.chainId, rpcUrl: amoy.rpcUrl });
  const client = createPublicClient({ chain, transport: http(amoy.rpcUrl) });
  await client.request({ method: 'anvil_setBalance' as never, params: [owner.address, toHex(parseUnits('1', 18))] as never });
  const wallet = createWalletClient({ chain, account: owner, transport: http(amoy.rpcUrl) });
  const hash = await wallet.writeContract({ address: amoyUsdc, abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
  await client.waitForTransactionReceipt({ hash });
}

const amoyBalance = (account: Address) => balanceOf({ client: createPublicClient({ transport: http(amoy.rpcUrl) }) as never, token: amoyUsdc, account });

beforeAll(async () => {
  amoy = await startAnvil({ chainId: AMOY.chainId });
  amoyBuyer = privateKeyToAccount(generatePrivateKey());
  const deployment = await deployDevChain({ rpcUrl: amoy.rpcUrl, deployerKey: DEV_DEPLOYER.privateKey, mintTo: [amoyBuyer.address], mintAmountUsdc: '5' });
  await installMulticall3({ rpcUrl: amoy.rpcUrl, deployerKey: DEV_DEPLOYER.privateKey });
  await installX402Contracts(amoy.rpcUrl);
  amoyUsdc = deployment.usdcAddress;
  // Our token is not at Circle's Amoy address, so its EIP-712 domain is named.
  // Amoy's node is reached through a proxy, so a test can take it away.
  amoyRpc = await startRpcProxy(amoy.rpcUrl);
  // The dev faucet's key is Amoy's token minter (the deployer), as in `agentgate dev`.
  server = await startTestServer({ NETWORKS: 'base-sepolia,eip155:80002', POLYGON_AMOY_RPC_URL: amoyRpc.url, POLYGON_AMOY_USDC_ADDRESS: amoyUsdc, POLYGON_AMOY_USDC_EIP712_NAME: 'USD Coin', FAUCET_PRIVATE_KEY: DEV_DEPLOYER.privateKey,
    // Amoy's transactions carry 2.5 times our gas limits (as a chain that counts L1 data in gas would need).
    POLYGON_AMOY_GAS_LIMIT_PERCENT: '250' });
  // One relayer key for both networks: it needs gas on Amoy too.
  const relayer = privateKeyToAccount(server.config.RELAYER_PRIVATE_KEY as `0x${string}`).address;
  await createPublicClient({ transport: http(amoy.rpcUrl) }).request({ method: 'anvil_setBalance' as never, params: [relayer, toHex(parseUnits('10', 18))] as never });
  seller = await setUpSeller(server);
  // Paid to another address on Amoy: the seller names it as one of its payees.
  const acceptance = await server.request('PUT', '/v0/payments/acceptance', { key: seller.platformKey, body: { enabled: true, payTo: seller.payTo, payees: [amoyPayTo] } });
  if (acceptance.status !== 200) throw new Error(`acceptance: ${acceptance.status} ${acceptance.text}`);
  shop = await officialSeller();
}, 120_000);

afterAll(async () => {
  await shop?.close();
  await server?.close();
  await amoyRpc?.close();
  await amoy?.stop();
});

/** An official @x402/express seller of GET /report on both networks, with agentgate as its facilitator. */
async function officialSeller() {
  const facilitator = new HTTPFacilitatorClient({
    url: `${server.url}/v0/x402`,
    createAuthHeaders: async () => { const h = { Authorization: `Bearer ${seller.sellerKey}` }; return { verify: h, settle: h, supported: h }; },
  });
  const resourceServer = registerServerEvm(new x402ResourceServer(facilitator), { networks: [BASE_SEPOLIA, AMOY.caip2] });
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /report': {
      accepts: [
        { scheme: 'exact', network: BASE_SEPOLIA, payTo: seller.payTo, price: { asset: testChain().usdc, amount: String(PRICE), extra: { name: DEV_USDC_NAME, version: '2' } } },
        { scheme: 'exact', network: AMOY.caip2, payTo: amoyPayTo, price: { asset: amoyUsdc, amount: String(PRICE), extra: { name: 'USD Coin', version: '2' } } },
      ],
      description: 'Report', mimeType: 'application/json',
    },
  }, resourceServer));
  app.get('/report', (_req, res) => { res.json({ report: 'done' }); });
  return serve(app);
}

/** An official @x402/express seller of GET /amoy-only on Polygon Amoy alone, with agentgate as its facilitator. */
async function amoyOnlySeller() {
  const facilitator = new HTTPFacilitatorClient({
    url: `${server.url}/v0/x402`,
    createAuthHeaders: async () => { const h = { Authorization: `Bearer ${seller.sellerKey}` }; return { verify: h, settle: h, supported: h }; },
  });
  const resourceServer = registerServerEvm(new x402ResourceServer(facilitator), { networks: [AMOY.caip2] });
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /amoy-only': {
      accepts: [{ scheme: 'exact', network: AMOY.caip2, payTo: amoyPayTo, price: { asset: amoyUsdc, amount: String(PRICE), extra: { name: 'USD Coin', version: '2' } } }],
      description: 'Amoy only', mimeType: 'application/json',
    },
  }, resourceServer));
  app.get('/amoy-only', (_req, res) => { res.json({ amoy: true }); });
  return serve(app);
}

/** An official buyer that signs only on `network` (where it holds USDC), allowing that network's test token. */
const buyerOn = (network: `eip155:${number}`, account: ReturnType<typeof privateKeyToAccount>) =>
  wrapFetchWithPayment(fetch, new x402Client().register(network, new ExactEvmScheme(account)).setSpendControls({
    allowedAssets: [{ network, asset: network === AMOY.caip2 ? amoyUsdc : testChain().usdc, maxAmountPerPayment: String(PRICE) }],
  }));

test('/supported lists every kind on both networks, with one signer pool', async () => {
  const supported = await (await fetch(`${server.url}/v0/x402/supported`)).json() as { kinds: Array<{ x402Version: number; scheme: string; network: string }>; signers: Record<string, string[]> };
  const kinds = supported.kinds.map((k) => `${k.scheme} ${k.network}`);
  expect(kinds).toEqual(expect.arrayContaining(['exact base-sepolia', `exact ${BASE_SEPOLIA}`, 'exact polygon-amoy', `exact ${AMOY.caip2}`, `upto ${AMOY.caip2}`, `upto ${BASE_SEPOLIA}`, `auth-capture ${AMOY.caip2}`, `batch-settlement ${BASE_SEPOLIA}`, `batch-settlement ${AMOY.caip2}`]));
  expect(supported.signers['eip155:*']).toEqual([privateKeyToAccount(server.config.RELAYER_PRIVATE_KEY as `0x${string}`).address]);
});

test('the 402 offers both networks; a buyer holding USDC on Amoy pays there, to the Amoy payTo, and nothing moves on Base Sepolia', async () => {
  const unpaid = await fetch(`${shop.url}/report`);
  expect(decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!).accepts.map((a) => a.network)).toEqual([BASE_SEPOLIA, AMOY.caip2]);
  const baseBefore = await usdcBalance(seller.payTo);
  const [buyerBefore, payToBefore] = [await amoyBalance(amoyBuyer.address), await amoyBalance(amoyPayTo)];
  const res = await buyerOn(AMOY.caip2, amoyBuyer)(`${shop.url}/report`);
  expect({ status: res.status, refusal: res.status === 402 ? decodePaymentRequiredHeader(res.headers.get('payment-required')!).error : undefined }).toEqual({ status: 200, refusal: undefined });
  expect(await res.json()).toEqual({ report: 'done' });
  expect(await amoyBalance(amoyBuyer.address)).toBe(buyerBefore - PRICE);
  expect(await amoyBalance(amoyPayTo)).toBe(payToBefore + PRICE);
  expect(await usdcBalance(seller.payTo)).toBe(baseBefore);
  const records = await server.request('GET', '/v0/payments', { key: seller.platformKey });
  const record = records.body.payments.find((p: { payerAddress: string }) => p.payerAddress.toLowerCase() === amoyBuyer.address.toLowerCase());
  expect(record).toMatchObject({ status: 'settled', network: 'polygon-amoy', recipientAddress: amoyPayTo });
  // Its transaction carried Amoy's gas limit: 2.5 times a lone transfer's (POLYGON_AMOY_GAS_LIMIT_PERCENT).
  const sent = await createPublicClient({ transport: http(amoy.rpcUrl) }).getTransaction({ hash: record.txHash });
  expect(sent.gas).toBe((GAS_BASE + GAS_PER_TRANSFER) * 5n / 2n);
});

test('a buyer holding USDC on Base Sepolia pays the same route there', async () => {
  const buyer = await fundedBuyer('1');
  const before = await usdcBalance(seller.payTo);
  const res = await buyerOn(BASE_SEPOLIA, buyer)(`${shop.url}/report`);
  expect(res.status).toBe(200);
  expect(await usdcBalance(seller.payTo)).toBe(before + PRICE);
  const records = await server.request('GET', '/v0/payments', { key: seller.platformKey });
  const record = records.body.payments.find((p: { payerAddress: string }) => p.payerAddress.toLowerCase() === buyer.address.toLowerCase());
  expect(record).toMatchObject({ status: 'settled', network: 'base-sepolia' });
  // The default network keeps our gas limit (Amoy's own setting is Amoy's alone).
  expect((await testChain().publicClient.getTransaction({ hash: record.txHash })).gas).toBe(GAS_BASE + GAS_PER_TRANSFER);
});

test('one relayer key serves both networks: a lease on each, in each network\'s own collection', async () => {
  const relayer = privateKeyToAccount(server.config.RELAYER_PRIVATE_KEY as `0x${string}`).address.toLowerCase();
  const db = server.app.db.db!;
  // A lease's id is the relayer's address and its generation.
  const leased = async (collection: string) => (await db.collection(collection).find({}).toArray()).map((l) => String(l._id).toLowerCase().split('#')[0]);
  expect(await leased('relayer_leases')).toContain(relayer);
  expect(await leased('relayer_leases_eip155_80002')).toContain(relayer);
  // Its lane on each network is seen apart: a balance and transactions per network, not one overwriting the other.
  const metrics = await server.app.metrics.registry.getMetricsAsJSON();
  const values = (name: string) => metrics.find((m) => m.name === name)!.values as Array<{ labels: Record<string, string>; value: number }>;
  expect(values('agentgate_relayer_gas_balance_eth').filter((v) => v.labels.relayer?.toLowerCase() === relayer).map((v) => v.labels.network).sort())
    .toEqual([BASE_SEPOLIA, AMOY.caip2].sort());
  const mined = (network: string) => values('agentgate_settlement_transactions_total').filter((v) => v.labels.event === 'mined' && v.labels.network === network).reduce((n, v) => n + v.value, 0);
  expect(mined(AMOY.caip2)).toBeGreaterThanOrEqual(1);
  expect(mined(BASE_SEPOLIA)).toBeGreaterThanOrEqual(1);
  expect(values('agentgate_paid_requests_total').some((v) => v.labels.network === AMOY.caip2 && v.labels.outcome === 'settled')).toBe(true);
});

test('with Amoy\'s RPC down, Base Sepolia payments go on, /ready says degraded (not down), and the Amoy payment refused meanwhile settles once the node is back, once', async () => {
  const baseBuyer = await fundedBuyer('1');
  const amoyPayer = privateKeyToAccount(generatePrivateKey());
  await mintOnAmoy(amoyPayer.address);
  await amoyRpc.down();
  try {
    const ready = await server.request('GET', '/ready');
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ status: 'degraded', checks: { chain: 'ok', [`network ${AMOY.caip2}`]: expect.stringMatching(/^degraded: its chain does not answer/) } });
    const base = await buyerOn(BASE_SEPOLIA, baseBuyer)(`${shop.url}/report`);
    expect(base.status).toBe(200);
    const refused = await buyerOn(AMOY.caip2, amoyPayer)(`${shop.url}/report`);
    expect(refused.status).not.toBe(200);
  } finally {
    await amoyRpc.up();
  }
  const before = await amoyBalance(amoyPayer.address);
  const paid = await buyerOn(AMOY.caip2, amoyPayer)(`${shop.url}/report`);
  expect(paid.status).toBe(200);
  expect(await amoyBalance(amoyPayer.address)).toBe(before - PRICE);
  expect((await server.request('GET', '/ready')).body.status).toBe('ready');
});

test('an official @x402/express batch-settlement seller on Amoy uses agentgate as its facilitator: deposit and vouchers from the official client, its channel manager claims and settles on Amoy', async () => {
  const facilitator = new HTTPFacilitatorClient({
    url: `${server.url}/v0/x402`,
    createAuthHeaders: async () => { const h = { Authorization: `Bearer ${seller.sellerKey}` }; return { verify: h, settle: h, supported: h }; },
  });
  const serverScheme = new ChannelServerScheme(amoyPayTo);
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /channel': {
      accepts: { scheme: 'batch-settlement', network: AMOY.caip2, payTo: amoyPayTo, price: { asset: amoyUsdc, amount: '1000', extra: { name: 'USD Coin', version: '2' } } },
      description: 'Per call on Amoy', mimeType: 'application/json',
    },
  }, new x402ResourceServer(facilitator).register(AMOY.caip2, serverScheme)));
  app.get('/channel', (_req, res) => { res.json({ paid: true }); });
  const official = await serve(app);
  try {
    const payer = privateKeyToAccount(generatePrivateKey());
    await mintOnAmoy(payer.address);
    const amoyClient = createPublicClient({ chain: localChain({ chainId: AMOY.chainId, rpcUrl: amoy.rpcUrl }), transport: http(amoy.rpcUrl) });
    const { paying } = officialChannelClient(payer, 10, { publicClient: amoyClient, usdc: amoyUsdc, network: AMOY.caip2 });
    for (let call = 0; call < 3; call++) {
      const res = await paying(`${official.url}/channel`);
      expect({ call, status: res.status }).toEqual({ call, status: 200 });
    }
    expect(await amoyBalance(payer.address)).toBe(parseUnits('1', 6) - 10_000n);
    const manager = new BatchSettlementChannelManager({ scheme: serverScheme, facilitator, receiver: amoyPayTo, token: amoyUsdc, network: AMOY.caip2 });
    expect(await manager.claim()).toEqual([{ vouchers: 1, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) }]);
    const before = await amoyBalance(amoyPayTo);
    expect((await manager.settle()).transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await amoyBalance(amoyPayTo)).toBe(before + 3_000n);
  } finally {
    await official.close();
  }
});

describe('our middleware on a backend of two networks', () => {
  test('an exact route offers both networks in one 402, and an official buyer holding USDC on Amoy pays it there', async () => {
    const ours = await openStorefront(server, seller, { 'GET /weather': { price: '$0.01' } });
    try {
      const unpaid = await fetch(ours.resource('/weather'));
      const required = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!);
      expect(required.accepts.map((a) => `${a.scheme} ${a.network} ${a.asset}`)).toEqual([`exact ${BASE_SEPOLIA} ${testChain().usdc}`, `exact ${AMOY.caip2} ${amoyUsdc}`]);
      expect(required.accepts[1]!.extra).toMatchObject({ name: 'USD Coin', version: '2' });
      // The v1 body too: the x402 1.x client knows polygon-amoy by name.
      expect(((await unpaid.json()) as { accepts: Array<{ network: string }> }).accepts.map((a) => a.network)).toEqual(['base-sepolia', 'polygon-amoy']);

      const payer = privateKeyToAccount(generatePrivateKey());
      await mintOnAmoy(payer.address);
      const before = await amoyBalance(seller.payTo);
      const paid = await buyerOn(AMOY.caip2, payer)(ours.resource('/weather'));
      expect(paid.status).toBe(200);
      expect(await amoyBalance(seller.payTo)).toBe(before + PRICE);
      const records = await server.request('GET', '/v0/payments', { key: seller.platformKey });
      expect(records.body.payments.find((p: { payerAddress: string }) => p.payerAddress.toLowerCase() === payer.address.toLowerCase())).toMatchObject({ status: 'settled', network: 'polygon-amoy' });
    } finally {
      await ours.close();
    }
  });

  test('a seller paid to another address on Amoy (payToByNetwork): the 402 names it on Amoy only, and an Amoy payment lands there', async () => {
    const amoyTreasury = privateKeyToAccount(generatePrivateKey()).address;
    const set = (body: Record<string, unknown>) => server.request('PUT', '/v0/payments/acceptance', { key: seller.platformKey, body: { enabled: true, payTo: seller.payTo, payees: [amoyPayTo], ...body } });
    expect((await set({ payToByNetwork: { 'arbitrum-sepolia': amoyTreasury } })).body).toMatchObject({ status: 422, error: 'network_not_served' });
    expect((await set({ payToByNetwork: { atlantis: amoyTreasury } })).body).toMatchObject({ status: 400, error: 'validation_error' });
    const saved = await set({ payToByNetwork: { [AMOY.caip2]: amoyTreasury } });
    expect(saved.body).toMatchObject({ payTo: seller.payTo, payToByNetwork: { 'polygon-amoy': amoyTreasury } });
    const ours = await openStorefront(server, seller, { 'GET /treasury': { price: '$0.01' }, 'GET /payee': { price: '$0.01', payTo: () => amoyPayTo } });
    try {
      const required = decodePaymentRequiredHeader((await fetch(ours.resource('/treasury'))).headers.get('payment-required')!);
      expect(required.accepts.map((a) => `${a.network} ${a.payTo}`)).toEqual([`${BASE_SEPOLIA} ${seller.payTo}`, `${AMOY.caip2} ${amoyTreasury}`]);
      // A payee the route picks is paid on every network.
      const payee = decodePaymentRequiredHeader((await fetch(ours.resource('/payee'))).headers.get('payment-required')!);
      expect(payee.accepts.map((a) => `${a.network} ${a.payTo}`)).toEqual([`${BASE_SEPOLIA} ${amoyPayTo}`, `${AMOY.caip2} ${amoyPayTo}`]);
      const payer = privateKeyToAccount(generatePrivateKey());
      await mintOnAmoy(payer.address);
      const paid = await buyerOn(AMOY.caip2, payer)(ours.resource('/treasury'));
      expect(paid.status).toBe(200);
      expect(await amoyBalance(amoyTreasury)).toBe(PRICE);
    } finally {
      await ours.close();
      await set({});
    }
  });

  test('an auth-capture route offers both networks; an official buyer holding USDC on Amoy is authorized into Amoy\'s escrow, captured after the handler, and refunded there', async () => {
    const ours = await openStorefront(server, seller, { 'GET /escrowed': { price: '$0.01', scheme: 'auth-capture' } });
    try {
      const required = decodePaymentRequiredHeader((await fetch(ours.resource('/escrowed'))).headers.get('payment-required')!);
      expect(required.accepts.map((a) => `${a.scheme} ${a.network} ${a.asset}`)).toEqual([`auth-capture ${BASE_SEPOLIA} ${testChain().usdc}`, `auth-capture ${AMOY.caip2} ${amoyUsdc}`]);
      const payer = privateKeyToAccount(generatePrivateKey());
      await mintOnAmoy(payer.address);
      const before = await amoyBalance(seller.payTo);
      const official = wrapFetchWithPayment(fetch, new x402Client().register(AMOY.caip2, new AuthCaptureEvmScheme(payer))
        .setSpendControls({ allowedAssets: [{ network: AMOY.caip2, asset: amoyUsdc, maxAmountPerPayment: String(PRICE) }] }));
      const paid = await official(ours.resource('/escrowed'));
      expect(paid.status).toBe(200);
      expect(decodePaymentResponseHeader(paid.headers.get('payment-response')!)).toMatchObject({ success: true, network: AMOY.caip2 });
      expect(await amoyBalance(seller.payTo)).toBe(before + PRICE);
      expect(await amoyBalance(payer.address)).toBe(parseUnits('1', 6) - PRICE);
      const records = await server.request('GET', `/v0/payments?network=${AMOY.caip2}`, { key: seller.platformKey });
      const record = records.body.payments.find((p: { payerAddress: string }) => p.payerAddress === payer.address);
      expect(record).toMatchObject({ scheme: 'auth-capture', status: 'settled', network: 'polygon-amoy' });
      // Refunds are funded by the operator (our relayer) on the payment's network.
      await mintOnAmoy(privateKeyToAccount(server.config.RELAYER_PRIVATE_KEY as `0x${string}`).address);
      const refund = await server.request('POST', `/v0/payments/${record.id}/refund`, { key: seller.platformKey, body: { reason: 'changed my mind' } });
      expect(refund.body).toMatchObject({ status: 'refunded', amountUsdcRaw: String(PRICE) });
      expect(await amoyBalance(payer.address)).toBe(parseUnits('1', 6));
    } finally {
      await ours.close();
    }
  });

  test('the official Python SDK pays our exact route on Amoy', async () => {
    const python = x402Python((line) => process.stderr.write(`[python-sdk] ${line}\n`));
    const ours = await openStorefront(server, seller, { 'GET /forecast': { price: '$0.01' } });
    try {
      const key = generatePrivateKey();
      const payer = privateKeyToAccount(key);
      await mintOnAmoy(payer.address);
      const before = await amoyBalance(seller.payTo);
      const run = await runPythonBuyer(python, { BUYER_PRIVATE_KEY: key, RPC_URL: amoy.rpcUrl, NETWORK: AMOY.caip2, ASSET: amoyUsdc, EXACT_URL: ours.resource('/forecast') });
      expect(run.exact).toMatchObject({ status: 200, settlement: { success: true, network: AMOY.caip2, payer: payer.address } });
      expect(await amoyBalance(payer.address)).toBe(parseUnits('1', 6) - PRICE);
      expect(await amoyBalance(seller.payTo)).toBe(before + PRICE);
    } finally {
      await ours.close();
    }
  }, 120_000);

  test('a paid MCP tool offers both networks; a buyer pays its call on Amoy', async () => {
    // The tool's resource is registered as a seller registers an MCP tool (no URL to fetch).
    expect((await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: 'mcp://tool/forecast', priceUsdc: '0.01' } })).status).toBe(201);
    const paid = mcpPaywall({ backendUrl: server.url, apiKey: seller.sellerKey });
    const mcp = await serveMcp(() => {
      const tools = new McpServer({ name: 'forecast', version: '1.0.0' });
      paid.tool(tools, 'forecast', { price: '$0.01', inputSchema: { city: z.string() } }, async ({ city }) => ({ content: [{ type: 'text' as const, text: `rain in ${city}` }] }));
      return tools;
    });
    try {
      const call = (meta?: Record<string, unknown>) => mcp.client.callTool({ name: 'forecast', arguments: { city: 'Lyon' }, ...(meta ? { _meta: meta } : {}) }) as Promise<any>;
      const unpaid = await call();
      const accepts = unpaid.structuredContent.accepts as Array<{ network: string; asset: string; payTo: string; amount: string }>;
      expect(accepts.map((a) => a.network)).toEqual([BASE_SEPOLIA, AMOY.caip2]);
      const accepted = accepts[1]!;
      const payer = privateKeyToAccount(generatePrivateKey());
      await mintOnAmoy(payer.address);
      const signed = await signAuthorization(payer, { to: accepted.payTo as Address, value: BigInt(accepted.amount) }, { name: 'USD Coin', chainId: AMOY.chainId, verifyingContract: amoyUsdc });
      const a = signed.authorization;
      const payment = {
        x402Version: 2, resource: { url: 'mcp://tool/forecast' }, accepted,
        payload: { signature: signed.signature, authorization: { from: a.from, to: a.to, value: a.value.toString(), validAfter: a.validAfter.toString(), validBefore: a.validBefore.toString(), nonce: a.nonce } },
      };
      const before = await amoyBalance(payer.address);
      const result = await call({ 'x402/payment': payment });
      expect(result.content[0].text).toBe('rain in Lyon');
      expect(result._meta['x402/payment-response']).toMatchObject({ success: true, network: AMOY.caip2 });
      expect(await amoyBalance(payer.address)).toBe(before - PRICE);
    } finally {
      await mcp.close();
    }
  });

  test('an upto route offers both networks; a buyer pays by usage on Amoy', async () => {
    const ours = await openStorefront(server, seller, { 'POST /completion': { price: { upto: '$0.05' }, endpoint: { method: 'POST' } } }, { handler: (_req, res) => { (res.locals.x402 as { charge(p: string): void }).charge('$0.02'); res.json({ tokens: 2 }); } });
    try {
      const unpaid = await fetch(ours.resource('/completion'), { method: 'POST' });
      const required = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!);
      expect(required.accepts.map((a) => `${a.scheme} ${a.network}`)).toEqual([`upto ${BASE_SEPOLIA}`, `upto ${AMOY.caip2}`]);
      const payer = privateKeyToAccount(generatePrivateKey());
      await mintOnAmoy(payer.address);
      await approvePermit2OnAmoy(payer);
      const before = await amoyBalance(payer.address);
      const client = new x402Client().register(AMOY.caip2, new UptoEvmScheme(payer)).setSpendControls({ allowedAssets: [{ network: AMOY.caip2, asset: amoyUsdc, maxAmountPerPayment: '50000' }] });
      const paid = await wrapFetchWithPayment(fetch, client)(ours.resource('/completion'), { method: 'POST' });
      expect(paid.status).toBe(200);
      expect(await amoyBalance(payer.address)).toBe(before - 20_000n);
    } finally {
      await ours.close();
    }
  });
  test('a batch-settlement route offers both networks; the official channel client holding USDC on Amoy deposits and pays vouchers there, and Amoy\'s sweep claims them to the seller\'s Amoy address', async () => {
    const ours = await openStorefront(server, seller, { 'GET /metered': { price: '$0.001', scheme: 'batch-settlement' } });
    try {
      const required = decodePaymentRequiredHeader((await fetch(ours.resource('/metered'))).headers.get('payment-required')!);
      expect(required.accepts.map((a) => `${a.scheme} ${a.network} ${a.asset}`)).toEqual([`batch-settlement ${BASE_SEPOLIA} ${testChain().usdc}`, `batch-settlement ${AMOY.caip2} ${amoyUsdc}`]);
      const receiverAuthorizer = await server.app.payments.channels.receiverAuthorizer();
      expect(required.accepts.map((a) => a.extra.receiverAuthorizer)).toEqual([receiverAuthorizer, receiverAuthorizer]);
      const amoyPayee = required.accepts[1]!.payTo as Address;

      const payer = privateKeyToAccount(generatePrivateKey());
      await mintOnAmoy(payer.address);
      const amoyClient = createPublicClient({ chain: localChain({ chainId: AMOY.chainId, rpcUrl: amoy.rpcUrl }), transport: http(amoy.rpcUrl) });
      const { paying } = officialChannelClient(payer, 10, { publicClient: amoyClient, usdc: amoyUsdc, network: AMOY.caip2 });
      for (let call = 0; call < 3; call++) {
        const res = await paying(ours.resource('/metered'));
        expect({ call, status: res.status }).toEqual({ call, status: 200 });
        expect(decodePaymentResponseHeader(res.headers.get('payment-response')!)).toMatchObject({ success: true, network: AMOY.caip2 });
      }
      // The first call deposited ten calls' worth on Amoy; nothing moved on Base Sepolia.
      expect(await amoyBalance(payer.address)).toBe(parseUnits('1', 6) - 10_000n);
      const listed = async () => ((await server.request('GET', '/v0/payments/channels', { key: seller.platformKey })).body.channels as Array<{ id: string; network: string; payerAddress: string; acceptedUsdcRaw: string }>).find((c) => c.payerAddress === payer.address)!;
      await vouchersOnceCaptured(server.app.db as never, (await listed()).id);
      const channel = await listed();
      expect(channel).toMatchObject({ network: AMOY.caip2, acceptedUsdcRaw: '3000' });

      // The default network's round leaves Amoy's channel alone; Amoy's claims it, and settles it to the seller's Amoy address.
      const accepting = (orgId: string) => server.app.payments.acceptance.accepting(orgId);
      const round = (network: number) => server.app.payments.networks[network]!.batchSettlement.sweep.run({ everyMs: 1, idleRefundMs: 24 * 3_600_000, round: `amoy-${Date.now()}-${network}` }, accepting);
      const payeeBefore = await amoyBalance(amoyPayee);
      await round(0);
      const onAmoy = server.app.payments.networks[1]!.chain.publicClient;
      expect((await readChannelState(onAmoy, channel.id as `0x${string}`)).totalClaimed).toBe(0n);
      expect(await round(1)).toMatchObject({ claimed: 1, settled: 1 });
      expect((await readChannelState(onAmoy, channel.id as `0x${string}`)).totalClaimed).toBe(3_000n);
      expect(await amoyBalance(amoyPayee)).toBe(payeeBefore + 3_000n);
      const calls = await server.request('GET', `/v0/payments/channels/${channel.id}/calls`, { key: seller.platformKey });
      expect(calls.body.calls.map((c: { network: string; status: string }) => `${c.network} ${c.status}`)).toEqual(Array(3).fill(`${AMOY.caip2} claimed`));
    } finally {
      await ours.close();
    }
  });
});

test('a backend started while Amoy\'s RPC is down starts (not refusing for one network), ready but degraded naming Amoy, and lists Amoy\'s kinds', async () => {
  await amoyRpc.down();
  let other: TestServer | undefined;
  try {
    other = await startTestServer({ NETWORKS: 'base-sepolia,eip155:80002', POLYGON_AMOY_RPC_URL: amoyRpc.url, POLYGON_AMOY_USDC_ADDRESS: amoyUsdc, POLYGON_AMOY_USDC_EIP712_NAME: 'USD Coin', MONGODB_DB: server.config.MONGODB_DB });
    const ready = await other.request('GET', '/ready');
    expect(ready.status).toBe(200);
    expect(ready.body.checks[`network ${AMOY.caip2}`]).toMatch(/^degraded: its chain does not answer/);
  } finally {
    await amoyRpc.up();
  }
  try {
    const supported = await other.request('GET', '/v0/x402/supported');
    expect(supported.body.kinds.map((k: { network: string }) => k.network)).toContain(AMOY.caip2);
  } finally {
    await other.stop();
  }
});

test('a network listed without its RPC URL refuses the start, naming the variable', async () => {
  await expect(startTestServer({ NETWORKS: 'base-sepolia,arbitrum-sepolia' })).rejects.toThrow('ARBITRUM_SEPOLIA_RPC_URL is required: NETWORKS lists arbitrum-sepolia');
});

describe('payments_pay: the agent\'s wallet on every network', () => {
  test('pays a seller that offers only Polygon Amoy from a wallet funded there: the same address, deployed on Amoy when first needed, the mandate counting it', async () => {
    const amoyShop = await amoyOnlySeller();
    try {
      const agent = await fundedAgent(server, '0');
      await mintOnAmoy(agent.address, parseUnits('0.5', 6));
      await createMandate(server, agent.key, { dailyCapUsdc: '0.05' });
      const wallet = await server.request('GET', '/v0/wallet', { key: agent.key });
      expect(wallet.body.networks).toEqual([
        { network: 'base-sepolia', caip2: BASE_SEPOLIA, deployed: false, balanceUsdc: '0', balanceUsdcRaw: '0' },
        { network: 'polygon-amoy', caip2: AMOY.caip2, deployed: false, balanceUsdc: '0.5', balanceUsdcRaw: '500000' },
      ]);
      const payToBefore = await amoyBalance(amoyPayTo);
      const paid = await pay(server, agent.key, { url: `${amoyShop.url}/amoy-only` });
      expect({ status: paid.status, error: paid.body.error }).toEqual({ status: 200, error: undefined });
      expect(paid.body).toMatchObject({ paid: true, content: { amoy: true }, payer: agent.address, recipient: amoyPayTo, cost: { network: 'polygon-amoy', caip2: AMOY.caip2, amountUsdc: '0.01' }, mandate: { spentTodayUsdc: '0.01' } });
      expect(await amoyBalance(agent.address)).toBe(parseUnits('0.5', 6) - PRICE);
      expect(await amoyBalance(amoyPayTo)).toBe(payToBefore + PRICE);
      const after = await server.request('GET', '/v0/wallet', { key: agent.key });
      expect(after.body.networks[1]).toMatchObject({ network: 'polygon-amoy', deployed: true, balanceUsdc: '0.49' });
      expect(after.body.networks[0]).toMatchObject({ network: 'base-sepolia', deployed: false });
      const records = await server.request('GET', '/v0/payments/activity', { key: agent.key });
      expect(records.body.activity[0]).toMatchObject({ network: 'polygon-amoy', status: 'settled' });
      // The seller's record names the network too.
      const sold = await server.request('GET', '/v0/payments', { key: seller.platformKey });
      expect(sold.body.payments.find((p: { payerAddress: string }) => p.payerAddress.toLowerCase() === agent.address.toLowerCase())).toMatchObject({ status: 'settled', network: 'polygon-amoy' });
      // The daily cap counts every network: 0.05 a day, 0.01 spent on Amoy; a 0.05 price would now exceed it.
      const mandate = (await server.request('GET', '/v0/payments/mandates', { key: agent.key })).body.mandates[0];
      expect(mandate).toMatchObject({ spentTodayUsdc: '0.01', remainingTodayUsdc: '0.04' });
    } finally {
      await amoyShop.close();
    }
  });

  test('of a route on two networks, pays on the one where the wallet holds the price; a network named by the caller is kept to', async () => {
    const agent = await fundedAgent(server, '0');
    await mintOnAmoy(agent.address, parseUnits('0.1', 6));
    await createMandate(server, agent.key);
    const onBase = await pay(server, agent.key, { url: `${shop.url}/report`, network: 'base-sepolia' });
    expect({ status: onBase.status, error: onBase.body.error }).toEqual({ status: 402, error: 'balance_insufficient' });
    expect(onBase.body.message).toContain(`the wallet ${agent.address} holds 0 USDC`);
    const dry = await pay(server, agent.key, { url: `${shop.url}/report`, dryRun: true });
    expect(dry.body).toMatchObject({ dryRun: true, cost: { network: 'polygon-amoy' } });
    const paid = await pay(server, agent.key, { url: `${shop.url}/report` });
    expect(paid.body).toMatchObject({ paid: true, cost: { network: 'polygon-amoy' }, recipient: amoyPayTo });
    expect(await amoyBalance(agent.address)).toBe(parseUnits('0.1', 6) - PRICE);
    // Funded on both: the default network first (the order of NETWORKS).
    await sendUsdc(agent.address, parseUnits('0.1', 6));
    const both = await pay(server, agent.key, { url: `${shop.url}/report` });
    expect(both.body).toMatchObject({ paid: true, cost: { network: 'base-sepolia' } });
    const unknown = await pay(server, agent.key, { url: `${shop.url}/report`, network: 'arbitrum-sepolia' });
    expect({ status: unknown.status, error: unknown.body.error }).toEqual({ status: 422, error: 'network_unsupported' });
    const bogus = await pay(server, agent.key, { url: `${shop.url}/report`, network: 'atlantis' });
    expect({ status: bogus.status, error: bogus.body.error }).toEqual({ status: 400, error: 'validation_error' });
  });

  test('pays an auth-capture route on Amoy from a wallet funded there: into Amoy\'s escrow, captured, and the mandate given back what a refund returns', async () => {
    const ours = await openStorefront(server, seller, { 'GET /escrowed-agent': { price: '$0.01', scheme: 'auth-capture' } });
    try {
      const agent = await fundedAgent(server, '0');
      await mintOnAmoy(agent.address, parseUnits('0.2', 6));
      await createMandate(server, agent.key);
      const paid = await pay(server, agent.key, { url: ours.resource('/escrowed-agent') });
      expect({ status: paid.status, error: paid.body.error }).toEqual({ status: 200, error: undefined });
      expect(paid.body).toMatchObject({ paid: true, cost: { scheme: 'auth-capture', network: 'polygon-amoy', escrow: 'captured', amountUsdc: '0.01' }, mandate: { spentTodayUsdc: '0.01' } });
      expect(await amoyBalance(agent.address)).toBe(parseUnits('0.2', 6) - PRICE);
      const record = (await server.request('GET', `/v0/payments?network=${AMOY.caip2}`, { key: seller.platformKey })).body.payments.find((p: { payerAddress: string }) => p.payerAddress === agent.address);
      await mintOnAmoy(privateKeyToAccount(server.config.RELAYER_PRIVATE_KEY as `0x${string}`).address);
      expect((await server.request('POST', `/v0/payments/${record.id}/refund`, { key: seller.platformKey, body: { reason: 'sorry' } })).body).toMatchObject({ status: 'refunded' });
      // Reading the activity syncs the escrow on Amoy: the refund is given back to the mandate.
      const activity = await server.request('GET', '/v0/payments/activity', { key: agent.key });
      expect(activity.body.activity[0]).toMatchObject({ network: 'polygon-amoy' });
      const mandate = (await server.request('GET', '/v0/payments/mandates', { key: agent.key })).body.mandates[0];
      expect(mandate).toMatchObject({ spentTodayUsdc: '0' });
      expect(await amoyBalance(agent.address)).toBe(parseUnits('0.2', 6));
    } finally {
      await ours.close();
    }
  });

  test('the dev faucet funds the wallet on the network named', async () => {
    const agent = await fundedAgent(server, '0');
    const funded = await server.request('POST', '/v0/dev/faucet', { key: agent.key, body: { amountUsdc: '2', network: 'eip155:80002' } });
    expect({ status: funded.status, error: funded.body.error }).toEqual({ status: 200, error: undefined });
    expect(funded.body).toMatchObject({ network: AMOY.caip2, wallet: { networks: [{ network: 'base-sepolia', balanceUsdc: '0' }, { network: 'polygon-amoy', balanceUsdc: '2' }] } });
    expect(await amoyBalance(agent.address)).toBe(parseUnits('2', 6));
    const elsewhere = await server.request('POST', '/v0/dev/faucet', { key: agent.key, body: { amountUsdc: '2', network: 'arbitrum-sepolia' } });
    expect({ status: elsewhere.status, error: elsewhere.body.error }).toEqual({ status: 404, error: 'network_not_found' });
  });
});

test('what the seller sees: GET /v0/payments and the console filter by network, the console shows each payment\'s network and totals per network', async () => {
  const all = (await server.request('GET', '/v0/payments?limit=100', { key: seller.platformKey })).body.payments as Array<{ network: string }>;
  const onAmoy = all.filter((p) => p.network === 'polygon-amoy').length;
  expect({ amoy: onAmoy > 0, base: all.some((p) => p.network === 'base-sepolia') }).toEqual({ amoy: true, base: true });
  const amoyOnly = await server.request('GET', `/v0/payments?limit=100&network=${AMOY.caip2}`, { key: seller.platformKey });
  expect(amoyOnly.body.payments.map((p: { network: string }) => p.network)).toEqual(Array(onAmoy).fill('polygon-amoy'));
  const unknown = await server.request('GET', '/v0/payments?network=atlantis', { key: seller.platformKey });
  expect({ status: unknown.status, error: unknown.body.error }).toEqual({ status: 400, error: 'validation_error' });

  const session = await signIn(server, seller.platformKey);
  const page = await consoleGet(server, '/console/payments', session.cookie);
  expect(page.status).toBe(200);
  // The filter offers both networks; each row and the totals name theirs.
  expect(page.text).toMatch(/<option value="polygon-amoy">Polygon Amoy<\/option>/);
  expect(page.text).toMatch(/<td data-label="Network" class="nowrap">Polygon Amoy<\/td>/);
  expect(page.text).toMatch(/<tr data-network="polygon-amoy"><th scope="row">Polygon Amoy<\/th><td class="num">\d+<\/td>/);
  expect(page.text).toMatch(/<tr data-network="base-sepolia">/);
  const filtered = await consoleGet(server, `/console/payments?network=${encodeURIComponent(AMOY.caip2)}`, session.cookie);
  expect(filtered.text).toContain(`<dd data-total="count">${onAmoy}</dd>`);
  expect(filtered.text).not.toMatch(/<td data-label="Network" class="nowrap">Base Sepolia<\/td>/);
  // The CLI names each payment's network and lists one network's.
  const lines: string[] = [];
  expect(await runCli(['receipts', 'list', '--network', 'polygon-amoy', '--all', '--url', server.url, '--key', seller.platformKey], { out: (l) => lines.push(l), env: {} })).toBe(0);
  expect(lines.length).toBe(onAmoy);
  expect(lines.filter((l) => !/ USDC  polygon-amoy  (http|mcp):/.test(l))).toEqual([]);
  const csv = await consoleGet(server, '/console/payments.csv?network=polygon-amoy', session.cookie);
  expect(csv.text.trim().split('\n').slice(1).every((line) => line.includes(',polygon-amoy,'))).toBe(true);
});

// Last in the file: it moves Amoy's clock past a channel's withdraw delay.
test('payments_pay pays a batch-settlement route on Amoy from a wallet funded there: its channel lives on Amoy, is listed with its network, refunded there when idle, and withdrawn on Amoy\'s clock', async () => {
  const ours = await openStorefront(server, seller, { 'GET /metered-agent': { price: '$0.001', scheme: 'batch-settlement' } });
  try {
    const agent = await fundedAgent(server, '0');
    await mintOnAmoy(agent.address, parseUnits('0.2', 6));
    await createMandate(server, agent.key);
    for (let call = 0; call < 2; call++) {
      const paid = await pay(server, agent.key, { url: ours.resource('/metered-agent') });
      expect({ call, status: paid.status, error: paid.body.error }).toEqual({ call, status: 200, error: undefined });
      expect(paid.body).toMatchObject({ paid: true, cost: { scheme: 'batch-settlement', network: 'polygon-amoy', amountUsdc: '0.001' } });
    }
    // The first call deposited ten calls' worth into a channel on Amoy; the wallet holds nothing on Base Sepolia.
    expect(await amoyBalance(agent.address)).toBe(parseUnits('0.2', 6) - 10_000n);
    const channels = async () => (await server.request('GET', '/v0/wallet/channels', { key: agent.key })).body.channels;
    const [channel] = await channels();
    expect(channel).toMatchObject({ network: 'polygon-amoy', calls: 2, depositedUsdc: '0.01', chargedUsdc: '0.002', balanceUsdc: '0.01', availableUsdc: '0.008' });

    // Idle: Amoy's sweep claims the two calls and refunds the rest to the wallet, on Amoy.
    await vouchersOnceCaptured(server.app.db as never, channel.channelId);
    const accepting = (orgId: string) => server.app.payments.acceptance.accepting(orgId);
    // (It refunds every idle channel on Amoy: the earlier test's too.)
    expect((await server.app.payments.networks[1]!.batchSettlement.sweep.run({ everyMs: 1, idleRefundMs: 0, round: `amoy-idle-${Date.now()}` }, accepting))!.refunded).toBeGreaterThanOrEqual(1);
    expect(await amoyBalance(agent.address)).toBe(parseUnits('0.2', 6) - 2_000n);
    expect((await channels())[0]).toMatchObject({ network: 'polygon-amoy', claimedUsdc: '0.002', balanceUsdc: '0.002', availableUsdc: '0', refundedUsdc: '0.008' });

    // The next call deposits again; the wallet then withdraws the channel itself, on Amoy, and it is finalized once Amoy's clock has passed the delay.
    expect((await pay(server, agent.key, { url: ours.resource('/metered-agent') })).body).toMatchObject({ paid: true, cost: { network: 'polygon-amoy' } });
    await vouchersOnceCaptured(server.app.db as never, channel.channelId);
    const started = await server.request('POST', `/v0/wallet/channels/${channel.channelId}/withdraw`, { key: agent.key });
    expect({ status: started.status, error: started.body.error }).toEqual({ status: 200, error: undefined });
    expect(started.body).toMatchObject({ status: 'pending', amountUsdc: '0.009' });
    const amoyClient = createPublicClient({ transport: http(amoy.rpcUrl) });
    await amoyClient.request({ method: 'evm_increaseTime' as never, params: [toHex(901)] as never });
    await amoyClient.request({ method: 'evm_mine' as never, params: [] as never });
    const before = await amoyBalance(agent.address);
    expect(await server.app.buyer.channels.refundIdle({ idleMs: 24 * 3_600_000, round: `amoy-withdraw-${Date.now()}` })).toMatchObject({ withdrawalsFinished: 1 });
    expect(await amoyBalance(agent.address)).toBe(before + 9_000n);
    expect((await channels())[0]).toMatchObject({ network: 'polygon-amoy', withdrawal: { status: 'finalized', withdrawnUsdc: '0.009' } });
  } finally {
    await ours.close();
  }
});
