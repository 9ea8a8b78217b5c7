// Every wallet kind the official exact-EVM facilitator accepts, paying with signatures the official
// client (@x402/fetch + @x402/evm) makes through each kind's signer, through our facilitator's /verify and
// /settle (an official @x402/express seller) and through our own middleware (Express adapter):
// - a smart wallet not deployed yet (ERC-6492: the signature names our dev SmartAccountFactory, allowed
//   in dev mode; settlement deploys the wallet first); a factory not allowed is refused before anything
//   is sent;
// - a deployed smart wallet (ERC-1271);
// - an EOA delegated by EIP-7702 (it has code: 0xef0100 || delegate), signing as an EOA.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Client } from '@x402/core/client';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { registerExactEvmScheme as registerClientEvm } from '@x402/evm/exact/client';
import { registerExactEvmScheme as registerServerEvm } from '@x402/evm/exact/server';
import type { ClientEvmSigner } from '@x402/evm';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import { createWalletClient, encodeFunctionData, hashTypedData, http, parseUnits, serializeErc6492Signature, toHex, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { randomBytes } from 'node:crypto';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { smartAccountFactoryAbi } from '../../server/wallet/smart-account-abi.js';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { sendUsdc, setEthBalance, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from './seller.js';

const NETWORK = 'eip155:84532';
const PRICE = 10_000n;

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let official: { url: string; http: Server };
let ours: RunningApp;

beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
  const client = new HTTPFacilitatorClient({
    url: `${server.url}/v0/x402`,
    createAuthHeaders: async () => { const h = { Authorization: `Bearer ${seller.sellerKey}` }; return { verify: h, settle: h, supported: h }; },
  });
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /weather': {
      accepts: { scheme: 'exact', network: NETWORK, payTo: seller.payTo, price: { asset: testChain().usdc, amount: String(PRICE), extra: { name: DEV_USDC_NAME, version: '2' } } },
      description: 'Weather', mimeType: 'application/json',
    },
  }, registerServerEvm(new x402ResourceServer(client), { networks: [NETWORK] })));
  app.get('/weather', (_req, res) => { res.json({ city: 'Oslo' }); });
  const http = createServer(app);
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  official = { http, url: `http://127.0.0.1:${(http.address() as AddressInfo).port}` };

  const mine = express();
  mine.use(expressPayments({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /weather': { price: '$0.01' } } }));
  mine.get('/weather', (_req, res) => { res.json({ city: 'Oslo', paidBy: res.locals.payment.payer }); });
  ours = await serve(mine);
  expect(await registerEndpoint(server, seller.platformKey, { url: `${ours.url}/weather`, priceUsdc: '0.01' })).toMatchObject({ status: 201 });
}, 60_000);

afterAll(async () => {
  official?.http.closeAllConnections();
  official?.http.close();
  await ours?.close();
  await server?.close();
});

const payingFetch = (signer: ClientEvmSigner) => wrapFetchWithPayment(fetch, registerClientEvm(new x402Client(), { signer })
  .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] }));

const factoryOf = () => testChain().factory;

/** Our SmartAccount checks the owner's ECDSA signature of the raw EIP-712 digest (contracts/SmartAccount.sol). */
async function smartWallet(options: { factory?: Address } = {}) {
  const owner = privateKeyToAccount(generatePrivateKey());
  const salt = toHex(randomBytes(32));
  const { publicClient } = testChain();
  const address = await publicClient.readContract({ address: factoryOf(), abi: smartAccountFactoryAbi, functionName: 'getAddress', args: [owner.address, salt] });
  const createCall = encodeFunctionData({ abi: smartAccountFactoryAbi, functionName: 'createAccount', args: [owner.address, salt] });
  const factory = options.factory ?? factoryOf();
  const signer: ClientEvmSigner = {
    address,
    async signTypedData(typed) {
      const inner = await owner.sign({ hash: hashTypedData(typed as never) });
      const code = await publicClient.getCode({ address });
      // As a smart-wallet SDK does (viem's smart accounts): ERC-6492-wrapped while not deployed.
      return code && code !== '0x' ? inner : serializeErc6492Signature({ address: factory, data: createCall, signature: inner });
    },
  };
  return { owner, address, salt, signer, createCall };
}

async function deploy(owner: PrivateKeyAccount, createCall: Hex) {
  const { publicClient, chain, rpcUrl } = testChain();
  await setEthBalance(owner.address, parseUnits('1', 18));
  const wallet = createWalletClient({ account: owner, chain, transport: http(rpcUrl) });
  await publicClient.waitForTransactionReceipt({ hash: await wallet.sendTransaction({ to: factoryOf(), data: createCall }) });
}

async function expectPaid(response: Response, payer: Address, before: { payer: bigint; payTo: bigint }) {
  const required = response.headers.get('PAYMENT-REQUIRED');
  expect({ status: response.status, error: required && JSON.parse(Buffer.from(required, 'base64').toString()).error }).toEqual({ status: 200, error: null });
  const settlement = decodePaymentResponseHeader(response.headers.get('PAYMENT-RESPONSE')!);
  expect(settlement).toMatchObject({ success: true, payer });
  const receipt = await testChain().publicClient.getTransactionReceipt({ hash: settlement.transaction as Hex });
  expect(receipt.status).toBe('success');
  expect(await usdcBalance(payer)).toBe(before.payer - PRICE);
  expect(await usdcBalance(seller.payTo)).toBe(before.payTo + PRICE);
}

/**
 * An EOA delegated by EIP-7702 (code 0xef0100 || delegate). USDC asks any payer with code by ERC-1271, so
 * the delegate must accept the EOA's own signatures: here a SmartAccount whose owner is the EOA itself
 * (`own`), or one owned by someone else (`foreign`, which the token would refuse).
 */
async function delegatedEoa(delegateOwner: 'own' | 'foreign') {
  const { publicClient, chain, rpcUrl } = testChain();
  const eoa = privateKeyToAccount(generatePrivateKey());
  const owner = delegateOwner === 'own' ? eoa.address : privateKeyToAccount(generatePrivateKey()).address;
  const salt = toHex(randomBytes(32));
  await setEthBalance(eoa.address, parseUnits('1', 18));
  const wallet = createWalletClient({ account: eoa, chain, transport: http(rpcUrl) });
  await publicClient.waitForTransactionReceipt({ hash: await wallet.sendTransaction({ to: factoryOf(), data: encodeFunctionData({ abi: smartAccountFactoryAbi, functionName: 'createAccount', args: [owner, salt] }) }) });
  const delegate = await publicClient.readContract({ address: factoryOf(), abi: smartAccountFactoryAbi, functionName: 'getAddress', args: [owner, salt] });
  const authorization = await wallet.signAuthorization({ contractAddress: delegate, executor: 'self' });
  await publicClient.waitForTransactionReceipt({ hash: await wallet.sendTransaction({ to: eoa.address, authorizationList: [authorization] }) });
  expect(await publicClient.getCode({ address: eoa.address })).toBe(`0xef0100${delegate.slice(2).toLowerCase()}`);
  return eoa;
}

const balances = async (payer: Address) => ({ payer: await usdcBalance(payer), payTo: await usdcBalance(seller.payTo) });

describe.each([
  ['the official seller (our /verify and /settle)', () => official.url],
  ['our middleware', () => ours.url],
])('through %s', (_door, url) => {
  test('a smart wallet not yet deployed pays (ERC-6492) and is deployed through the allowed factory', async () => {
    const wallet = await smartWallet();
    await sendUsdc(wallet.address, 1_000_000n);
    expect(await testChain().publicClient.getCode({ address: wallet.address })).toBeUndefined();
    const before = await balances(wallet.address);
    await expectPaid(await payingFetch(wallet.signer)(`${url()}/weather`), wallet.address, before);
    expect(await testChain().publicClient.getCode({ address: wallet.address })).toMatch(/^0x.{10,}/);
  });

  test('a deployed smart wallet pays (ERC-1271)', async () => {
    const wallet = await smartWallet();
    await deploy(wallet.owner, wallet.createCall);
    await sendUsdc(wallet.address, 1_000_000n);
    const before = await balances(wallet.address);
    await expectPaid(await payingFetch(wallet.signer)(`${url()}/weather`), wallet.address, before);
  });

  test('an EIP-7702-delegated account pays', async () => {
    const eoa = await delegatedEoa('own');
    await sendUsdc(eoa.address, 1_000_000n);
    const before = await balances(eoa.address);
    await expectPaid(await payingFetch(eoa)(`${url()}/weather`), eoa.address, before);
  });
});

test('a counterfactual wallet of a factory not allowed is refused by /verify and /settle, and nothing moves', async () => {
  const notAllowed = privateKeyToAccount(generatePrivateKey()).address;
  const wallet = await smartWallet({ factory: notAllowed });
  await sendUsdc(wallet.address, 1_000_000n);
  const before = await balances(wallet.address);
  const response = await payingFetch(wallet.signer)(`${official.url}/weather`);
  expect(response.status).toBe(402);
  // The official client's payload, presented to the facilitator directly.
  const client = registerClientEvm(new x402Client(), { signer: wallet.signer }).setSpendControls({ allowedAssets: true } as never);
  const requirements = { scheme: 'exact', network: NETWORK, amount: String(PRICE), asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 60, extra: { name: DEV_USDC_NAME, version: '2' } };
  const paymentPayload = await client.createPaymentPayload({ x402Version: 2, resource: { url: `${official.url}/weather`, description: '', mimeType: '' }, accepts: [requirements] } as never);
  const body = { x402Version: 2, paymentPayload, paymentRequirements: requirements };
  const verify = await server.request('POST', '/v0/x402/verify', { key: seller.sellerKey, body });
  expect(verify.body).toMatchObject({ isValid: false, invalidReason: 'eip6492_factory_not_allowed' });
  const settle = await server.request('POST', '/v0/x402/settle', { key: seller.sellerKey, body });
  expect(settle.body).toMatchObject({ success: false, errorReason: 'eip6492_factory_not_allowed' });
  expect(await balances(wallet.address)).toEqual(before);
  expect(await testChain().publicClient.getCode({ address: wallet.address })).toBeUndefined();
});

test('an EIP-7702 account whose delegate refuses its signature (ERC-1271) is refused by /verify, as the token would refuse it', async () => {
  const eoa = await delegatedEoa('foreign');
  await sendUsdc(eoa.address, 1_000_000n);
  const before = await balances(eoa.address);
  const client = registerClientEvm(new x402Client(), { signer: eoa }).setSpendControls({ allowedAssets: true } as never);
  const requirements = { scheme: 'exact', network: NETWORK, amount: String(PRICE), asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 60, extra: { name: DEV_USDC_NAME, version: '2' } };
  const paymentPayload = await client.createPaymentPayload({ x402Version: 2, resource: { url: `${official.url}/weather`, description: '', mimeType: '' }, accepts: [requirements] } as never);
  const body = { x402Version: 2, paymentPayload, paymentRequirements: requirements };
  expect((await server.request('POST', '/v0/x402/verify', { key: seller.sellerKey, body })).body).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_signature' });
  expect((await server.request('POST', '/v0/x402/settle', { key: seller.sellerKey, body })).body).toMatchObject({ success: false, errorReason: 'invalid_exact_evm_signature' });
  expect(await balances(eoa.address)).toEqual(before);
});
