import { encodeFunctionData, getAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { openStorefront } from '../support/storefront.js';
import { fundedBuyer, signAuthorization, usdcBalance } from '../support/chain.js';
import { reconcilePayments } from '../../server/payments/reconcile.js';
import { transferWithAuthorizationArgs, usdcAbi } from '../../server/chain/usdc.js';
import { signOfferReceipt, signReceipt } from '../../server/payments/receipts.js';

let server: TestServer;
let orgId: string;
let endpointId: string;
let payTo: Address;
/** The seller's storefront's report route, registered in beforeAll. */
let RESOURCE: string;

beforeAll(async () => {
  server = await startTestServer();
  const agent = await signUp(server);
  orgId = agent.org_id;
  payTo = privateKeyToAccount(generatePrivateKey()).address;
  await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } });
  const shop = await openStorefront(server, { platformKey: agent.platform_key }, { 'GET /report': { price: '$0.05' } });
  RESOURCE = shop.resource('/report');
  endpointId = shop.endpoint('/report').id;
});
afterAll(async () => { await server.close(); });

/** What a process leaves behind when it dies after claiming the nonce (and maybe after sending). */
async function claimedPayment(id: string) {
  const buyer = await fundedBuyer('1');
  const signed = await signAuthorization(buyer, { to: payTo, value: 50_000n });
  const chain = server.app.chain!;
  const a = signed.authorization;
  await server.app.payments.records.payments.create({
    _id: id, orgId, direction: 'in', endpointId, network: chain.network, chainId: chain.chainId, asset: chain.usdc.address,
    payerAddress: buyer.address, recipientAddress: getAddress(payTo), amountUsdcRaw: '50000', resourceUrl: RESOURCE, x402Version: 1,
    authorizationKey: `${chain.chainId}:${chain.usdc.address}:${buyer.address}:${a.nonce}`.toLowerCase(), authorizationNonce: a.nonce,
    authorization: { from: a.from, to: a.to, value: a.value.toString(), validAfter: a.validAfter.toString(), validBefore: a.validBefore.toString(), nonce: a.nonce },
    signature: signed.signature, status: 'verified', createdAt: new Date(Date.now() - 10 * 60_000),
  });
  return { buyer, signed };
}

describe('reconciliation after a crash', () => {
  it('submits a claimed payment that never reached the chain, exactly once', async () => {
    const { buyer } = await claimedPayment('pay_crashbeforesend');
    const before = await usdcBalance(payTo);
    const first = await reconcilePayments(server.app.payments, { olderThanMs: 60_000 });
    expect(first.settled).toBeGreaterThanOrEqual(1);
    const record = await server.request('GET', '/v0/payments/pay_crashbeforesend', { key: (await server.app.keys.issue('platform', { orgId })).rawKey });
    expect(record.body).toMatchObject({ status: 'settled', amountUsdcRaw: '50000' });
    expect(record.body.txHash).toMatch(/^0x/);
    expect(record.body.signedReceipt.body.paymentId).toBe('pay_crashbeforesend');
    expect(await usdcBalance(payTo)).toBe(before + 50_000n);
    // Running it again changes nothing: the money moved once.
    await reconcilePayments(server.app.payments, { olderThanMs: 60_000 });
    expect(await usdcBalance(payTo)).toBe(before + 50_000n);
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n - 50_000n);
  });

  it('records a transaction that was sent before the crash, found by its AuthorizationUsed event', async () => {
    const { signed } = await claimedPayment('pay_crashaftersend');
    const chain = server.app.chain!;
    const call = transferWithAuthorizationArgs(signed.authorization, signed.signature);
    // Sent from the relayer (through its lane, which owns the account's nonces), as the dead process had.
    const sent = await server.app.settlement!.settler.sendTransaction({ to: chain.usdc.address, data: encodeFunctionData({ abi: usdcAbi, functionName: 'transferWithAuthorization', args: call.args as never }) });
    const txHash = sent.transactionHash;
    const before = await usdcBalance(payTo);
    await reconcilePayments(server.app.payments, { olderThanMs: 60_000 });
    const doc = await server.app.payments.records.payments.findById('pay_crashaftersend').lean();
    expect(doc).toMatchObject({ status: 'settled', txHash: txHash as Hex });
    expect(await usdcBalance(payTo)).toBe(before);
  });

  it('writes the record from a settlement recorded before the crash: the receipt the buyer got, nothing sent again', async () => {
    const { signed } = await claimedPayment('pay_crashafterentry');
    const chain = server.app.chain!;
    const call = transferWithAuthorizationArgs(signed.authorization, signed.signature);
    const sent = await server.app.settlement!.settler.sendTransaction({ to: chain.usdc.address, data: encodeFunctionData({ abi: usdcAbi, functionName: 'transferWithAuthorization', args: call.args as never }) });
    // The dead process recorded the settlement and answered the buyer with its receipt, then died before
    // its record update: the record is still open.
    const payment = (await server.app.payments.records.payments.findById('pay_crashafterentry').lean())!;
    const settledAt = new Date(Date.now() - 5 * 60_000);
    const settledPayment = { ...payment, txHash: sent.transactionHash, settledAt };
    const entry = { _id: payment._id, orgId, txHash: sent.transactionHash, settledAt, signedReceipt: await signReceipt(server.app.serviceKey, settledPayment), offerReceipt: await signOfferReceipt(server.app.serviceKey, settledPayment) };
    await server.app.db.collection('payment_settlements').insertOne(entry as never);
    const key = (await server.app.keys.issue('platform', { orgId })).rawKey;

    // Read through the API meanwhile, it is settled already, with that receipt.
    const early = await server.request('GET', '/v0/payments/pay_crashafterentry', { key });
    expect(early.body).toMatchObject({ status: 'settled', txHash: sent.transactionHash, settledAt: settledAt.toISOString(), signedReceipt: entry.signedReceipt });
    expect((await server.app.payments.records.payments.findById('pay_crashafterentry').lean())?.status).toBe('verified');

    const before = await usdcBalance(payTo);
    const result = await reconcilePayments(server.app.payments, { olderThanMs: 60_000 });
    expect(result.settled).toBeGreaterThanOrEqual(1);
    const doc = await server.app.payments.records.payments.findById('pay_crashafterentry').lean();
    expect(doc).toMatchObject({ status: 'settled', txHash: sent.transactionHash, settledAt, signedReceipt: entry.signedReceipt, offerReceipt: entry.offerReceipt });
    expect(await usdcBalance(payTo)).toBe(before);
  });

  it('keeps the settlement recorded first: a second recording of one payment (settler and reconciliation racing) gets its receipt', async () => {
    await claimedPayment('pay_recordedtwice');
    const payment = (await server.app.payments.records.payments.findById('pay_recordedtwice').lean())!;
    const [a, b] = await Promise.all([
      server.app.payments.records.markSettled(payment, `0x${'a'.repeat(64)}`, null),
      server.app.payments.records.markSettled(payment, `0x${'b'.repeat(64)}`, null),
    ]);
    expect(b.txHash).toBe(a.txHash);
    expect(b.signedReceipt).toEqual(a.signedReceipt);
    expect(b.settledAt).toEqual(a.settledAt);
    await server.app.payments.records.recordsWritten();
    const doc = await server.app.payments.records.payments.findById('pay_recordedtwice').lean();
    expect(doc).toMatchObject({ status: 'settled', txHash: a.txHash, signedReceipt: a.signedReceipt });
    expect(await server.app.db.collection('payment_settlements').countDocuments({ _id: 'pay_recordedtwice' as never })).toBe(1);
  });

  it('leaves a fresh claim alone: another process may be settling it', async () => {
    await claimedPayment('pay_inflight');
    await server.app.payments.records.payments.updateOne({ _id: 'pay_inflight' }, { $set: { createdAt: new Date() } });
    await reconcilePayments(server.app.payments, { olderThanMs: 60_000 });
    const doc = await server.app.payments.records.payments.findById('pay_inflight').lean();
    expect(doc?.status).toBe('verified');
  });
});
