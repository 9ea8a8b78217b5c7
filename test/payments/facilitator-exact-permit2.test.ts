// /verify and /settle for `exact` through Permit2, called directly with payloads the official @x402/evm
// exact client signed, then tampered: each check answers @x402/evm's reason name, in its order, and
// nothing moves; the gas sponsoring extensions' refusals likewise. And a Permit2 exact payment left open
// by a crash is finished by reconciliation from Permit2's nonce bitmap.
import { toClientEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { createWalletClient, encodeFunctionData, http, maxUint256, parseUnits, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { erc20AllowanceAbi, PERMIT2_ADDRESS, permit2NonceUsed } from '../../server/chain/permit2.js';
import { EXACT_PROXY_ADDRESS, exactPermitOf } from '../../server/payments/schemes/exact/evm/chain.js';
import { decodeExactPermit2Payload } from 'agentgate-x402-wire';
import { reconcilePayments } from '../../server/payments/reconcile.js';
import { exactSettleCalldata } from '../../server/payments/schemes/exact/evm/permit2-verify.js';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { fundedBuyer, setEthBalance, testChain, usdcBalance, permit2ApprovedBuyer } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { setUpSeller } from '../interop/seller.js';

const NETWORK = 'eip155:84532';
const PRICE = 10_000n;

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
}, 60_000);
afterAll(async () => { await server?.close(); });

const requirements = (overrides: Record<string, unknown> = {}) => ({
  scheme: 'exact', network: NETWORK, amount: String(PRICE), asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 120,
  extra: { name: DEV_USDC_NAME, version: '2', assetTransferMethod: 'permit2' }, ...overrides,
});

/** What the official client sends for `requirements` (with the 402's extensions declared, if any). */
async function officialPayload(buyer: PrivateKeyAccount, extensions?: Record<string, unknown>) {
  const signer = toClientEvmSigner(buyer, testChain().publicClient as never);
  const created = await new ExactEvmScheme(signer).createPaymentPayload(2, requirements() as never, extensions ? { extensions } as never : undefined);
  return { ...created, accepted: requirements(), resource: { url: 'https://seller.example/report' } } as any;
}

async function call(path: 'verify' | 'settle', paymentPayload: unknown, paymentRequirements: unknown = requirements()) {
  return server.request('POST', `/v0/x402/${path}`, { key: seller.sellerKey, body: { x402Version: 2, paymentPayload, paymentRequirements } });
}

describe('every refusal names @x402/evm\'s reason, and nothing moves', () => {
  it('spender, payee, deadline, validAfter, amount, token, signature, allowance, balance', async () => {
    const buyer = await permit2ApprovedBuyer();
    const good = await officialPayload(buyer);
    const auth = good.payload.permit2Authorization;
    const tamper = (changes: Record<string, unknown>) => ({ ...good, payload: { ...good.payload, permit2Authorization: { ...auth, ...changes } } });
    const now = Math.floor(Date.now() / 1000);
    const cases: Array<[string, unknown]> = [
      ['invalid_permit2_spender', tamper({ spender: PERMIT2_ADDRESS })],
      ['invalid_permit2_recipient_mismatch', tamper({ witness: { ...auth.witness, to: privateKeyToAccount(generatePrivateKey()).address } })],
      ['permit2_deadline_expired', tamper({ deadline: String(now - 1) })],
      ['permit2_not_yet_valid', tamper({ witness: { ...auth.witness, validAfter: String(now + 3600) } })],
      ['permit2_amount_mismatch', tamper({ permitted: { ...auth.permitted, amount: String(PRICE + 1n) } })],
      ['permit2_token_mismatch', tamper({ permitted: { ...auth.permitted, token: PERMIT2_ADDRESS } })],
      ['invalid_permit2_signature', tamper({ nonce: String(BigInt(auth.nonce) + 1n) })],
      // Two failures at once: the earlier check answers (the payee before the amount, as @x402/evm orders them).
      ['invalid_permit2_recipient_mismatch', tamper({ witness: { ...auth.witness, to: PERMIT2_ADDRESS }, permitted: { ...auth.permitted, amount: '1' } })],
    ];
    for (const [reason, payload] of cases) {
      const answer = await call('verify', payload);
      expect([reason, answer.status, answer.body]).toEqual([reason, 200, expect.objectContaining({ isValid: false, invalidReason: reason, payer: buyer.address })]);
      const settled = await call('settle', payload);
      expect([reason, settled.body]).toEqual([reason, expect.objectContaining({ success: false, errorReason: reason })]);
    }
    // A buyer who never approved Permit2 and sends no extension; one with too little USDC.
    const unapproved = await fundedBuyer('1');
    expect((await call('verify', await officialPayload(unapproved))).body).toMatchObject({ isValid: false, invalidReason: 'permit2_allowance_required' });
    // Approved, then spends all but one atomic unit elsewhere.
    const poor = await permit2ApprovedBuyer();
    const { chain, rpcUrl, usdc, publicClient } = testChain();
    await publicClient.waitForTransactionReceipt({ hash: await createWalletClient({ chain, transport: http(rpcUrl), account: poor }).sendTransaction({ to: usdc, data: encodeFunctionData({ abi: [{ type: 'function', name: 'transfer', stateMutability: 'nonpayable', inputs: [{ type: 'address' }, { type: 'uint256' }], outputs: [{ type: 'bool' }] }], functionName: 'transfer', args: [seller.payTo, 1_000_000n - 1n] }) }) });
    expect((await call('verify', await officialPayload(poor))).body).toMatchObject({ isValid: false, invalidReason: 'permit2_insufficient_balance' });
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n);
    // The untampered payload is good.
    expect((await call('verify', good)).body).toEqual({ isValid: true, payer: buyer.address });
  });

  it('the gas sponsoring extensions\' refusals', async () => {
    const buyer = await fundedBuyer('1');
    const withPermit = await officialPayload(buyer, { eip2612GasSponsoring: { info: { version: '1' } } });
    const info = withPermit.extensions.eip2612GasSponsoring.info;
    const eip2612 = (changes: Record<string, unknown>) => ({ ...withPermit, extensions: { eip2612GasSponsoring: { info: { ...info, ...changes } } } });
    const stranger = privateKeyToAccount(generatePrivateKey()).address;
    for (const [reason, payload] of [
      ['eip2612_from_mismatch', eip2612({ from: stranger })],
      ['eip2612_asset_mismatch', eip2612({ asset: stranger })],
      ['eip2612_spender_not_permit2', eip2612({ spender: EXACT_PROXY_ADDRESS })],
      ['permit2_2612_amount_mismatch', eip2612({ amount: '1' })],
      ['eip2612_deadline_expired', eip2612({ deadline: '1' })],
      ['invalid_eip2612_extension_format', eip2612({ signature: '0x1234' })],
    ] as Array<[string, unknown]>) {
      expect([reason, (await call('verify', payload)).body]).toEqual([reason, expect.objectContaining({ isValid: false, invalidReason: reason })]);
    }
    expect((await call('verify', withPermit)).body).toEqual({ isValid: true, payer: buyer.address });

    const withApproval = await officialPayload(buyer, { erc20ApprovalGasSponsoring: { info: { version: '1' } } });
    const approval = withApproval.extensions.erc20ApprovalGasSponsoring.info;
    const erc20 = (changes: Record<string, unknown>) => ({ ...withApproval, extensions: { erc20ApprovalGasSponsoring: { info: { ...approval, ...changes } } } });
    // Another account's signed approval: the transaction's signer is not the payer.
    const other = await officialPayload(await fundedBuyer('1'), { erc20ApprovalGasSponsoring: { info: { version: '1' } } });
    // Approvals the buyer signs itself, each wrong in one way the spec's verification names.
    const fees = await testChain().publicClient.estimateFeesPerGas();
    const approve = encodeFunctionData({ abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
    const signedApproval = (changes: Record<string, unknown>) => buyer.signTransaction({
      to: testChain().usdc, data: approve, nonce: 0, gas: 70_000n, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas, chainId: 84532, type: 'eip1559', ...changes,
    } as never);
    for (const [reason, payload] of [
      ['erc20_approval_tx_fee_too_high', erc20({ signedTransaction: await signedApproval({ maxFeePerGas: fees.maxFeePerGas * 10n }) })],
      ['erc20_approval_tx_gas_too_high', erc20({ signedTransaction: await signedApproval({ gas: 1_000_000n }) })],
      ['erc20_approval_tx_wrong_chain', erc20({ signedTransaction: await signedApproval({ chainId: 1 }) })],
      ['erc20_approval_tx_nonce_mismatch', erc20({ signedTransaction: await signedApproval({ nonce: 5 }) })],
      ['erc20_approval_tx_wrong_spender', erc20({ signedTransaction: await signedApproval({ data: encodeFunctionData({ abi: erc20AllowanceAbi, functionName: 'approve', args: [stranger, maxUint256] }) }) })],
      ['erc20_approval_from_mismatch', erc20({ from: stranger })],
      ['erc20_approval_spender_not_permit2', erc20({ spender: EXACT_PROXY_ADDRESS })],
      ['erc20_approval_tx_signer_mismatch', erc20({ signedTransaction: other.extensions.erc20ApprovalGasSponsoring.info.signedTransaction })],
      ['erc20_approval_tx_parse_failed', erc20({ signedTransaction: '0x1234' })],
      ['invalid_erc20_approval_extension_format', erc20({ amount: 'all' })],
    ] as Array<[string, unknown]>) {
      expect([reason, (await call('verify', payload)).body]).toEqual([reason, expect.objectContaining({ isValid: false, invalidReason: reason })]);
    }
    expect((await call('verify', withApproval)).body).toEqual({ isValid: true, payer: buyer.address });
    expect(await testChain().publicClient.getTransactionCount({ address: buyer.address })).toBe(0);
  });
});

describe('reconciliation of Permit2 exact payments after a crash', () => {
  /** A payment claimed (verified) and left as a crash leaves it: never sent, ten minutes old. */
  async function claimedPayment() {
    const buyer = await permit2ApprovedBuyer();
    const decoded = decodeExactPermit2Payload(await officialPayload(buyer));
    if (!decoded.ok) throw new Error(decoded.message);
    const payments = server.app.payments;
    const accepting = (await payments.acceptance.accepting(seller.orgId))!;
    const claimed = await payments.exact.permit2.claim(accepting, decoded.payload, { resource: 'https://seller.example/report', amountAtomic: PRICE, endpoint: null, door: 'facilitator' }, { status: 'verified' });
    if (!claimed.ok) throw new Error(claimed.refused.message);
    await payments.records.payments.updateOne({ _id: claimed.payment._id }, { $set: { createdAt: new Date(Date.now() - 10 * 60_000) } });
    return { buyer, payment: claimed.payment, nonce: BigInt(decoded.payload.payload.permit2Authorization.nonce) };
  }

  it('sends a claimed payment that never reached the chain, exactly once', async () => {
    const { buyer, payment, nonce } = await claimedPayment();
    const before = await usdcBalance(seller.payTo);
    expect((await reconcilePayments(server.app.payments, { olderThanMs: 60_000 })).settled).toBeGreaterThanOrEqual(1);
    const doc = await server.app.payments.records.payments.findById(payment._id).lean();
    expect(doc).toMatchObject({ status: 'settled', assetTransferMethod: 'permit2', txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    expect(await permit2NonceUsed(testChain().publicClient as never, buyer.address, nonce)).toBe(true);
    await reconcilePayments(server.app.payments, { olderThanMs: 60_000 });
    expect(await usdcBalance(seller.payTo)).toBe(before + PRICE);
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
  });

  it('records the settlement a dead process sent before it could record it', async () => {
    const { buyer, payment, nonce } = await claimedPayment();
    // Sent by the proxy (anyone may), not recorded: as when the sender died after the chain took it.
    const record = (await server.app.payments.records.payments.findById(payment._id).lean())!;
    const { chain, rpcUrl } = testChain();
    const sender = privateKeyToAccount(generatePrivateKey());
    await setEthBalance(sender.address, parseUnits('1', 18));
    const hash = await createWalletClient({ chain, transport: http(rpcUrl), account: sender }).sendTransaction({ to: EXACT_PROXY_ADDRESS, data: exactSettleCalldata(exactPermitOf(record.permit2Authorization as never), record.signature as Hex) });
    await testChain().publicClient.waitForTransactionReceipt({ hash });
    const before = await usdcBalance(seller.payTo);
    await reconcilePayments(server.app.payments, { olderThanMs: 60_000 });
    expect(await server.app.payments.records.payments.findById(payment._id).lean()).toMatchObject({ status: 'settled', txHash: hash });
    expect(await permit2NonceUsed(testChain().publicClient as never, buyer.address, nonce)).toBe(true);
    expect(await usdcBalance(seller.payTo)).toBe(before);
  });
});
