import * as ed from '@noble/ed25519';
import { canonicalJson, CanonicalJsonError, ed25519ToMultibase, encodeBase64Url, parseEd25519PublicKey, type Receipt, verifyReceipt } from 'agentgate-x402-wire';

describe('canonicalJson', () => {
  test('sorts keys recursively, no whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: true, y: null }], c: 'x' } })).toBe('{"a":{"c":"x","d":[3,{"y":null,"z":true}]},"b":1}');
  });

  test('key order of the input does not matter', () => {
    expect(canonicalJson({ x: 1, y: 2 })).toBe(canonicalJson({ y: 2, x: 1 }));
  });

  test('strings are escaped as JSON, keys sorted by UTF-16 code units', () => {
    expect(canonicalJson({ 'é': 1, Z: 2, a: '"\n' })).toBe('{"Z":2,"a":"\\"\\n","é":1}');
  });

  test('undefined properties are left out; unrepresentable values throw', () => {
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
    for (const bad of [{ n: 1n }, { n: Number.NaN }, { n: Infinity }, [undefined], { f: () => 1 }]) {
      expect(() => canonicalJson(bad)).toThrow(CanonicalJsonError);
    }
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(() => canonicalJson(circular)).toThrow(/circular/);
  });
});

describe('verifyReceipt', () => {
  const did = 'did:web:agentgate.example';
  let secretKey: Uint8Array;
  let publicKey: Uint8Array;
  let receipt: Receipt;

  beforeAll(async () => {
    secretKey = ed.utils.randomSecretKey();
    publicKey = await ed.getPublicKeyAsync(secretKey);
    const body = {
      version: 1,
      paymentId: 'pay_123',
      endpointId: 'ep_1',
      payerAddress: '0x2222222222222222222222222222222222222222',
      recipientAddress: '0x1111111111111111111111111111111111111111',
      amountUsdcRaw: '10000',
      network: 'anvil',
      txHash: '0x' + 'ab'.repeat(32),
      timestamp: '2025-01-01T00:00:00.000Z',
    };
    const signature = await ed.signAsync(new TextEncoder().encode(canonicalJson(body)), secretKey);
    receipt = { body, signature: encodeBase64Url(signature), publicKey: ed25519ToMultibase(publicKey), did };
  });

  test('round trip with the key as bytes, hex, base64url and multibase', async () => {
    for (const key of [publicKey, Buffer.from(publicKey).toString('hex'), encodeBase64Url(publicKey), ed25519ToMultibase(publicKey)]) {
      expect(await verifyReceipt(receipt, key)).toEqual({ ok: true });
    }
  });

  test('round trip with the DID document (Multikey, relative assertionMethod reference)', async () => {
    const document = {
      id: did,
      verificationMethod: [{ id: '#key-1', type: 'Multikey', controller: did, publicKeyMultibase: ed25519ToMultibase(publicKey) }],
      assertionMethod: [`${did}#key-1`],
    };
    expect(await verifyReceipt(receipt, document)).toEqual({ ok: true });
    expect(await verifyReceipt({ ...receipt, did: 'did:web:other.example' }, document)).toEqual({ ok: false, reason: 'did_mismatch' });
  });

  test('a body reordered in memory still verifies (canonical form)', async () => {
    const reordered = Object.fromEntries(Object.entries(receipt.body).reverse());
    expect(await verifyReceipt({ ...receipt, body: reordered }, publicKey)).toEqual({ ok: true });
  });

  test('a tampered body fails', async () => {
    const tampered = { ...receipt, body: { ...receipt.body, amountUsdcRaw: '1' } };
    expect(await verifyReceipt(tampered, publicKey)).toEqual({ ok: false, reason: 'signature_mismatch' });
    const extra = { ...receipt, body: { ...receipt.body, note: 'hi' } };
    expect(await verifyReceipt(extra, publicKey)).toEqual({ ok: false, reason: 'signature_mismatch' });
  });

  test('another key fails; the receipt cannot vouch for itself', async () => {
    const otherKey = await ed.getPublicKeyAsync(ed.utils.randomSecretKey());
    expect(await verifyReceipt(receipt, otherKey)).toEqual({ ok: false, reason: 'signature_mismatch' });
  });

  test('bad encodings are reported, never thrown', async () => {
    expect(await verifyReceipt({ ...receipt, signature: 'not!base64url' }, publicKey)).toEqual({ ok: false, reason: 'bad_signature_encoding' });
    expect(await verifyReceipt({ ...receipt, signature: encodeBase64Url(new Uint8Array(63)) }, publicKey)).toEqual({ ok: false, reason: 'bad_signature_encoding' });
    expect(await verifyReceipt(receipt, 'zzzz')).toEqual({ ok: false, reason: 'bad_public_key' });
    expect(await verifyReceipt(receipt, new Uint8Array(32).fill(0xff))).toEqual({ ok: false, reason: 'signature_mismatch' });
    expect(await verifyReceipt({ ...receipt, body: null as never }, publicKey)).toEqual({ ok: false, reason: 'malformed_receipt' });
  });

  test('multibase keys round-trip', () => {
    expect(parseEd25519PublicKey(ed25519ToMultibase(publicKey))).toEqual(publicKey);
    expect(ed25519ToMultibase(publicKey)).toMatch(/^z6Mk/);
  });
});
