// A process that dies between sending an escrow call and recording it: the database is put back in the
// state such a crash leaves (the chain moved, the record did not), and reconciliation (reconcile.ts, the
// escrow operations' sweep, the hold expiry sweep) finishes it from the chain: the transaction that moved
// is found and recorded, and nothing is sent twice.
import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import { parseUnits, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { fundedBuyer, sendUsdc, testChain, usdcBalance } from '../support/chain.js';
import { reconcilePayments } from '../../server/payments/reconcile.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';
import { AUTH_CAPTURE_ESCROW_ADDRESS, escrowState } from '../../server/payments/schemes/auth-capture/evm/chain.js';

const NETWORK = 'eip155:84532';
const PRICE = 1_000_000n;

let server: TestServer;
let seller: { platformKey: string; sellerKey: string; payTo: Address };
let operator: Address;

beforeAll(async () => {
  server = await startTestServer();
  const agent = await signUp(server);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } });
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} });
  seller = { platformKey: agent.platform_key, sellerKey: key.body.apiKey, payTo };
  operator = (await server.request('GET', '/v0/x402/supported')).body.kinds.find((k: any) => k.scheme === 'auth-capture').extra.captureAuthorizer;
  await sendUsdc(operator, parseUnits('5', 6));
}, 60_000);
afterAll(async () => { await server?.close(); });

async function authorized() {
  const buyer = await fundedBuyer('2');
  const now = Math.floor(Date.now() / 1000);
  const reqs = {
    scheme: 'auth-capture', network: NETWORK, amount: String(PRICE), asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 120,
    extra: { name: DEV_USDC_NAME, version: DEV_USDC_VERSION, authCaptureEscrow: AUTH_CAPTURE_ESCROW_ADDRESS, captureAuthorizer: operator, captureDeadline: now + 3600, refundDeadline: now + 86_400, minFeeBps: 0, maxFeeBps: 0, feeRecipient: '0x0000000000000000000000000000000000000000' },
  };
  const { payload } = await new AuthCaptureEvmScheme(buyer).createPaymentPayload(2, reqs as never);
  const settled = await server.request('POST', '/v0/x402/settle', { key: seller.sellerKey, body: { x402Version: 2, paymentPayload: { x402Version: 2, resource: { url: 'https://shop.example/r' }, accepted: reqs, payload }, paymentRequirements: reqs } });
  expect(settled.body.success).toBe(true);
  return { buyer, id: settled.body.extensions.authCapture.paymentId as string };
}

const payments = () => server.app.payments.records.payments;
const ops = () => server.app.payments.authCapture.operations.ops;
const long = new Date(Date.now() - 3_600_000);
const stateOf = async (id: string) => escrowState(testChain().publicClient as never, (await payments().findById(id).lean())!.escrow!.hash as never);

it('an authorize sent but not recorded: found collected on chain, held, then voided by the expiry sweep (the buyer was never served)', async () => {
  const { buyer, id } = await authorized();
  const paid = await usdcBalance(buyer.address);
  // The crash: the record still says the authorize is being sent.
  await payments().updateOne({ _id: id }, { $set: { status: 'verified', createdAt: long }, $unset: { 'escrow.authorizeTx': 1 } });
  await reconcilePayments(server.app.payments, { olderThanMs: 0 });
  const held = await payments().findById(id).lean();
  expect(held).toMatchObject({ status: 'held', escrow: { authorizeTx: expect.stringMatching(/^0x/) } });
  expect(await usdcBalance(buyer.address)).toBe(paid); // found, not sent again
  await server.app.holds.releaseExpired();
  expect((await payments().findById(id).lean())!.status).toBe('voided');
  expect(await usdcBalance(buyer.address)).toBe(paid + PRICE);
});

it('a capture sent but not recorded: reconciliation records the capture it finds, and captures nothing twice', async () => {
  const { id } = await authorized();
  const sellerBefore = await usdcBalance(seller.payTo);
  const captured = await server.request('POST', `/v0/payments/holds/${id}/capture`, { key: seller.sellerKey, body: {} });
  const txHash = captured.body.paymentResponse.transaction;
  expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + PRICE);
  // The crash: the capture left, nothing of it was written (the decision to capture was).
  await server.app.payments.records.settlements['model'].deleteOne({ _id: id });
  await payments().updateOne({ _id: id }, { $set: { status: 'held', createdAt: long }, $unset: { txHash: 1, settledAt: 1, signedReceipt: 1, offerReceipt: 1, webhook: 1 } });
  await ops().updateOne({ _id: `${id}:capture` }, { $set: { status: 'pending' }, $unset: { txHash: 1, doneAt: 1 } });
  await server.app.payments.records.payments.db.collection('payment_hold_decisions').updateOne({ _id: id } as never, { $set: { at: long } });

  await reconcilePayments(server.app.payments, { olderThanMs: 0 });
  expect(await payments().findById(id).lean()).toMatchObject({ status: 'settled', txHash });
  expect(await ops().findById(`${id}:capture`).lean()).toMatchObject({ status: 'done', txHash });
  expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + PRICE);
  expect(await stateOf(id)).toMatchObject({ capturable: 0n, refundable: PRICE });
});

it('a refund sent but not recorded: the sweep finds it on chain and records it; the buyer is refunded once', async () => {
  const { buyer, id } = await authorized();
  await server.request('POST', `/v0/payments/holds/${id}/capture`, { key: seller.sellerKey, body: {} });
  const refund = await server.request('POST', `/v0/payments/${id}/refund`, { key: seller.platformKey, body: { amount: '0.3', reason: 'partial' } });
  expect(refund.body.status).toBe('refunded');
  const refunded = await usdcBalance(buyer.address);
  // The crash: the refund left, its record still says pending, with no transaction.
  await ops().updateOne({ _id: refund.body.id }, { $set: { status: 'pending', createdAt: long }, $unset: { txHash: 1, doneAt: 1, receipt: 1 } });
  const busy = await server.request('POST', `/v0/payments/${id}/refund`, { key: seller.platformKey, body: { reason: 'more' } });
  expect([busy.status, busy.body.error]).toEqual([409, 'refund_in_progress']);

  await server.app.payments.authCapture.operations.sweep();
  expect(await ops().findById(refund.body.id).lean()).toMatchObject({ status: 'done', txHash: refund.body.txHash, receipt: expect.anything() });
  expect(await usdcBalance(buyer.address)).toBe(refunded);
  expect(await stateOf(id)).toMatchObject({ refundable: PRICE - 300_000n });
  // What is left can still be refunded, and no more.
  const rest = await server.request('POST', `/v0/payments/${id}/refund`, { key: seller.platformKey, body: { reason: 'rest' } });
  expect(rest.body).toMatchObject({ status: 'refunded', amountUsdcRaw: '700000' });
  expect(await usdcBalance(buyer.address)).toBe(refunded + 700_000n);
});

it('an operation whose escrow state is not what it expected is failed without sending anything', async () => {
  const { buyer, id } = await authorized();
  await server.request('POST', `/v0/payments/holds/${id}/capture`, { key: seller.sellerKey, body: {} });
  const before = await usdcBalance(buyer.address);
  // A refund decided against balances the escrow does not hold (as if another refund moved them meanwhile).
  await ops().create({ _id: `${id}:refund:0`, paymentId: id, orgId: (await payments().findById(id).lean())!.orgId, kind: 'refund', seq: 0, amountRaw: '100000', before: { capturable: '0', refundable: '999' }, status: 'pending', reason: 'stale', createdAt: long });
  await server.app.payments.authCapture.operations.sweep();
  expect(await ops().findById(`${id}:refund:0`).lean()).toMatchObject({ status: 'failed', failureReason: 'unexpected_payment_state' });
  expect(await usdcBalance(buyer.address)).toBe(before);
});

it('one capture run twice at once (a resend while the first is in flight) captures once', async () => {
  const { id } = await authorized();
  const sellerBefore = await usdcBalance(seller.payTo);
  const payment = (await payments().findById(id).lean())!;
  const operations = server.app.payments.authCapture.operations;
  const [a, b] = await Promise.all([operations.capture(payment, PRICE), operations.capture(payment, PRICE)]);
  expect([a, b].filter((o) => o.ok)).not.toHaveLength(0);
  // Whichever answered pending, the operation ends done once.
  const deadline = Date.now() + 20_000;
  while ((await ops().findById(`${id}:capture`).lean())?.status !== 'done' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(await ops().findById(`${id}:capture`).lean()).toMatchObject({ status: 'done' });
  expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + PRICE);
  expect(await stateOf(id)).toMatchObject({ capturable: 0n, refundable: PRICE });
});

it('one refund run twice at once (the escrow would accept both) refunds once', async () => {
  const { buyer, id } = await authorized();
  await server.request('POST', `/v0/payments/holds/${id}/capture`, { key: seller.sellerKey, body: {} });
  const payment = (await server.app.payments.records.record(id))!;
  const before = await usdcBalance(buyer.address);
  const op = { _id: `${id}:refund:0`, paymentId: id, orgId: payment.orgId, kind: 'refund' as const, seq: 0, amountRaw: '300000', before: { capturable: '0', refundable: String(PRICE) }, status: 'pending' as const, reason: 'twice', createdAt: new Date() };
  await ops().create(op);
  const operations = server.app.payments.authCapture.operations;
  await Promise.all([operations.run(payment, op), operations.run(payment, op), operations.run(payment, op)]);
  const deadline = Date.now() + 20_000;
  while ((await ops().findById(op._id).lean())?.status !== 'done' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(await ops().findById(op._id).lean()).toMatchObject({ status: 'done' });
  expect(await usdcBalance(buyer.address)).toBe(before + 300_000n);
  expect(await stateOf(id)).toMatchObject({ refundable: PRICE - 300_000n });
});
