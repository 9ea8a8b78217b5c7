/**
 * Interop with the official buyer clients, end to end in memory: each client's fetch wrapper talks to
 * our Paywall, signs what our 402 asks for, and a fake facilitator checks the EIP-3009 signature with
 * viem against the EIP-712 domain our settings describe. This pins the facts in PROTOCOL.md.
 */
import { x402Client } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment as wrapFetchV2 } from '@x402/fetch';
import { verifyTypedData, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { wrapFetchWithPayment as wrapFetchV1 } from 'x402-fetch';
import type { RedeemRequest, RedeemResult } from '../../middleware/facilitator.js';
import { Paywall } from '../../middleware/paywall.js';
import { decodePaymentHeader, type SellerSettings } from 'agentgate-x402-wire';
import { transferWithAuthorizationTypes } from '../../server/chain/usdc.js';
import { anvilSettings, baseSepoliaSettings, FakeFacilitator, fromB64 } from './fixtures.js';

// anvil's first default account; a well-known test key.
const buyer = privateKeyToAccount('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');

/** Verifies the buyer's signature the way the token contract will: domain from our settings. */
function signatureCheckingFacilitator(settings: SellerSettings) {
  return new FakeFacilitator(async (request: RedeemRequest): Promise<RedeemResult> => {
    const decoded = decodePaymentHeader(request.paymentHeader);
    if (!decoded.ok) return { ok: false, reason: decoded.reason, message: decoded.message };
    const { authorization, signature } = decoded.payload.payload;
    const valid = await verifyTypedData({
      address: authorization.from as Hex,
      domain: { name: settings.assetName, version: settings.assetVersion, chainId: settings.chainId, verifyingContract: settings.asset as Hex },
      types: transferWithAuthorizationTypes,
      primaryType: 'TransferWithAuthorization',
      message: {
        from: authorization.from as Hex,
        to: authorization.to as Hex,
        value: BigInt(authorization.value),
        validAfter: BigInt(authorization.validAfter),
        validBefore: BigInt(authorization.validBefore),
        nonce: authorization.nonce as Hex,
      },
      signature: signature as Hex,
    });
    if (!valid) return { ok: false, reason: 'invalid_exact_evm_payload_signature', message: 'bad signature' };
    return {
      ok: true,
      paymentId: 'pay_1',
      paymentResponse: { success: true, transaction: '0x' + '01'.repeat(32), network: settings.network, payer: authorization.from },
    };
  });
}

/** A fetch that serves the request with the Paywall in front of a tiny handler. */
function sellerFetch(paywall: Paywall): typeof fetch {
  return async (input, init) => {
    const req = new Request(input, init);
    const url = new URL(req.url);
    const headers: Record<string, string> = {};
    req.headers.forEach((value, key) => (headers[key] = value));
    const outcome = await paywall.handle({
      method: req.method,
      url: url.pathname + url.search,
      host: url.host,
      protocol: url.protocol === 'https:' ? 'https' : 'http',
      headers,
    });
    switch (outcome.kind) {
      case 'payment-required':
        return new Response(outcome.bodyText, { status: 402, headers: outcome.headers });
      case 'paid':
        return new Response(JSON.stringify({ temperature: 21 }), {
          status: 200,
          headers: { 'content-type': 'application/json', ...outcome.responseHeaders },
        });
      case 'reject':
      case 'unavailable':
        return new Response(JSON.stringify(outcome.body), { status: outcome.status });
      case 'pass':
        return new Response('not found', { status: 404 });
      case 'held':
        throw new Error('this facilitator settles before the handler; nothing is held');
    }
  };
}

function sellerFor(settings: SellerSettings) {
  const facilitator = signatureCheckingFacilitator(settings);
  const paywall = new Paywall({ routes: { 'GET /weather': { price: '$0.01' } }, facilitator, settings });
  return { facilitator, fetch: sellerFetch(paywall) };
}

describe('official v2 client (@x402/fetch + @x402/evm registerExactEvmScheme)', () => {
  test('pays on the local chain eip155:31337 via PAYMENT-SIGNATURE', async () => {
    const seller = sellerFor(anvilSettings);
    // Our local token is not one of @x402/evm's default assets, so the buyer must allow it explicitly.
    const client = registerExactEvmScheme(new x402Client(), { signer: buyer }).setSpendControls({
      allowedAssets: [{ network: 'eip155:31337', asset: anvilSettings.asset, maxAmountPerPayment: '1000000' }],
    });
    const response = await wrapFetchV2(seller.fetch, client)('http://shop.example/weather');

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ temperature: 21 });
    expect(seller.facilitator.calls).toHaveLength(1);
    const call = seller.facilitator.calls[0]!;
    expect(call.version).toBe(2);
    // What the v2 client puts in PAYMENT-SIGNATURE: our requirement echoed as `accepted`, the resource
    // from PAYMENT-REQUIRED, and an EIP-3009 authorization with validAfter "0".
    const sent = fromB64(call.paymentHeader) as Record<string, unknown>;
    expect(sent).toMatchObject({
      x402Version: 2,
      resource: { url: 'http://shop.example/weather' },
      accepted: { scheme: 'exact', network: 'eip155:31337', amount: '10000', payTo: anvilSettings.payTo, asset: anvilSettings.asset },
      payload: { authorization: { from: buyer.address, to: anvilSettings.payTo, value: '10000', validAfter: '0' } },
    });
    expect(fromB64(response.headers.get('PAYMENT-RESPONSE')!)).toMatchObject({ success: true, network: 'eip155:31337' });
  });

  test('with default spend controls it refuses a token that is not a default asset (e.g. ours on 31337)', async () => {
    const seller = sellerFor(anvilSettings);
    const client = registerExactEvmScheme(new x402Client(), { signer: buyer });
    await expect(wrapFetchV2(seller.fetch, client)('http://shop.example/weather')).rejects.toThrow(/spendControls/);
    expect(seller.facilitator.calls).toHaveLength(0);
  });

  test('with default spend controls it pays canonical USDC on a known chain (base-sepolia)', async () => {
    const seller = sellerFor(baseSepoliaSettings);
    const client = registerExactEvmScheme(new x402Client(), { signer: buyer });
    const response = await wrapFetchV2(seller.fetch, client)('http://shop.example/weather');
    expect(response.status).toBe(200);
    expect(seller.facilitator.calls[0]!.version).toBe(2);
  });
});

describe('official v1 client (x402-fetch 1.2.0)', () => {
  test('pays when the network is one of its names (base-sepolia; anvil started with --chain-id 84532)', async () => {
    const localTokenOnSepoliaId: SellerSettings = { ...baseSepoliaSettings, asset: anvilSettings.asset, assetName: 'USD Coin' };
    const seller = sellerFor(localTokenOnSepoliaId);
    const response = await wrapFetchV1(seller.fetch as never, buyer as never)('http://shop.example/weather');

    expect(response.status).toBe(200);
    const call = seller.facilitator.calls[0]!;
    expect(call.version).toBe(1);
    expect(fromB64(call.paymentHeader)).toMatchObject({
      x402Version: 1,
      scheme: 'exact',
      network: 'base-sepolia',
      payload: { authorization: { from: buyer.address, value: '10000' } },
    });
    expect(fromB64(response.headers.get('X-Payment-Response')!)).toMatchObject({ success: true, network: 'base-sepolia' });
  });

  test('cannot pay a 402 whose network is our local "anvil" name: its schema has no such network', async () => {
    const seller = sellerFor(anvilSettings);
    await expect(wrapFetchV1(seller.fetch as never, buyer as never)('http://shop.example/weather')).rejects.toThrow();
    expect(seller.facilitator.calls).toHaveLength(0);
  });
});
