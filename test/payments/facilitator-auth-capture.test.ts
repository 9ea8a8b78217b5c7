// agentgate as the facilitator and operator of the x402 `auth-capture` scheme: /supported offers it with
// our relayer as captureAuthorizer; the official @x402/evm auth-capture client signs; /verify checks in the
// spec's order and /settle authorizes into the escrow (money held, not yet the seller's). The seller then
// captures (through its hold) and refunds: each decided once, on the real chain and database. Refunds:
// partial and full, never more than captured, 5 concurrent calls refunding once, idempotent by key.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import { parseUnits, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { fundedBuyer, sendUsdc, signAuthorization, testChain, usdcBalance } from '../support/chain.js';
import { verifyReceipt } from 'agentgate-x402-wire';
import { DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';
import { AUTH_CAPTURE_ESCROW_ADDRESS, escrowState, paymentInfoHash, paymentInfoOf } from '../../server/payments/schemes/auth-capture/evm/chain.js';

const NETWORK = 'eip155:84532';
const PRICE = 1_000_000n; // $1

let server: TestServer;
let seller: { platformKey: string; sellerKey: string; payTo: Address; identityKey: string };
let operator: Address;

beforeAll(async () => {
  server = await startTestServer();
  const agent = await signUp(server);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} });
  seller = { platformKey: agent.platform_key, sellerKey: key.body.apiKey, payTo, identityKey: agent.identity.rawKey };
  const kind = (await server.request('GET', '/v0/x402/supported')).body.kinds.find((k: any) => k.scheme === 'auth-capture');
  operator = kind.extra.captureAuthorizer;
  // The operator funds refunds (OperatorRefundCollector pulls from it).
  await sendUsdc(operator, parseUnits('20', 6));
}, 60_000);
afterAll(async () => { await server?.close(); });

function requirements(terms: { amount?: bigint; captureIn?: number; refundIn?: number; method?: 'eip3009' | 'permit2'; captureAuthorizer?: Address; minFeeBps?: number } = {}) {
  const now = Math.floor(Date.now() / 1000);
  return {
    scheme: 'auth-capture', network: NETWORK, amount: String(terms.amount ?? PRICE), asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 120,
    extra: {
      name: DEV_USDC_NAME, version: DEV_USDC_VERSION, authCaptureEscrow: AUTH_CAPTURE_ESCROW_ADDRESS, captureAuthorizer: terms.captureAuthorizer ?? operator,
      captureDeadline: now + (terms.captureIn ?? 3600), refundDeadline: now + (terms.refundIn ?? 86_400), minFeeBps: terms.minFeeBps ?? 0, maxFeeBps: 0,
      feeRecipient: '0x0000000000000000000000000000000000000000', assetTransferMethod: terms.method ?? 'eip3009', paymentFlow: 'escrow', captureMode: 'deferred',
    },
  };
}

async function signed(buyer: PrivateKeyAccount, reqs: ReturnType<typeof requirements>) {
  const { payload } = await new AuthCaptureEvmScheme(buyer).createPaymentPayload(2, reqs as never);
  return { x402Version: 2, resource: { url: 'https://shop.example/report' }, accepted: reqs, payload };
}

const call = (path: '/verify' | '/settle', paymentPayload: unknown, paymentRequirements: unknown) =>
  server.request('POST', `/v0/x402${path}`, { key: seller.sellerKey, body: { x402Version: 2, paymentPayload, paymentRequirements } });

const didDocument = async () => (await server.request('GET', '/.well-known/did.json')).body;

const hashOf = (reqs: ReturnType<typeof requirements>, payload: any): Hex => paymentInfoHash(paymentInfoOf(reqs, payload.payload), 84532);

describe('/supported', () => {
  it('offers auth-capture with our relayer as the capture authorizer and no fee', async () => {
    const kinds = (await server.request('GET', '/v0/x402/supported')).body.kinds;
    expect(kinds).toContainEqual({ x402Version: 2, scheme: 'auth-capture', network: NETWORK, extra: { captureAuthorizer: operator, authCaptureEscrow: AUTH_CAPTURE_ESCROW_ADDRESS, minFeeBps: 0, maxFeeBps: 0, operators: [] } });
  });
});

describe('/verify and /settle', () => {
  it.each(['eip3009', 'permit2'] as const)('verifies, then settles as the escrow\'s authorize (%s): the buyer\'s money is held, not the seller\'s; a replay is refused', async (method) => {
    const buyer = await fundedBuyer('5');
    if (method === 'permit2') {
      const { erc20AllowanceAbi, PERMIT2_ADDRESS } = await import('../../server/chain/permit2.js');
      const { setEthBalance } = await import('../support/chain.js');
      const { createWalletClient, http, maxUint256 } = await import('viem');
      await setEthBalance(buyer.address, parseUnits('1', 18));
      const { chain, rpcUrl, usdc, publicClient } = testChain();
      const hash = await createWalletClient({ chain, transport: http(rpcUrl), account: buyer }).writeContract({ address: usdc, abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
      await publicClient.waitForTransactionReceipt({ hash });
    }
    const reqs = requirements({ method });
    const payload = await signed(buyer, reqs);
    const verified = await call('/verify', payload, reqs);
    expect(verified.body).toEqual({ isValid: true, payer: buyer.address });

    const [buyerBefore, sellerBefore] = [await usdcBalance(buyer.address), await usdcBalance(seller.payTo)];
    const settled = await call('/settle', payload, reqs);
    expect(settled.body).toMatchObject({ success: true, network: NETWORK, payer: buyer.address, amount: String(PRICE), transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    expect(await usdcBalance(buyer.address)).toBe(buyerBefore - PRICE);
    expect(await usdcBalance(seller.payTo)).toBe(sellerBefore);
    expect(await escrowState(testChain().publicClient as never, hashOf(reqs, payload))).toEqual({ hasCollectedPayment: true, capturable: PRICE, refundable: 0n });
    const record = (await server.request('GET', `/v0/payments/${settled.body.extensions.authCapture.paymentId}`, { key: seller.platformKey })).body;
    expect(record).toMatchObject({ scheme: 'auth-capture', status: 'held', amountUsdcRaw: String(PRICE), payerAddress: buyer.address });

    const again = await call('/settle', payload, reqs);
    expect(again.body).toMatchObject({ success: false, errorReason: 'invalid_auth_capture_evm_payment_already_collected' });
    expect(await usdcBalance(buyer.address)).toBe(buyerBefore - PRICE);
  });

  it('refuses, under the spec\'s reasons and in its order, what it cannot authorize; nothing moves', async () => {
    const buyer = await fundedBuyer('5');
    const reqs = requirements();
    const payload = await signed(buyer, reqs);
    const stranger = privateKeyToAccount(generatePrivateKey()).address;
    const cases: Array<[string, unknown, unknown]> = [
      ['invalid_auth_capture_evm_operator_not_admitted', await signed(buyer, requirements({ captureAuthorizer: stranger })), requirements({ captureAuthorizer: stranger })],
      ['invalid_auth_capture_evm_extra', payload, { ...reqs, extra: { ...reqs.extra, minFeeBps: 100, maxFeeBps: 100, feeRecipient: stranger } }],
      ['invalid_auth_capture_evm_payload_method_mismatch', payload, { ...reqs, extra: { ...reqs.extra, assetTransferMethod: 'permit2' } }],
      ['invalid_auth_capture_evm_deadline_ordering', payload, { ...reqs, extra: { ...reqs.extra, refundDeadline: reqs.extra.captureDeadline - 1 } }],
      ['invalid_auth_capture_evm_nonce_mismatch', payload, { ...reqs, extra: { ...reqs.extra, refundDeadline: reqs.extra.refundDeadline + 1 } }],
      ['invalid_auth_capture_evm_amount_mismatch', payload, { ...reqs, amount: '999999' }],
      ['invalid_auth_capture_evm_payload_format', { ...payload, payload: { ...(payload.payload as object), salt: undefined } }, reqs],
      ['invalid_auth_capture_evm_lifecycle_not_relayed', { ...payload, payload: { type: 'capture' } }, reqs],
    ];
    const before = await usdcBalance(buyer.address);
    for (const [reason, p, r] of cases) {
      const verified = await call('/verify', p, r);
      expect([reason, verified.body.isValid, verified.body.invalidReason]).toEqual([reason, false, reason]);
      const settled = await call('/settle', p, r);
      expect([reason, settled.body.success, settled.body.errorReason]).toEqual([reason, false, reason]);
    }
    expect(await usdcBalance(buyer.address)).toBe(before);
  });

  it('a payer without the funds is refused with insufficient_balance', async () => {
    const poor = privateKeyToAccount(generatePrivateKey());
    const reqs = requirements();
    const verified = await call('/verify', await signed(poor, reqs), reqs);
    expect(verified.body).toMatchObject({ isValid: false, invalidReason: 'invalid_auth_capture_evm_insufficient_balance' });
  });
});

/** A payment authorized through /settle and captured by its seller through the hold it became. */
async function captured(amount = PRICE) {
  const buyer = await fundedBuyer('5');
  const reqs = requirements({ amount });
  const payload = await signed(buyer, reqs);
  const settled = await call('/settle', payload, reqs);
  expect(settled.body.success).toBe(true);
  const id = settled.body.extensions.authCapture.paymentId as string;
  const capture = await server.request('POST', `/v0/payments/holds/${id}/capture`, { key: seller.sellerKey, body: {} });
  expect(capture.status).toBe(200);
  return { buyer, id, hash: hashOf(reqs, payload), capture: capture.body };
}

describe('capture, void and refunds of a facilitator-settled payment', () => {
  it('a capture pays the seller once, with a signed receipt; a second capture answers the first', async () => {
    const sellerBefore = await usdcBalance(seller.payTo);
    const { id, hash, capture } = await captured();
    expect(capture.paymentResponse).toMatchObject({ success: true, amount: String(PRICE) });
    expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + PRICE);
    expect(await escrowState(testChain().publicClient as never, hash)).toEqual({ hasCollectedPayment: true, capturable: 0n, refundable: PRICE });
    const again = await server.request('POST', `/v0/payments/holds/${id}/capture`, { key: seller.sellerKey, body: {} });
    expect(again.body.paymentResponse?.transaction).toBe(capture.paymentResponse.transaction);
    expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + PRICE);
    const record = (await server.request('GET', `/v0/payments/${id}`, { key: seller.platformKey })).body;
    expect(record).toMatchObject({ status: 'settled', txHash: capture.paymentResponse.transaction });
    expect(await verifyReceipt(record.signedReceipt, await didDocument())).toEqual({ ok: true });
  });

  it('a release voids the authorization: the buyer is whole, the record says voided', async () => {
    const buyer = await fundedBuyer('5');
    const reqs = requirements();
    const payload = await signed(buyer, reqs);
    const before = await usdcBalance(buyer.address);
    const settled = await call('/settle', payload, reqs);
    const id = settled.body.extensions.authCapture.paymentId as string;
    expect(await usdcBalance(buyer.address)).toBe(before - PRICE);
    expect((await server.request('POST', `/v0/payments/holds/${id}/release`, { key: seller.sellerKey })).status).toBe(200);
    expect(await usdcBalance(buyer.address)).toBe(before);
    expect(await escrowState(testChain().publicClient as never, hashOf(reqs, payload))).toEqual({ hasCollectedPayment: true, capturable: 0n, refundable: 0n });
    expect((await server.request('GET', `/v0/payments/${id}`, { key: seller.platformKey })).body.status).toBe('voided');
    expect((await server.request('POST', `/v0/payments/holds/${id}/capture`, { key: seller.sellerKey, body: {} })).status).toBe(409);
  });

  it('refunds in parts, at most what was captured; the money goes back on chain with a signed receipt per refund', async () => {
    const { buyer, id, hash } = await captured(3n * PRICE);
    const refund = (body: object, key?: string) => server.request('POST', `/v0/payments/${id}/refund`, { key: seller.platformKey, body, ...(key ? { headers: { 'Idempotency-Key': key } } : {}) });
    const before = await usdcBalance(buyer.address);

    const first = await refund({ amount: '1', reason: 'late delivery' });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ status: 'refunded', amountUsdcRaw: '1000000', reason: 'late delivery', txHash: expect.stringMatching(/^0x/), payment: { capturedUsdcRaw: '3000000', refundedUsdcRaw: '1000000' } });
    expect(await verifyReceipt(first.body.receipt, await didDocument())).toEqual({ ok: true });
    expect(first.body.receipt.body).toMatchObject({ kind: 'refund', paymentId: id, refundedUsdcRaw: '1000000', txHash: first.body.txHash });
    expect(await usdcBalance(buyer.address)).toBe(before + PRICE);

    const tooMuch = await refund({ amount: '2.000001', reason: 'x' });
    expect([tooMuch.status, tooMuch.body.error]).toEqual([409, 'refund_exceeds_captured']);
    expect(await usdcBalance(buyer.address)).toBe(before + PRICE);

    const rest = await refund({ reason: 'cancelled' }, 'key-rest');
    expect(rest.body).toMatchObject({ status: 'refunded', amountUsdcRaw: '2000000', payment: { refundedUsdcRaw: '3000000' } });
    const repeat = await refund({ reason: 'cancelled' }, 'key-rest');
    expect(repeat.body.id).toBe(rest.body.id);
    const reused = await refund({ amount: '0.5', reason: 'cancelled' }, 'key-rest');
    expect([reused.status, reused.body.error]).toEqual([409, 'idempotency_key_reused']);
    expect(await usdcBalance(buyer.address)).toBe(before + 3n * PRICE);
    expect(await escrowState(testChain().publicClient as never, hash)).toMatchObject({ refundable: 0n });
    expect((await server.request('GET', `/v0/payments/${id}/refunds`, { key: seller.sellerKey })).body.refunds.map((r: any) => r.amountUsdcRaw)).toEqual(['1000000', '2000000']);
  });

  it('5 concurrent full refunds of one payment refund it once', async () => {
    const { buyer, id } = await captured();
    const before = await usdcBalance(buyer.address);
    const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => server.request('POST', `/v0/payments/${id}/refund`, { key: seller.platformKey, body: { reason: `try ${i}` } })));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status !== 200).map((a) => a.body.error).every((e: string) => e === 'refund_in_progress' || e === 'refund_exceeds_captured')).toBe(true);
    expect(await usdcBalance(buyer.address)).toBe(before + PRICE);
    const ops = (await server.request('GET', `/v0/payments/${id}/refunds`, { key: seller.platformKey })).body.refunds;
    expect(ops).toHaveLength(1);
  });

  it('5 concurrent refunds with one Idempotency-Key refund once and all answer that refund', async () => {
    const { buyer, id } = await captured();
    const before = await usdcBalance(buyer.address);
    const answers = await Promise.all(Array.from({ length: 5 }, () => server.request('POST', `/v0/payments/${id}/refund`, { key: seller.platformKey, body: { amount: '0.4', reason: 'partial' }, headers: { 'Idempotency-Key': 'same' } })));
    expect(new Set(answers.filter((a) => a.status === 200).map((a) => a.body.id)).size).toBe(1);
    expect(answers.every((a) => a.status === 200 || a.body.error === 'refund_in_progress')).toBe(true);
    expect(await usdcBalance(buyer.address)).toBe(before + 400_000n);
  });

  it('refuses a refund of an exact payment (no escrow, nothing moves), of a held payment, and another org\'s payment is a 404', async () => {
    const buyer = await fundedBuyer('1');
    const exactReqs = { scheme: 'exact', network: 'base-sepolia', maxAmountRequired: '10000', resource: 'https://shop.example/exact', description: '', mimeType: 'application/json', payTo: seller.payTo, maxTimeoutSeconds: 60, asset: testChain().usdc, extra: { name: DEV_USDC_NAME, version: DEV_USDC_VERSION } };
    const auth = await signAuthorization(buyer, { to: seller.payTo, value: 10_000n });
    const exactPayload = { x402Version: 1, scheme: 'exact', network: 'base-sepolia', payload: { signature: auth.signature, authorization: { ...auth.authorization, value: '10000', validAfter: auth.authorization.validAfter.toString(), validBefore: auth.authorization.validBefore.toString() } } };
    const exact = await server.request('POST', '/v0/x402/settle', { key: seller.sellerKey, body: { x402Version: 1, paymentPayload: exactPayload, paymentRequirements: exactReqs } });
    expect(exact.body.success).toBe(true);
    const exactId = (await server.request('GET', '/v0/payments', { key: seller.platformKey })).body.payments.find((p: any) => p.payerAddress === buyer.address).id;
    const before = await usdcBalance(buyer.address);
    const refused = await server.request('POST', `/v0/payments/${exactId}/refund`, { key: seller.platformKey, body: { reason: 'x' } });
    expect([refused.status, refused.body.error, refused.body.message]).toEqual([409, 'refund_not_possible', expect.stringContaining('exact scheme')]);
    expect(await usdcBalance(buyer.address)).toBe(before);

    const held = await fundedBuyer('5');
    const reqs = requirements();
    const settled = await call('/settle', await signed(held, reqs), reqs);
    const heldRefund = await server.request('POST', `/v0/payments/${settled.body.extensions.authCapture.paymentId}/refund`, { key: seller.platformKey, body: { reason: 'x' } });
    expect([heldRefund.status, heldRefund.body.error]).toEqual([409, 'refund_not_possible']);

    const other = await signUp(server);
    const { id } = await captured();
    expect((await server.request('POST', `/v0/payments/${id}/refund`, { key: other.platform_key, body: { reason: 'x' } })).status).toBe(404);
    const bad = await server.request('POST', `/v0/payments/${id}/refund`, { key: seller.platformKey, body: { amount: '-1', reason: 'x' } });
    expect([bad.status, bad.body.error]).toEqual([400, 'validation_error']);
    const noReason = await server.request('POST', `/v0/payments/${id}/refund`, { key: seller.platformKey, body: {} });
    expect([noReason.status, noReason.body.error]).toEqual([400, 'validation_error']);
  });
});

describe('refunding from the CLI and over MCP', () => {
  it('`agentgate payments refund` refunds once, however often the same command line runs', async () => {
    const { buyer, id } = await captured();
    const before = await usdcBalance(buyer.address);
    const cli = (args: string[]) => promisify(execFile)('node', [join(process.cwd(), 'bin', 'agentgate.js'), ...args], { env: { ...process.env, AGENTGATE_CREDENTIALS: '/nonexistent/none.json' }, timeout: 60_000 })
      .then(({ stdout }) => ({ code: 0, stdout }), (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }));
    const args = ['payments', 'refund', id, '--amount', '0.25', '--reason', 'damaged', '--idempotency-key', 'cli-1', '--key', seller.platformKey, '--url', server.url];
    const first = await cli(args);
    expect(first).toMatchObject({ code: 0, stdout: expect.stringContaining(`refunded 0.25 USDC of ${id}`) });
    expect((await cli(args)).code).toBe(0);
    expect(await usdcBalance(buyer.address)).toBe(before + 250_000n);
    const noReason = await cli(['payments', 'refund', id, '--key', seller.platformKey, '--url', server.url]);
    expect([noReason.code, noReason.stdout]).toEqual([2, expect.stringContaining('--reason is required')]);
    const tooMuch = await cli(['payments', 'refund', id, '--amount', '5', '--reason', 'x', '--key', seller.platformKey, '--url', server.url]);
    expect([tooMuch.code, tooMuch.stdout]).toEqual([1, expect.stringContaining('refund_exceeds_captured')]);
  }, 90_000);

  it('the payments_refund MCP tool refunds the org\'s payment, idempotently', async () => {
    const { buyer, id } = await captured();
    const before = await usdcBalance(buyer.address);
    const mcp = new Client({ name: 'refund-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${seller.identityKey}` } } }));
    try {
      const call = () => mcp.callTool({ name: 'payments_refund', arguments: { id, amount: '0.5', reason: 'agent refund', idempotencyKey: 'mcp-1' } });
      const first = JSON.parse((((await call()).content) as Array<{ text: string }>)[0]!.text);
      expect(first).toMatchObject({ paymentId: id, status: 'refunded', amountUsdcRaw: '500000', receipt: expect.anything() });
      const again = JSON.parse((((await call()).content) as Array<{ text: string }>)[0]!.text);
      expect(again.id).toBe(first.id);
      expect(await usdcBalance(buyer.address)).toBe(before + 500_000n);
    } finally {
      await mcp.close();
    }
  });
});
