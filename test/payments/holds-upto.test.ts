// The backend door our middleware uses for upto routes: a hold for the maximum, then a capture naming
// the charge. A charge above the permit's maximum is refused with nothing moved and the hold kept; the
// maximum must be within the endpoint's registered cap; a second capture answers the first.
import { parseUnits, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { startTestServer, type TestServer } from '../support/server.js';
import { setEthBalance, testChain, usdcBalance, permit2ApprovedBuyer } from '../support/chain.js';
import { setUpSeller } from '../interop/seller.js';
import { openStorefront } from '../support/storefront.js';
import { encodeBase64Json } from 'agentgate-x402-wire';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';

/** The seller's storefront's route priced by usage, registered in beforeAll. */
let RESOURCE: string;
let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let facilitatorAddress: Address;

beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
  // GET: the backend's check at registration fetches the URL with GET.
  RESOURCE = (await openStorefront(server, seller, { 'GET /complete': { price: { upto: '$0.50' } } })).resource('/complete');
  facilitatorAddress = (await server.request('GET', '/v0/payments/settings', { key: seller.sellerKey })).body.uptoFacilitator;
});
afterAll(async () => { await server?.close(); });

async function uptoHeader(buyer: PrivateKeyAccount, max: string) {
  const accepted = { scheme: 'upto', network: 'eip155:84532', amount: max, asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 300, extra: { name: DEV_USDC_NAME, version: '2', facilitatorAddress } };
  const signed = await new UptoEvmScheme(buyer).createPaymentPayload(2, accepted as never);
  return encodeBase64Json({ x402Version: 2, resource: { url: RESOURCE }, accepted, payload: signed.payload });
}

const hold = (paymentHeader: string, amount: string) => server.request('POST', '/v0/payments/holds', { key: seller.sellerKey, body: { paymentHeader, resource: RESOURCE, amount } });
const capture = (id: string, body?: Record<string, unknown>) => server.request('POST', `/v0/payments/holds/${id}/capture`, { key: seller.sellerKey, body: body ?? {} });

it('a capture above the maximum is refused (400 settlement_exceeds_amount) and moves nothing; the hold then captures the real charge once', async () => {
  const buyer = await permit2ApprovedBuyer();
  const before = await usdcBalance(buyer.address);
  const held = await hold(await uptoHeader(buyer, '500000'), '0.5');
  expect(held.status).toBe(201);
  const over = await capture(held.body.holdId, { amount: '0.500001' });
  expect(over.status).toBe(400);
  expect(over.body).toMatchObject({ error: 'settlement_exceeds_amount' });
  expect(await usdcBalance(buyer.address)).toBe(before);

  const ok = await capture(held.body.holdId, { amount: '0.0123' });
  expect(ok.status).toBe(200);
  expect(ok.body.paymentResponse).toMatchObject({ success: true, amount: '12300' });
  const again = await capture(held.body.holdId, { amount: '0.4' });
  expect(again.body.paymentResponse).toMatchObject({ transaction: ok.body.paymentResponse.transaction, amount: '12300' });
  expect(await usdcBalance(buyer.address)).toBe(before - 12_300n);
});

it('a maximum above the endpoint\'s registered cap, or a permit for another maximum, is refused before anything is claimed', async () => {
  const buyer = await permit2ApprovedBuyer();
  const overCap = await hold(await uptoHeader(buyer, '600000'), '0.6');
  expect(overCap.status).toBe(402);
  expect(overCap.body).toMatchObject({ error: 'amount_mismatch' });
  const mismatch = await hold(await uptoHeader(buyer, '400000'), '0.5');
  expect(mismatch.status).toBe(402);
  expect(mismatch.body).toMatchObject({ error: 'amount_mismatch' });
});

it('a buyer who never approved Permit2 is refused with permit2_allowance_required', async () => {
  const buyer = privateKeyToAccount(generatePrivateKey());
  await setEthBalance(buyer.address, parseUnits('1', 18));
  const refused = await hold(await uptoHeader(buyer, '500000'), '0.5');
  expect(refused.status).toBe(402);
  expect(refused.body).toMatchObject({ error: 'permit2_allowance_required' });
});

it('an upto payment sent to redeem (settle before the handler) is refused, naming the hold, and moves nothing', async () => {
  const buyer = await permit2ApprovedBuyer();
  const before = await usdcBalance(buyer.address);
  const redeemed = await server.request('POST', '/v0/payments/redeem', { key: seller.sellerKey, body: { paymentHeader: await uptoHeader(buyer, '300000'), resource: RESOURCE, amount: '0.3' } });
  expect(redeemed.status).toBe(402);
  expect(redeemed.body).toMatchObject({ error: 'unsupported_scheme', message: expect.stringContaining('POST /v0/payments/holds') });
  expect(await usdcBalance(buyer.address)).toBe(before);
});
