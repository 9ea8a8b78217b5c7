// Reconciliation of `upto` payments left open by a crash: the Permit2 nonce bitmap decides; an unsent
// settlement is sent once (from the facilitator account the permit names), a sent one is found by its
// token Transfer through the proxy, and re-running moves nothing.
import { createWalletClient, encodeFunctionData, http, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { UptoEvmScheme as UptoClientScheme } from '@x402/evm/upto/client';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { testChain, usdcBalance, permit2ApprovedBuyer } from '../support/chain.js';
import { reconcilePayments } from '../../server/payments/reconcile.js';
import { permit2Abi, PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { UPTO_PROXY_ADDRESS, uptoProxyAbi, uptoSettleArgs } from '../../server/payments/schemes/upto/evm/chain.js';
import { decodeUptoPayload } from 'agentgate-x402-wire';
import { uptoPermitOfRecord } from '../../server/payments/schemes/upto/evm/settle.js';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import type { Hex } from 'viem';

let server: TestServer;
let orgId: string;
let payTo: Address;

beforeAll(async () => {
  server = await startTestServer();
  const agent = await signUp(server);
  orgId = agent.org_id;
  payTo = privateKeyToAccount(generatePrivateKey()).address;
  await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } });
});
afterAll(async () => { await server.close(); });

/** A claimed upto payment, as a process leaves it when it dies after the claim: `verified`, ten minutes old. */
async function claimedUpto(charge: bigint, buyer?: PrivateKeyAccount) {
  buyer ??= await permit2ApprovedBuyer();
  const payments = server.app.payments;
  const requirements = {
    scheme: 'upto', network: 'eip155:84532', amount: '300000', asset: testChain().usdc, payTo, maxTimeoutSeconds: 600,
    extra: { name: DEV_USDC_NAME, version: '2', facilitatorAddress: await payments.upto.facilitatorAddress() },
  };
  const signed = await new UptoClientScheme(buyer).createPaymentPayload(2, requirements as never);
  const decoded = decodeUptoPayload({ x402Version: 2, resource: { url: 'https://shop.example/llm' }, accepted: requirements, payload: signed.payload });
  if (!decoded.ok) throw new Error(decoded.message);
  const seller = (await payments.acceptance.accepting(orgId))!;
  const claimed = await payments.upto.claim(seller, decoded.payload, { resource: 'https://shop.example/llm', maxAmount: 300_000n, endpoint: null, door: 'facilitator' }, { status: 'verified', charge });
  if (!claimed.ok) throw new Error(claimed.refused.message);
  await payments.records.payments.updateOne({ _id: claimed.payment._id }, { $set: { createdAt: new Date(Date.now() - 10 * 60_000) } });
  return { buyer, payment: claimed.payment };
}

describe('reconciliation of upto payments after a crash', () => {
  it('sends a claimed charge that never reached the chain, exactly once', async () => {
    const { buyer, payment } = await claimedUpto(120_000n);
    const before = await usdcBalance(payTo);
    expect((await reconcilePayments(server.app.payments, { olderThanMs: 60_000 })).settled).toBeGreaterThanOrEqual(1);
    const doc = await server.app.payments.records.payments.findById(payment._id).lean();
    expect(doc).toMatchObject({ status: 'settled', amountUsdcRaw: '120000', maxAmountUsdcRaw: '300000' });
    expect(doc!.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await usdcBalance(payTo)).toBe(before + 120_000n);
    await reconcilePayments(server.app.payments, { olderThanMs: 60_000 });
    expect(await usdcBalance(payTo)).toBe(before + 120_000n);
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n - 120_000n);
  });

  it('records a settlement sent before the crash, found by its Transfer through the proxy', async () => {
    const { payment } = await claimedUpto(70_000n);
    const permit = uptoPermitOfRecord(payment);
    const sent = await server.app.settlement!.settler.submitFrom(permit.facilitator, {
      to: UPTO_PROXY_ADDRESS, gas: 250_000n, data: encodeFunctionData({ abi: uptoProxyAbi, functionName: 'settle', args: uptoSettleArgs(permit, 70_000n, payment.signature as Hex) }),
    });
    const fate = await sent.fate;
    expect(fate.kind).toBe('mined');
    const before = await usdcBalance(payTo);
    await reconcilePayments(server.app.payments, { olderThanMs: 60_000 });
    const doc = await server.app.payments.records.payments.findById(payment._id).lean();
    expect(doc).toMatchObject({ status: 'settled', txHash: sent.hash });
    expect(await usdcBalance(payTo)).toBe(before);
  });

  it('never records another permit\'s settlement of the same amount as this one\'s (the buyer cancelled this nonce)', async () => {
    // One buyer, one seller, the same charge twice: the Transfers look alike, only the calls differ.
    const first = await claimedUpto(50_000n);
    const second = await claimedUpto(50_000n, first.buyer);
    const permit = uptoPermitOfRecord(first.payment);
    const sent = await server.app.settlement!.settler.submitFrom(permit.facilitator, {
      to: UPTO_PROXY_ADDRESS, gas: 250_000n, data: encodeFunctionData({ abi: uptoProxyAbi, functionName: 'settle', args: uptoSettleArgs(permit, 50_000n, first.payment.signature as Hex) }),
    });
    expect((await sent.fate).kind).toBe('mined');
    // The buyer cancels the second permit's nonce on Permit2: its nonce is used, and it moved nothing.
    const { chain, rpcUrl, publicClient } = testChain();
    const nonce = uptoPermitOfRecord(second.payment).nonce;
    const cancel = await createWalletClient({ chain, transport: http(rpcUrl), account: first.buyer })
      .writeContract({ address: PERMIT2_ADDRESS, abi: permit2Abi, functionName: 'invalidateUnorderedNonces', args: [nonce >> 8n, 1n << (nonce & 0xffn)] });
    await publicClient.waitForTransactionReceipt({ hash: cancel });

    await reconcilePayments(server.app.payments, { olderThanMs: 60_000 });
    expect(await server.app.payments.records.payments.findById(first.payment._id).lean()).toMatchObject({ status: 'settled', txHash: sent.hash });
    const other = await server.app.payments.records.payments.findById(second.payment._id).lean();
    expect(other!.status).not.toBe('settled');
    expect(other!.txHash).not.toBe(sent.hash);
    expect(await usdcBalance(first.buyer.address)).toBe(1_000_000n - 50_000n);
  });

  it('records a zero charge as settled with no transaction', async () => {
    const { buyer, payment } = await claimedUpto(0n);
    await reconcilePayments(server.app.payments, { olderThanMs: 60_000 });
    expect(await server.app.payments.records.payments.findById(payment._id).lean()).toMatchObject({ status: 'settled', txHash: '', amountUsdcRaw: '0' });
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n);
  });
});
