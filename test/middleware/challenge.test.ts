import { PaymentRequiredV2Schema, PaymentRequiredV1Schema } from '@x402/core/schemas';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { PaymentRequirementsSchema as OfficialV1Requirements } from 'x402/types';
import { buildPaymentRequired, parseSellerSettings } from 'agentgate-x402-wire';
import { anvilSettings, baseSepoliaSettings, fromB64, LOCAL_TOKEN, PAY_TO } from './fixtures.js';

const offer = {
  amountAtomic: 10_000n,
  resource: 'https://shop.example/weather',
  description: 'Weather today',
  mimeType: 'application/json',
};

describe('the 402 challenge', () => {
  const challenge = buildPaymentRequired(anvilSettings, offer);

  test('v1 body has every v1 field plus our error shape', () => {
    expect(challenge.status).toBe(402);
    expect(challenge.body).toEqual({
      x402Version: 1,
      error: 'payment_required',
      message: 'This resource requires payment',
      status: 402,
      accepts: [
        {
          scheme: 'exact',
          network: 'anvil',
          maxAmountRequired: '10000',
          resource: 'https://shop.example/weather',
          description: 'Weather today',
          mimeType: 'application/json',
          payTo: PAY_TO,
          maxTimeoutSeconds: 60,
          asset: LOCAL_TOKEN,
          extra: { name: 'USD Coin', version: '2' },
        },
      ],
    });
    expect(JSON.parse(challenge.bodyText)).toEqual(challenge.body);
    expect(PaymentRequiredV1Schema.safeParse(challenge.body).success).toBe(true);
  });

  test('the official v1 client (x402 1.2.0) parses our requirement when the network is one it knows', () => {
    const sepolia = buildPaymentRequired(baseSepoliaSettings, offer);
    expect(OfficialV1Requirements.safeParse(sepolia.body.accepts[0]).success).toBe(true);
    // Fact recorded in PROTOCOL.md: x402 1.2.0 has no name for chain 31337, so it cannot parse "anvil".
    expect(OfficialV1Requirements.safeParse(challenge.body.accepts[0]).success).toBe(false);
  });

  test('PAYMENT-REQUIRED decodes to a valid v2 PaymentRequired per @x402/core', () => {
    const header = challenge.headers['PAYMENT-REQUIRED']!;
    const decoded = decodePaymentRequiredHeader(header);
    const parsed = PaymentRequiredV2Schema.safeParse(decoded);
    expect(parsed.success).toBe(true);
    expect(fromB64(header)).toEqual({
      x402Version: 2,
      error: 'payment_required',
      resource: { url: 'https://shop.example/weather', description: 'Weather today', mimeType: 'application/json' },
      accepts: [
        {
          scheme: 'exact',
          network: 'eip155:31337',
          amount: '10000',
          asset: LOCAL_TOKEN,
          payTo: PAY_TO,
          maxTimeoutSeconds: 60,
          extra: { name: 'USD Coin', version: '2' },
        },
      ],
    });
  });

  test('headers: no caching, header exposed to browsers, JSON content type', () => {
    expect(challenge.headers).toMatchObject({
      'Cache-Control': 'no-store',
      'Access-Control-Expose-Headers': 'PAYMENT-REQUIRED',
      'Content-Type': 'application/json; charset=utf-8',
    });
  });

  test('responses are frozen so a shared cached copy cannot be changed by one request', () => {
    expect(Object.isFrozen(challenge.body)).toBe(true);
    expect(Object.isFrozen(challenge.body.accepts[0])).toBe(true);
    expect(Object.isFrozen(challenge.headers)).toBe(true);
  });

  test('a failure reason is carried in both versions', () => {
    const refused = buildPaymentRequired(anvilSettings, offer, { reason: 'invalid_network', message: 'wrong chain' });
    expect(refused.body).toMatchObject({ error: 'invalid_network', message: 'wrong chain' });
    expect(fromB64(refused.headers['PAYMENT-REQUIRED']!)).toMatchObject({ error: 'invalid_network' });
  });
});

describe('seller settings', () => {
  test('accepts our three networks', () => {
    expect(parseSellerSettings(anvilSettings)).toEqual(anvilSettings);
    expect(parseSellerSettings(baseSepoliaSettings)).toEqual(baseSepoliaSettings);
  });

  test('a known network name must carry its own chain id', () => {
    expect(() => parseSellerSettings({ ...baseSepoliaSettings, chainId: 31337 })).toThrow(/base-sepolia" is chain 84532/);
  });

  test('names the bad field', () => {
    expect(() => parseSellerSettings({ ...anvilSettings, payTo: 'nope' })).toThrow(/payTo/);
  });
});
