import { decodeBase64Json, decodePaymentHeader, encodeBase64Json, MAX_PAYMENT_HEADER_BYTES } from 'agentgate-x402-wire';
import { anvilRequirementV2, b64, PAY_TO } from './fixtures.js';

const authorization = {
  from: '0x2222222222222222222222222222222222222222',
  to: PAY_TO,
  value: '10000',
  validAfter: '0',
  validBefore: '9999999999',
  nonce: '0x' + '11'.repeat(32),
};
const signature = '0x' + 'cd'.repeat(65);

const v1Payload = { x402Version: 1, scheme: 'exact', network: 'anvil', payload: { signature, authorization } };
const v2Payload = {
  x402Version: 2,
  resource: { url: 'https://shop.example/weather', description: '', mimeType: 'application/json' },
  accepted: anvilRequirementV2,
  payload: { signature, authorization },
};

describe('decodePaymentHeader', () => {
  test('decodes a v1 payload', () => {
    const result = decodePaymentHeader(b64(v1Payload));
    expect(result).toEqual({ ok: true, version: 1, payload: v1Payload });
  });

  test('decodes a v2 payload (extensions may be absent or null)', () => {
    expect(decodePaymentHeader(b64(v2Payload))).toEqual({ ok: true, version: 2, payload: v2Payload });
    const withNull = { ...v2Payload, extensions: null };
    expect(decodePaymentHeader(b64(withNull)).ok).toBe(true);
  });

  test.each<[string, string]>([
    ['x'.repeat(MAX_PAYMENT_HEADER_BYTES + 1), 'header_too_large'],
    ['', 'invalid_base64'],
    ['not base64!', 'invalid_base64'],
    ['abcde', 'invalid_base64'],
    [Buffer.from(JSON.stringify(v1Payload)).toString('base64url').replace(/^./, '-'), 'invalid_base64'],
    [Buffer.from('{not json').toString('base64'), 'invalid_json'],
    [Buffer.from([0xff, 0xfe, 0x7b]).toString('base64'), 'invalid_json'],
    [b64('just a string'), 'unsupported_x402_version'],
    [b64(null), 'unsupported_x402_version'],
    [b64({ ...v1Payload, x402Version: 3 }), 'unsupported_x402_version'],
    [b64({ ...v1Payload, x402Version: '1' }), 'unsupported_x402_version'],
    [b64({ ...v1Payload, scheme: 'upto' }), 'invalid_payload'],
    [b64({ ...v1Payload, payload: { signature } }), 'invalid_payload'],
    [b64({ ...v1Payload, payload: { signature: 'nothex', authorization } }), 'invalid_payload'],
    [b64({ ...v1Payload, payload: { signature, authorization: { ...authorization, value: '-1' } } }), 'invalid_payload'],
    [b64({ ...v1Payload, payload: { signature, authorization: { ...authorization, value: '1'.repeat(79) } } }), 'invalid_payload'],
    [b64({ ...v1Payload, payload: { signature, authorization: { ...authorization, nonce: '0x12' } } }), 'invalid_payload'],
    [b64({ ...v1Payload, payload: { signature, authorization: { ...authorization, to: 'bob' } } }), 'invalid_payload'],
    [b64({ ...v2Payload, accepted: { ...v2Payload.accepted, network: 'base' } }), 'invalid_payload'],
    [b64({ ...v2Payload, accepted: undefined }), 'invalid_payload'],
    [b64({ ...v2Payload, accepted: { ...v2Payload.accepted, extra: {} } }), 'invalid_payload'],
  ])('refuses %#: %s', (header, reason) => {
    const result = decodePaymentHeader(header);
    expect(result).toMatchObject({ ok: false, reason });
    if (!result.ok) expect(result.message.length).toBeGreaterThan(0);
  });

  test('ASCII and UTF-8 beyond it encode as Buffer does and decode back', () => {
    for (const value of [v2Payload, { ...v2Payload, resource: { ...v2Payload.resource, description: 'Météo à Zürich — 天気 🌦' } }]) {
      const header = encodeBase64Json(value);
      expect(header).toBe(Buffer.from(JSON.stringify(value), 'utf8').toString('base64'));
      expect(decodeBase64Json(header)).toEqual({ ok: true, value });
    }
  });

  test('never throws, whatever the input', () => {
    const inputs = ['=', '====', 'A', 'AA==', b64([]), b64({ x402Version: 1 }), b64({ x402Version: 2, accepted: 5 })];
    for (let i = 0; i < 200; i++) inputs.push(Buffer.from(Array.from({ length: i }, (_, j) => (i * 31 + j * 7) % 256)).toString('base64'));
    for (const input of inputs) expect(() => decodePaymentHeader(input)).not.toThrow();
  });
});
