// agentgate as the facilitator of the x402 `upto` scheme: the official @x402/express seller with an upto
// route (UptoEvmScheme from @x402/evm) points its HTTPFacilitatorClient at /v0/x402, the official upto
// client pays it, and the seller charges what the request used (setSettlementOverrides), at most the
// signed maximum. Plus /supported, zero charges, at-most-once, and every refusal with nothing moved.
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Client } from '@x402/core/client';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { UptoEvmScheme as UptoClientScheme } from '@x402/evm/upto/client';
import { UptoEvmScheme as UptoServerScheme } from '@x402/evm/upto/server';
import { paymentMiddleware as officialPaymentMiddleware, setSettlementOverrides } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { toClientEvmSigner } from '@x402/evm';
import { declareEip2612GasSponsoringExtension } from '@x402/extensions';
import { verifyReceiptSignatureJWS } from '@x402/extensions/offer-receipt';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { createWalletClient, http, maxUint256, parseUnits, type Address, type Hex } from 'viem';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { fundedBuyer, setEthBalance, testChain, usdcBalance } from '../support/chain.js';
import { verifyReceipt } from 'agentgate-x402-wire';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { erc20AllowanceAbi, PERMIT2_ADDRESS, permit2NonceUsed } from '../../server/chain/permit2.js';
import { uptoPermitOf, uptoTypedData } from '../../server/payments/schemes/upto/evm/chain.js';

const NETWORK = 'eip155:84532';
const MAX = 500_000n; // $0.50

let server: TestServer;
let seller: { platformKey: string; sellerKey: string; payTo: Address };
let shop: { url: string; http: Server };
let hooks: { received: Array<{ headers: Record<string, unknown>; body: any }>; http: Server; url: string };
let facilitatorAddress: Address;
/** What the shop's handler charges next (atomic units, as a string), set per test. */
let nextCharge = '0';

const facilitatorClient = (key: string) => new HTTPFacilitatorClient({
  url: `${server.url}/v0/x402`,
  createAuthHeaders: async () => { const h = { Authorization: `Bearer ${key}` }; return { verify: h, settle: h, supported: h }; },
});

async function listen(app: express.Express | ((req: any, res: any) => void)) {
  const httpServer = createServer(app as never);
  httpServer.listen(0, '127.0.0.1');
  await once(httpServer, 'listening');
  return { http: httpServer, url: `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}` };
}

/** A buyer holding USDC and a little ETH, that approved Permit2 once (the scheme's precondition) unless told not to. */
async function uptoBuyer(options: { approve?: boolean } = {}): Promise<PrivateKeyAccount> {
  const buyer = await fundedBuyer('5');
  if (options.approve === false) return buyer;
  await setEthBalance(buyer.address, parseUnits('1', 18));
  const { chain, rpcUrl, usdc, publicClient } = testChain();
  const wallet = createWalletClient({ chain, transport: http(rpcUrl), account: buyer });
  const hash = await wallet.writeContract({ address: usdc, abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
  await publicClient.waitForTransactionReceipt({ hash });
  return buyer;
}

beforeAll(async () => {
  server = await startTestServer({ WEBHOOK_RETRY_BASE_MS: '20' });
  const agent = await signUp(server);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} });
  seller = { platformKey: agent.platform_key, sellerKey: key.body.apiKey, payTo };
  facilitatorAddress = (await server.request('GET', '/v0/x402/supported')).body.kinds.find((k: any) => k.scheme === 'upto').extra.facilitatorAddress;

  // A seller on the official stack only: @x402/express, an upto route, agentgate as its facilitator.
  const resourceServer = new x402ResourceServer(facilitatorClient(seller.sellerKey)).register(NETWORK, new UptoServerScheme());
  const app = express();
  app.use(officialPaymentMiddleware({
    'POST /complete': {
      accepts: { scheme: 'upto', network: NETWORK, payTo, price: { asset: testChain().usdc, amount: MAX.toString(), extra: { name: DEV_USDC_NAME, version: '2' } } },
      description: 'LLM completion, billed by tokens', mimeType: 'application/json',
    },
    // The same, declaring the eip2612GasSponsoring extension: a buyer without a Permit2 allowance signs USDC's permit instead.
    'POST /complete-gasless': {
      accepts: { scheme: 'upto', network: NETWORK, payTo, price: { asset: testChain().usdc, amount: MAX.toString(), extra: { name: DEV_USDC_NAME, version: '2' } } },
      description: 'LLM completion, billed by tokens', mimeType: 'application/json', extensions: { ...declareEip2612GasSponsoringExtension() },
    },
  }, resourceServer));
  app.post(['/complete', '/complete-gasless'], (_req, res) => {
    setSettlementOverrides(res, { amount: nextCharge });
    res.json({ text: 'Hello from the model', usage: { tokens: 123 } });
  });
  shop = await listen(app);

  const received: Array<{ headers: Record<string, unknown>; body: any }> = [];
  const hookServer = await listen((req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => { received.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString()) }); res.end('ok'); });
  });
  hooks = { ...hookServer, received };
});

afterAll(async () => {
  for (const h of [shop?.http, hooks?.http]) { h?.closeAllConnections(); h?.close(); }
  await server?.close();
});

const payingFetch = (buyer: PrivateKeyAccount) => wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, new UptoClientScheme(buyer))
  .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] }));

describe('/supported', () => {
  it('advertises upto on the chain with the facilitator address the buyer binds into its permit: one of our relayers', async () => {
    const supported = await facilitatorClient(seller.sellerKey).getSupported();
    const upto = supported.kinds.find((k) => k.scheme === 'upto');
    expect(upto).toMatchObject({ x402Version: 2, network: NETWORK, extra: { facilitatorAddress: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/) } });
    expect(supported.signers['eip155:*']).toContain(upto!.extra!.facilitatorAddress);
  });
});

describe('the official upto client pays the official @x402/express upto seller through agentgate', () => {
  it('charges what the handler named, not the maximum; the records, receipts and webhook carry both', async () => {
    const endpoint = await server.request('POST', '/v0/payments/endpoints', {
      key: seller.platformKey, body: { url: `${shop.url}/complete`, maxPriceUsdc: '0.50', webhookUrl: `${hooks.url}/hook`, method: 'POST' },
    });
    expect(endpoint.status).toBe(201);
    const buyer = await uptoBuyer();
    const [buyerBefore, sellerBefore] = [await usdcBalance(buyer.address), await usdcBalance(seller.payTo)];
    nextCharge = '12300'; // $0.0123: 123 tokens at $0.0001
    const res = await payingFetch(buyer)(`${shop.url}/complete`, { method: 'POST' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ text: 'Hello from the model', usage: { tokens: 123 } });
    expect(await usdcBalance(buyer.address)).toBe(buyerBefore - 12_300n);
    expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + 12_300n);
    const settlement = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(settlement).toMatchObject({ success: true, network: NETWORK, payer: buyer.address, amount: '12300' });
    expect(settlement.transaction).toMatch(/^0x[0-9a-f]{64}$/);

    const list = await server.request('GET', '/v0/payments', { key: seller.platformKey });
    const payment = list.body.payments.find((p: any) => p.payerAddress === buyer.address);
    expect(payment).toMatchObject({ status: 'settled', scheme: 'upto', amountUsdcRaw: '12300', maxAmountUsdcRaw: MAX.toString(), endpointId: endpoint.body.id, txHash: settlement.transaction });
    const detail = await server.request('GET', `/v0/payments/${payment.id}`, { key: seller.sellerKey });
    const didDocument = (await server.request('GET', '/.well-known/did.json')).body;
    expect(await verifyReceipt(detail.body.signedReceipt, didDocument)).toMatchObject({ ok: true });
    expect(detail.body.signedReceipt.body).toMatchObject({ amountUsdcRaw: '12300', maxAmountUsdcRaw: MAX.toString(), scheme: 'upto', txHash: settlement.transaction });
    expect(await verifyReceiptSignatureJWS(detail.body.offerReceipt)).toMatchObject({ payer: buyer.address, transaction: settlement.transaction, amount: '12300', maxAmount: MAX.toString() });

    const deadline = Date.now() + 20_000;
    while (!hooks.received.some((h) => JSON.stringify(h.body).includes(buyer.address)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const hook = hooks.received.find((h) => JSON.stringify(h.body).includes(buyer.address));
    expect(hook?.body).toMatchObject({ event: 'payment.received', body: { amountUsdcRaw: '12300', maxAmountUsdcRaw: MAX.toString() } });
  });

  it('a zero charge answers success with no transaction and moves nothing', async () => {
    const buyer = await uptoBuyer();
    const before = await usdcBalance(buyer.address);
    nextCharge = '0';
    const res = await payingFetch(buyer)(`${shop.url}/complete`, { method: 'POST' });
    expect(res.status).toBe(200);
    expect(decodePaymentResponseHeader(res.headers.get('payment-response')!)).toMatchObject({ success: true, transaction: '', amount: '0' });
    expect(await usdcBalance(buyer.address)).toBe(before);
    const list = await server.request('GET', '/v0/payments', { key: seller.platformKey });
    expect(list.body.payments.find((p: any) => p.payerAddress === buyer.address)).toMatchObject({ status: 'settled', amountUsdcRaw: '0', maxAmountUsdcRaw: MAX.toString(), txHash: null });
  });

  it('a buyer who never approved Permit2 gets a 402 and pays nothing (the facilitator answered 412)', async () => {
    const buyer = await uptoBuyer({ approve: false });
    const before = await usdcBalance(buyer.address);
    nextCharge = '1000';
    const res = await payingFetch(buyer)(`${shop.url}/complete`, { method: 'POST' });
    expect(res.status).toBe(402);
    expect(await usdcBalance(buyer.address)).toBe(before);
  });
});

describe('the EIP-2612 route (eip2612GasSponsoring): no Permit2 approval needed', () => {
  it('a buyer with USDC and no gas signs USDC\'s permit for Permit2; agentgate submits it with the settlement (settleWithPermit)', async () => {
    const buyer = await uptoBuyer({ approve: false });
    const { publicClient, usdc } = testChain();
    const before = await usdcBalance(buyer.address);
    nextCharge = '33000';
    // readContract lets the official client read the token's permit nonce and the allowance.
    const signer = toClientEvmSigner(buyer, publicClient as never);
    const paying = wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, new UptoClientScheme(signer))
      .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: usdc, maxAmountPerPayment: '1000000' }] }));
    const res = await paying(`${shop.url}/complete-gasless`, { method: 'POST' });
    expect(res.status).toBe(200);
    expect(decodePaymentResponseHeader(res.headers.get('payment-response')!)).toMatchObject({ success: true, amount: '33000' });
    expect(await usdcBalance(buyer.address)).toBe(before - 33_000n);
    // The permit set Permit2's allowance to the maximum; the settlement used what was charged.
    expect(await publicClient.readContract({ address: usdc, abi: erc20AllowanceAbi, functionName: 'allowance', args: [buyer.address, PERMIT2_ADDRESS] })).toBe(MAX - 33_000n);
    expect(await publicClient.getBalance({ address: buyer.address })).toBe(0n);
  });
});

describe('/verify and /settle for upto, called directly', () => {
  const requirements = (amount: bigint | string = MAX, overrides: Record<string, unknown> = {}) => ({
    scheme: 'upto', network: NETWORK, amount: amount.toString(), asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 120,
    extra: { name: DEV_USDC_NAME, version: '2', facilitatorAddress }, ...overrides,
  });
  /** The official client's payload for `requirements`. */
  async function payment(buyer: PrivateKeyAccount, req = requirements()) {
    const result = await new UptoClientScheme(buyer).createPaymentPayload(2, req as never);
    return { x402Version: 2, resource: { url: 'https://shop.example/complete' }, accepted: req, payload: result.payload };
  }
  const call = (path: 'verify' | 'settle', paymentPayload: unknown, paymentRequirements: unknown) =>
    server.request('POST', `/v0/x402/${path}`, { key: seller.sellerKey, body: { x402Version: 2, paymentPayload, paymentRequirements } });

  it('verifies a good payment for its maximum, moving nothing', async () => {
    const buyer = await uptoBuyer();
    const before = await usdcBalance(buyer.address);
    const verified = await call('verify', await payment(buyer), requirements());
    expect(verified.status).toBe(200);
    expect(verified.body).toEqual({ isValid: true, payer: buyer.address });
    expect(await usdcBalance(buyer.address)).toBe(before);
  });

  it('a missing Permit2 allowance: 412 permit2_allowance_required on verify and on settle; nothing moved', async () => {
    const buyer = await uptoBuyer({ approve: false });
    const before = await usdcBalance(buyer.address);
    const p = await payment(buyer);
    const verified = await call('verify', p, requirements());
    expect(verified.status).toBe(412);
    expect(verified.body).toMatchObject({ isValid: false, invalidReason: 'permit2_allowance_required', invalidMessage: expect.stringContaining('approve Permit2') });
    const settled = await call('settle', p, requirements(1000n));
    expect(settled.status).toBe(412);
    expect(settled.body).toMatchObject({ success: false, errorReason: 'permit2_allowance_required', transaction: '' });
    expect(await usdcBalance(buyer.address)).toBe(before);
  });

  it('an EIP-2612 permit in the payload that does not allow the maximum to Permit2 is refused; nothing moved', async () => {
    const buyer = await uptoBuyer({ approve: false });
    const p = await payment(buyer);
    const info = { from: buyer.address, asset: testChain().usdc, spender: PERMIT2_ADDRESS, amount: '1', nonce: '0', deadline: String(Math.floor(Date.now() / 1000) + 300), signature: `0x${'11'.repeat(65)}`, version: '1' };
    const answer = await call('verify', { ...p, extensions: { eip2612GasSponsoring: { info } } }, requirements());
    expect(answer.body).toMatchObject({ isValid: false, invalidReason: 'invalid_eip2612_extension_format', invalidMessage: expect.stringContaining('maximum') });
  });

  it('a permit for more than the requirements\' maximum is refused', async () => {
    const buyer = await uptoBuyer();
    const p = await payment(buyer, requirements(MAX * 2n));
    const verified = await call('verify', { ...p, accepted: requirements(MAX) }, requirements(MAX));
    expect(verified.body).toMatchObject({ isValid: false });
    const mismatched = await call('verify', p, requirements(MAX));
    expect(mismatched.body).toMatchObject({ isValid: false, invalidReason: 'permit2_amount_mismatch' });
  });

  it('a settle amount above the permit is refused, nothing moves, and the permit stays good for a correct charge', async () => {
    const buyer = await uptoBuyer();
    const before = await usdcBalance(buyer.address);
    const p = await payment(buyer);
    const over = await call('settle', p, requirements(MAX + 1n));
    expect(over.body).toMatchObject({ success: false, errorReason: 'invalid_upto_evm_payload_settlement_exceeds_amount', transaction: '' });
    expect(await usdcBalance(buyer.address)).toBe(before);
    const ok = await call('settle', p, requirements(250_000n));
    expect(ok.body).toMatchObject({ success: true, amount: '250000', payer: buyer.address });
    expect(await usdcBalance(buyer.address)).toBe(before - 250_000n);
  });

  it('settles at most once: concurrent and replayed copies move the charge once', async () => {
    const buyer = await uptoBuyer();
    const before = await usdcBalance(buyer.address);
    const p = await payment(buyer);
    const answers = await Promise.all(Array.from({ length: 5 }, () => call('settle', p, requirements(40_000n))));
    expect(answers.filter((a) => a.body.success === true)).toHaveLength(1);
    for (const a of answers.filter((x) => x.body.success !== true)) expect(a.body.errorReason).toBe('permit2_invalid_nonce');
    const again = await call('settle', p, requirements(1n));
    expect(again.body).toMatchObject({ success: false, errorReason: 'permit2_invalid_nonce' });
    expect(await usdcBalance(buyer.address)).toBe(before - 40_000n);
    const permit = uptoPermitOf((p.payload as { permit2Authorization: Parameters<typeof uptoPermitOf>[0] }).permit2Authorization);
    expect(await permit2NonceUsed(testChain().publicClient as never, buyer.address, permit.nonce)).toBe(true);
  });

  it('refuses a permit bound to another facilitator, another payee, an expired deadline, a forged signature', async () => {
    const buyer = await uptoBuyer();
    const before = await usdcBalance(buyer.address);
    const stranger = privateKeyToAccount(generatePrivateKey()).address;

    const otherFacilitator = await payment(buyer, requirements(MAX, { extra: { name: DEV_USDC_NAME, version: '2', facilitatorAddress: stranger } }));
    expect((await call('verify', otherFacilitator, otherFacilitator.accepted)).body).toMatchObject({ isValid: false, invalidReason: 'upto_facilitator_mismatch' });
    expect((await call('settle', otherFacilitator, { ...otherFacilitator.accepted, amount: '1' })).body).toMatchObject({ success: false, errorReason: 'upto_facilitator_mismatch' });

    // The seller asks to be paid, but the buyer signed for someone else (a seller's payee it does not own).
    const p = await payment(buyer);
    const wrongPayee = { ...p, payload: { ...(p.payload as object), permit2Authorization: { ...(p.payload as any).permit2Authorization, witness: { ...(p.payload as any).permit2Authorization.witness, to: stranger } } } };
    expect((await call('verify', wrongPayee, requirements())).body).toMatchObject({ isValid: false, invalidReason: 'invalid_permit2_recipient_mismatch' });

    // Signed by the buyer, but with a deadline already past.
    const wirePermit = (p.payload as any).permit2Authorization;
    const expiredWire = { ...wirePermit, deadline: String(Math.floor(Date.now() / 1000) - 10), nonce: '77' };
    const expiredSig = await buyer.signTypedData(uptoTypedData(uptoPermitOf(expiredWire), 84532));
    expect((await call('verify', { ...p, payload: { signature: expiredSig, permit2Authorization: expiredWire } }, requirements())).body)
      .toMatchObject({ isValid: false, invalidReason: 'permit2_deadline_expired' });

    const forged = await privateKeyToAccount(generatePrivateKey()).signTypedData(uptoTypedData(uptoPermitOf(wirePermit), 84532));
    expect((await call('settle', { ...p, payload: { signature: forged as Hex, permit2Authorization: wirePermit } }, requirements(1n))).body)
      .toMatchObject({ success: false, errorReason: 'invalid_permit2_signature' });
    expect(await usdcBalance(buyer.address)).toBe(before);
  });

  it('refuses an upto payload presented against exact requirements', async () => {
    const buyer = await uptoBuyer();
    const p = await payment(buyer);
    const answer = await call('verify', p, { ...requirements(), scheme: 'exact' });
    expect(answer.body).toMatchObject({ isValid: false, invalidReason: 'invalid_upto_evm_scheme' });
  });
});
