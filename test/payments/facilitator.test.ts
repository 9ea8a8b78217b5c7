import { getAddress, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { fundedBuyer, paymentHeaderV1, signAuthorization, usdcBalance, testChain } from '../support/chain.js';
import { AUTH_CAPTURE_ESCROW_ADDRESS } from '../../server/payments/schemes/auth-capture/evm/chain.js';
import { encodeBase64Json, verifyReceipt } from 'agentgate-x402-wire';
import { openStorefront } from '../support/storefront.js';

let server: TestServer;
let seller: { platformKey: string; sellerKey: string; payTo: Address; orgId: string };
/** The seller's storefront's weather route, registered in beforeAll. */
let RESOURCE: string;
const PRICE = 10_000n; // $0.01

beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  const agent = await signUp(server);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} });
  expect(key.status).toBe(201);
  seller = { platformKey: agent.platform_key, sellerKey: key.body.apiKey, payTo, orgId: agent.org_id };
  RESOURCE = (await openStorefront(server, seller, { 'GET /weather': { price: '$0.01', endpoint: { description: 'weather' } } })).resource('/weather');
});
afterAll(async () => { await server.close(); });

const redeem = (paymentHeader: string, overrides: Partial<{ resource: string; amount: string }> = {}) =>
  server.request('POST', '/v0/payments/redeem', { key: seller.sellerKey, body: { paymentHeader, resource: RESOURCE, amount: '0.01', ...overrides } });

describe('seller set-up', () => {
  it('issues a loid- seller key once, and serves settings to it', async () => {
    expect(seller.sellerKey).toMatch(/^loid-[A-Za-z0-9_-]{43}$/);
    const settings = await server.request('GET', '/v0/payments/settings', { key: seller.sellerKey });
    expect(settings.status).toBe(200);
    expect(settings.body).toEqual({
      network: 'base-sepolia', chainId: 84532, asset: getAddress(testChain().usdc), payTo: seller.payTo,
      assetName: 'USD Coin', assetVersion: '2', maxTimeoutSeconds: 60,
      // The relayer x402 upto buyers name in their permits (the middleware puts it in an upto route's 402).
      uptoFacilitator: server.app.chain!.relayerAccounts[0]!.address,
      // auth-capture: the escrow's operator is the same relayer, and the escrow it authorizes into.
      authCaptureOperator: server.app.chain!.relayerAccounts[0]!.address,
      authCaptureEscrow: AUTH_CAPTURE_ESCROW_ADDRESS,
      // batch-settlement: the key that signs claims and refunds, named in every channel the middleware offers.
      channelReceiverAuthorizer: await server.app.payments.channels.receiverAuthorizer(),
    });
    const list = await server.request('GET', '/v0/payments/seller-keys', { key: seller.platformKey });
    expect(JSON.stringify(list.body)).not.toContain(seller.sellerKey);
  });

  it('keeps seller keys off identity routes and identity keys off seller routes', async () => {
    const agent = await signUp(server);
    expect((await server.request('GET', '/v0/payments/settings', { key: agent.identity.rawKey })).status).toBe(403);
    const me = await server.request('GET', '/v0/whoami', { key: seller.sellerKey });
    expect(me.body).toEqual({ keyType: 'seller', org: { id: seller.orgId, plan: 'FREE' } });
    expect((await server.request('POST', '/v0/platform/identities', { key: seller.sellerKey, body: {} })).status).toBe(403);
  });

  it('validates endpoints: price, URL, duplicates, and another org sees 404', async () => {
    const bad = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: 'https://x.example/a', priceUsdc: '-1' } });
    expect([bad.status, bad.body.error]).toEqual([400, 'validation_error']);
    expect(bad.body.message).toContain('priceUsdc');
    const notUrl = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: 'ftp://x', priceUsdc: '1' } });
    // Refused for what it is, before any fetch of the URL.
    expect([notUrl.status, notUrl.body.error]).toEqual([400, 'invalid_resource']);
    // The URL answers this seller's 402 (the check passes); it is registered already.
    const dup = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: RESOURCE, priceUsdc: '0.01' } });
    expect(dup.status).toBe(409);
    const other = await signUp(server);
    const mine = await server.request('GET', '/v0/payments/endpoints', { key: seller.platformKey });
    const id = mine.body.endpoints[0].id;
    expect((await server.request('GET', `/v0/payments/endpoints/${id}`, { key: other.platform_key })).status).toBe(404);
    expect((await server.request('DELETE', `/v0/payments/endpoints/${id}`, { key: other.platform_key })).status).toBe(404);
  });
});

describe('endpoint updates', () => {
  it('changes the price without fetching the URL again, and redeem follows the new price', async () => {
    const shop = await openStorefront(server, seller, { 'GET /report': { price: '$0.02' } });
    const [url, id] = [shop.resource('/report'), shop.endpoint('/report').id];
    // The storefront is gone: a PATCH that fetched the URL again would fail.
    await shop.close();
    const patched = await server.request('PATCH', `/v0/payments/endpoints/${id}`, { key: seller.platformKey, body: { priceUsdc: '0.03' } });
    expect(patched.status).toBe(200);
    expect(patched.body.priceUsdc).toBe('0.03');
    const buyer = await fundedBuyer('1');
    const header = paymentHeaderV1(await signAuthorization(buyer, { to: seller.payTo, value: 30_000n }));
    expect((await redeem(header, { resource: url, amount: '0.02' })).body.error).toBe('amount_mismatch');
    expect((await redeem(header, { resource: url, amount: '0.03' })).status).toBe(200);
  });

  it('refuses to register a URL that does not answer with this seller’s 402', async () => {
    const res = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${server.url}/v0/identity-types`, priceUsdc: '0.01' } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'endpoint_check_failed' });
    expect(res.body.message).toContain('answered 200 to GET, not 402');
  });
});

describe('redeem', () => {
  it('verifies, settles on chain, records the payment and signs a receipt', async () => {
    const buyer = await fundedBuyer('1');
    const before = await usdcBalance(seller.payTo);
    const signed = await signAuthorization(buyer, { to: seller.payTo, value: PRICE });
    const res = await redeem(paymentHeaderV1(signed));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, paymentResponse: { success: true, network: 'base-sepolia', payer: buyer.address } });
    expect(res.body.paymentResponse.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await usdcBalance(seller.payTo)).toBe(before + PRICE);
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);

    const payment = await server.request('GET', `/v0/payments/${res.body.paymentId}`, { key: seller.sellerKey });
    expect(payment.status).toBe(200);
    expect(payment.body).toMatchObject({
      id: res.body.paymentId, status: 'settled', payerAddress: buyer.address, recipientAddress: seller.payTo,
      amountUsdcRaw: '10000', network: 'base-sepolia', resourceUrl: RESOURCE, txHash: res.body.paymentResponse.transaction,
      authorizationNonce: signed.authorization.nonce,
    });
    const receipt = payment.body.signedReceipt;
    expect(receipt.did).toBe(`did:web:${server.config.DID_DOMAIN}`);
    expect(receipt.body).toMatchObject({ paymentId: res.body.paymentId, amountUsdcRaw: '10000', txHash: res.body.paymentResponse.transaction });
    expect(await verifyReceipt(receipt, server.app.serviceKey.publicKeyMultibase)).toEqual({ ok: true });
    expect(await verifyReceipt({ ...receipt, body: { ...receipt.body, amountUsdcRaw: '1' } }, server.app.serviceKey.publicKeyMultibase)).toMatchObject({ ok: false });

    // Ops see the same record through the org's platform key.
    const ops = await server.request('GET', '/v0/payments', { key: seller.platformKey });
    expect(ops.body.payments.map((p: any) => p.id)).toContain(res.body.paymentId);
  });

  it('settles a replayed header at most once', async () => {
    const buyer = await fundedBuyer('1');
    const header = paymentHeaderV1(await signAuthorization(buyer, { to: seller.payTo, value: PRICE }));
    expect((await redeem(header)).status).toBe(200);
    const replay = await redeem(header);
    expect(replay.status).toBe(402);
    expect(replay.body).toMatchObject({ ok: false, error: 'nonce_already_used', status: 402 });
    expect(replay.body.requirement).toMatchObject({ scheme: 'exact', maxAmountRequired: '10000', payTo: seller.payTo, resource: RESOURCE });
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
  });

  it('lets exactly one of 50 concurrent copies of a header settle', async () => {
    const buyer = await fundedBuyer('1');
    const header = paymentHeaderV1(await signAuthorization(buyer, { to: seller.payTo, value: PRICE }));
    const results = await Promise.all(Array.from({ length: 50 }, () => redeem(header)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 402 && r.body.error === 'nonce_already_used')).toHaveLength(49);
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
    const records = await server.app.db.collection('payments').countDocuments({ payerAddress: buyer.address });
    expect(records).toBe(1);
  });

  it('refuses each kind of bad payment with its own reason and moves no money', async () => {
    const buyer = await fundedBuyer('1');
    const now = BigInt(Math.floor(Date.now() / 1000));
    const stranger = privateKeyToAccount(generatePrivateKey());
    const cases: Array<[string, Promise<string>]> = [
      ['amount_mismatch', signAuthorization(buyer, { to: seller.payTo, value: PRICE - 1n }).then((s) => paymentHeaderV1(s))],
      ['recipient_mismatch', signAuthorization(buyer, { to: stranger.address, value: PRICE }).then((s) => paymentHeaderV1(s))],
      ['network_mismatch', signAuthorization(buyer, { to: seller.payTo, value: PRICE }).then((s) => paymentHeaderV1(s, 'base'))],
      ['invalid_signature', signAuthorization(buyer, { to: seller.payTo, value: PRICE }, { verifyingContract: stranger.address }).then((s) => paymentHeaderV1(s))],
      ['invalid_signature', signAuthorization(buyer, { to: seller.payTo, value: PRICE }, { chainId: 8453 }).then((s) => paymentHeaderV1(s))],
      ['authorization_expired', signAuthorization(buyer, { to: seller.payTo, value: PRICE, validBefore: now - 1n }).then((s) => paymentHeaderV1(s))],
      ['authorization_not_yet_valid', signAuthorization(buyer, { to: seller.payTo, value: PRICE, validAfter: now + 3600n }).then((s) => paymentHeaderV1(s))],
      ['insufficient_funds', signAuthorization(stranger, { to: seller.payTo, value: PRICE }).then((s) => paymentHeaderV1(s))],
      ['invalid_base64', Promise.resolve('%%%')],
      ['invalid_payload', Promise.resolve(encodeBase64Json({ x402Version: 1, scheme: 'exact', network: 'base-sepolia', payload: {} }))],
      ['asset_mismatch', signAuthorization(buyer, { to: seller.payTo, value: PRICE }).then((s) => encodeBase64Json({
        x402Version: 2,
        accepted: { scheme: 'exact', network: 'eip155:84532', amount: '10000', asset: stranger.address, payTo: seller.payTo, maxTimeoutSeconds: 60, extra: { name: 'USD Coin', version: '2' } },
        payload: { signature: s.signature, authorization: { ...s.authorization, value: '10000', validAfter: s.authorization.validAfter.toString(), validBefore: s.authorization.validBefore.toString() } },
      }))],
    ];
    // A signature by someone other than `from`.
    const forged = await signAuthorization(stranger, { to: seller.payTo, value: PRICE });
    cases.push(['invalid_signature', Promise.resolve(paymentHeaderV1({ ...forged, authorization: { ...forged.authorization, from: buyer.address } }))]);
    for (const [reason, header] of cases) {
      const res = await redeem(await header);
      expect({ reason, status: res.status, error: res.body.error }).toEqual({ reason, status: 402, error: reason });
    }
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n);
    expect(await usdcBalance(stranger.address)).toBe(0n);
  });

  it('refuses an unregistered resource and a wrong amount', async () => {
    const buyer = await fundedBuyer('1');
    const header = paymentHeaderV1(await signAuthorization(buyer, { to: seller.payTo, value: PRICE }));
    expect((await redeem(header, { resource: 'https://api.example.com/other' })).body.error).toBe('resource_not_registered');
    expect((await redeem(header, { amount: '0.02' })).body.error).toBe('amount_mismatch');
    // The same header still works for the right resource: a refusal does not burn the nonce.
    expect((await redeem(header)).status).toBe(200);
  });
});
