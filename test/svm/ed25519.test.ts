// Ed25519 through node:crypto for Solana payments (server/chain/solana/ed25519.ts): the fee payer's
// signature must be the very bytes @solana/kit's signer makes (it is the transaction's id), and a buyer's
// signature is checked as kit checks it.
import { randomBytes } from 'node:crypto';
import { createKeyPairSignerFromPrivateKeyBytes, generateKeyPairSigner, signBytes, type Address } from '@solana/kit';
import { ed25519Signer, verifySignatureOf } from '../../server/chain/solana/ed25519.js';

test('signs the same bytes as kit\'s signer for the same seed', async () => {
  for (let i = 0; i < 5; i++) {
    const seed = new Uint8Array(randomBytes(32));
    const kit = await createKeyPairSignerFromPrivateKeyBytes(seed);
    const message = new Uint8Array(randomBytes(200 + i));
    const [theirs] = await kit.signMessages([{ content: message, signatures: {} }]);
    expect(Buffer.from(ed25519Signer(seed)(message))).toEqual(Buffer.from(theirs![kit.address]!));
  }
});

test("verifies a buyer's signature, and nothing else", async () => {
  const buyer = await generateKeyPairSigner();
  const other = await generateKeyPairSigner();
  const message = new Uint8Array(randomBytes(180));
  const signature = await signBytes(buyer.keyPair.privateKey, message);
  expect(verifySignatureOf(buyer.address, signature, message)).toBe(true);
  // Another message, another signer, a flipped bit, a short signature, an address that is no key.
  const otherMessage = message.slice();
  otherMessage[0]! ^= 1;
  expect(verifySignatureOf(buyer.address, signature, otherMessage)).toBe(false);
  expect(verifySignatureOf(other.address, signature, message)).toBe(false);
  const flipped = signature.slice();
  flipped[10]! ^= 1;
  expect(verifySignatureOf(buyer.address, flipped, message)).toBe(false);
  expect(verifySignatureOf(buyer.address, signature.slice(0, 63), message)).toBe(false);
  expect(verifySignatureOf('not-an-address' as Address, signature, message)).toBe(false);
});

test('a seed that is not 32 bytes is refused at once', () => {
  expect(() => ed25519Signer(new Uint8Array(64))).toThrow('an Ed25519 seed is 32 bytes');
});
