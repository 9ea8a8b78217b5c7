// `exact` through Permit2 with the official packages, on the real backend and chain: the official client
// (@x402/fetch + @x402/evm's exact client) pays our middleware's route asking `assetTransferMethod:
// 'permit2'` on Express, Koa, Hono and Fastify; an official @x402/express seller asking for Permit2 uses
// us as its facilitator; a buyer with no gas and no Permit2 allowance pays through either gas sponsoring
// extension (EIP-2612 with our seller, the ERC-20 approval with an official seller declaring only it);
// a payment presented again is refused and the money moves once.
import express from 'express';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { toClientEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { registerExactEvmScheme as registerServerEvm } from '@x402/evm/exact/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { declareErc20ApprovalGasSponsoringExtension } from '@x402/extensions';
import { wrapFetchWithPayment } from '@x402/fetch';
import { maxUint256, type Address } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { permit2Allowance, permit2NonceUsed } from '../../server/chain/permit2.js';
import { EXACT_PROXY_ADDRESS } from '../../server/payments/schemes/exact/evm/chain.js';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { fundedBuyer, testChain, usdcBalance, permit2ApprovedBuyer } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { paidApp, registerEndpoint, serve, setUpSeller, type Framework } from './seller.js';

const NETWORK = 'eip155:84532';
const PRICE = 10_000n; // $0.01

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
}, 60_000);
afterAll(async () => { await server?.close(); });

/** The official client, remembering the payment headers it sent (to present one again). */
function officialClient(buyer: PrivateKeyAccount) {
  const sent: string[] = [];
  const recording: typeof fetch = async (input, init) => {
    const header = new Headers((input instanceof Request ? input.headers : init?.headers) ?? undefined).get('payment-signature');
    if (header) sent.push(header);
    return fetch(input, init);
  };
  // The signer can read the chain (allowance, EIP-2612 nonce) and sign transactions: what the gas sponsoring extensions need.
  const signer = toClientEvmSigner(buyer, testChain().publicClient as never);
  const client = new x402Client().register(NETWORK, new ExactEvmScheme(signer))
    .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] });
  return { pay: wrapFetchWithPayment(recording, client), sent };
}

const ethBalance = (address: Address) => testChain().publicClient.getBalance({ address });

async function recordOf(buyer: Address) {
  const list = await server.request('GET', '/v0/payments', { key: seller.platformKey });
  return list.body.payments.filter((p: any) => p.payerAddress === buyer);
}

async function ourSeller(framework: Framework, settle: 'after-handler' | 'before-handler' = 'after-handler', status = 200) {
  const options = { backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /report': { price: '$0.01', assetTransferMethod: 'permit2' as const, description: 'Report', settle } } };
  const running = await serve(paidApp(framework, options, 'GET', '/report', () => ({ status, body: status === 200 ? { report: 'done' } : { error: 'report_unavailable' } })));
  const registered = await registerEndpoint(server, seller.platformKey, { url: `${running.url}/report`, priceUsdc: '0.01' });
  expect(registered.status).toBe(201);
  return running;
}

describe.each(['Express', 'Koa', 'Hono', 'Fastify'] as const)('%s: our route with assetTransferMethod "permit2"', (framework) => {
  it('asks for Permit2 in its 402 (declaring both gas sponsoring extensions); the official client pays it once; the same payment again is refused', async () => {
    const running = await ourSeller(framework);
    try {
      const unpaid = await fetch(`${running.url}/report`);
      expect(unpaid.status).toBe(402);
      const required = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!);
      expect(required.accepts).toEqual([expect.objectContaining({ scheme: 'exact', network: NETWORK, amount: String(PRICE), payTo: seller.payTo, extra: expect.objectContaining({ assetTransferMethod: 'permit2' }) })]);
      expect(Object.keys(required.extensions ?? {}).sort()).toEqual(['eip2612GasSponsoring', 'erc20ApprovalGasSponsoring']);

      const buyer = await permit2ApprovedBuyer();
      const [buyerBefore, sellerBefore] = [await usdcBalance(buyer.address), await usdcBalance(seller.payTo)];
      const client = officialClient(buyer);
      const res = await client.pay(`${running.url}/report`);
      expect([res.status, await res.json()]).toEqual([200, { report: 'done' }]);
      const settlement = decodePaymentResponseHeader(res.headers.get('payment-response')!);
      expect(settlement).toMatchObject({ success: true, payer: buyer.address, network: NETWORK });
      const tx = await testChain().publicClient.getTransaction({ hash: settlement.transaction as `0x${string}` });
      expect(tx.to?.toLowerCase()).toBe(EXACT_PROXY_ADDRESS.toLowerCase());
      expect(await usdcBalance(buyer.address)).toBe(buyerBefore - PRICE);
      expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + PRICE);
      expect(await recordOf(buyer.address)).toEqual([expect.objectContaining({ status: 'settled', assetTransferMethod: 'permit2', amountUsdcRaw: String(PRICE), txHash: settlement.transaction })]);

      // The header the client sent, presented again: refused, nothing moves, the record stays one.
      expect(client.sent).toHaveLength(1);
      const replay = await fetch(`${running.url}/report`, { headers: { 'payment-signature': client.sent[0]! } });
      expect(replay.status).toBe(402);
      expect(await usdcBalance(buyer.address)).toBe(buyerBefore - PRICE);
      expect(await recordOf(buyer.address)).toHaveLength(1);
    } finally {
      await running.close();
    }
  });
});

it('a route settling before the handler (Express): paid through Permit2 once, the handler runs after the money moved', async () => {
  const running = await ourSeller('Express', 'before-handler');
  try {
    const buyer = await permit2ApprovedBuyer();
    const before = await usdcBalance(buyer.address);
    const client = officialClient(buyer);
    const res = await client.pay(`${running.url}/report`);
    expect(res.status).toBe(200);
    expect(await usdcBalance(buyer.address)).toBe(before - PRICE);
    expect((await fetch(`${running.url}/report`, { headers: { 'payment-signature': client.sent[0]! } })).status).toBe(402);
    expect(await usdcBalance(buyer.address)).toBe(before - PRICE);
  } finally {
    await running.close();
  }
});

it('a failing handler (502) on a route settling after it: the Permit2 payment is released, nothing moves, its nonce stays unused', async () => {
  const running = await ourSeller('Express', 'after-handler', 502);
  try {
    const buyer = await permit2ApprovedBuyer();
    const client = officialClient(buyer);
    const res = await client.pay(`${running.url}/report`);
    expect(res.status).toBe(502);
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n);
    const nonce = BigInt(JSON.parse(Buffer.from(client.sent[0]!, 'base64').toString('utf8')).payload.permit2Authorization.nonce);
    expect(await permit2NonceUsed(testChain().publicClient as never, buyer.address, nonce)).toBe(false);
  } finally {
    await running.close();
  }
});

it('a route table asking Permit2 where it cannot apply is refused at start-up', () => {
  const options = (route: Record<string, unknown>) => ({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /x': route as never } });
  expect(() => expressPayments(options({ price: { upto: '$0.50' }, assetTransferMethod: 'permit2' }))).toThrow(/for exact routes/);
  expect(() => expressPayments(options({ price: '$0.01', scheme: 'auth-capture', assetTransferMethod: 'permit2' }))).toThrow(/for exact routes/);
  expect(() => expressPayments(options({ price: '$0.01', assetTransferMethod: 'erc3009' }))).toThrow(/'eip3009' or 'permit2'/);
});

describe('a buyer with no gas and no Permit2 allowance', () => {
  it('pays our route with its USDC permit (eip2612GasSponsoring): the backend sends it with the settlement', async () => {
    const running = await ourSeller('Express');
    try {
      const buyer = await fundedBuyer('1');
      expect([await ethBalance(buyer.address), await permit2Allowance(testChain().publicClient as never, testChain().usdc, buyer.address)]).toEqual([0n, 0n]);
      const before = await usdcBalance(seller.payTo);
      const res = await officialClient(buyer).pay(`${running.url}/report`);
      expect(res.status).toBe(200);
      expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
      expect(await usdcBalance(seller.payTo)).toBe(before + PRICE);
      expect(await ethBalance(buyer.address)).toBe(0n);
      // The permit allowed exactly the price, which Permit2 spent.
      expect(await permit2Allowance(testChain().publicClient as never, testChain().usdc, buyer.address)).toBe(0n);
    } finally {
      await running.close();
    }
  });
});

describe('an official @x402/express seller asking for Permit2, with us as its facilitator', () => {
  const facilitator = () => new HTTPFacilitatorClient({
    url: `${server.url}/v0/x402`,
    createAuthHeaders: async () => { const h = { Authorization: `Bearer ${seller.sellerKey}` }; return { verify: h, settle: h, supported: h }; },
  });

  async function officialSeller(extensions: Record<string, unknown> = {}) {
    const resourceServer = registerServerEvm(new x402ResourceServer(facilitator()), { networks: [NETWORK] });
    const app = express();
    app.use(officialPaymentMiddleware({
      'GET /report': {
        accepts: { scheme: 'exact', network: NETWORK, payTo: seller.payTo, price: { asset: testChain().usdc, amount: String(PRICE), extra: { name: DEV_USDC_NAME, version: '2', assetTransferMethod: 'permit2' } } },
        description: 'Report', mimeType: 'application/json', extensions,
      },
    }, resourceServer));
    app.get('/report', (_req, res) => { res.json({ report: 'done' }); });
    const listening = createServer(app);
    listening.listen(0, '127.0.0.1');
    await once(listening, 'listening');
    return { url: `http://127.0.0.1:${(listening.address() as AddressInfo).port}`, close: () => { listening.closeAllConnections(); listening.close(); } };
  }

  it('/supported lists the gas sponsoring extensions', async () => {
    const supported = await facilitator().getSupported();
    expect(supported.extensions).toEqual(expect.arrayContaining(['eip2612GasSponsoring', 'erc20ApprovalGasSponsoring']));
    expect(supported.kinds).toEqual(expect.arrayContaining([expect.objectContaining({ x402Version: 2, scheme: 'exact', network: NETWORK })]));
  });

  it('the official client pays it through our /verify and /settle; the payment presented again is refused (permit2_invalid_nonce)', async () => {
    const app = await officialSeller();
    try {
      const buyer = await permit2ApprovedBuyer();
      const before = await usdcBalance(buyer.address);
      const client = officialClient(buyer);
      const res = await client.pay(`${app.url}/report`);
      expect(res.status).toBe(200);
      expect(await usdcBalance(buyer.address)).toBe(before - PRICE);
      const replay = await fetch(`${app.url}/report`, { headers: { 'payment-signature': client.sent[0]! } });
      expect(replay.status).toBe(402);
      expect(decodePaymentRequiredHeader(replay.headers.get('payment-required')!).error).toBe('permit2_invalid_nonce');
      expect(await usdcBalance(buyer.address)).toBe(before - PRICE);
    } finally {
      app.close();
    }
  });

  it('a buyer with no gas and no allowance pays with its signed approve transaction (erc20ApprovalGasSponsoring): we fund its gas, broadcast it, then settle', async () => {
    const app = await officialSeller(declareErc20ApprovalGasSponsoringExtension());
    try {
      const buyer = await fundedBuyer('1');
      expect(await ethBalance(buyer.address)).toBe(0n);
      const before = await usdcBalance(seller.payTo);
      const res = await officialClient(buyer).pay(`${app.url}/report`);
      expect(res.status).toBe(200);
      expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
      expect(await usdcBalance(seller.payTo)).toBe(before + PRICE);
      // The approval the buyer signed (unlimited, as the official client signs it) is on chain, and its nonce used.
      expect(await permit2Allowance(testChain().publicClient as never, testChain().usdc, buyer.address)).toBe(maxUint256 - PRICE);
      expect(await testChain().publicClient.getTransactionCount({ address: buyer.address })).toBe(1);
    } finally {
      app.close();
    }
  });

  it('concurrent /settle calls of one payment settle it once', async () => {
    const buyer = await permit2ApprovedBuyer();
    const requirements = { scheme: 'exact', network: NETWORK, amount: String(PRICE), asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 60, extra: { name: DEV_USDC_NAME, version: '2', assetTransferMethod: 'permit2' } };
    const signer = toClientEvmSigner(buyer, testChain().publicClient as never);
    const created = await new ExactEvmScheme(signer).createPaymentPayload(2, requirements as never);
    const payload = { ...created, accepted: requirements, resource: { url: 'https://seller.example/report' } };
    expect(await facilitator().verify(payload as never, requirements as never)).toMatchObject({ isValid: true, payer: buyer.address });
    const before = await usdcBalance(buyer.address);
    const answers = await Promise.all([1, 2, 3].map(() => facilitator().settle(payload as never, requirements as never).catch((err: any) => err.response ?? err)));
    expect(answers.filter((a: any) => a.success === true)).toHaveLength(1);
    expect(await usdcBalance(buyer.address)).toBe(before - PRICE);
  });
});
