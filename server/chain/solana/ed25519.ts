import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { getAddressEncoder, type Address, type ReadonlyUint8Array, type SignatureBytes } from '@solana/kit';
import { TtlCache } from '../../platform/ttl-cache.js';

// Ed25519 through OpenSSL (node:crypto), synchronously, for the two signatures of every Solana payment:
// the buyer's, verified, and the fee payer's, added. @solana/kit does both through WebCrypto: a thread-pool
// round trip each, plus a key import per buyer and a base58 decode of its address. Measured in the
// backend at concurrency 1 (bench/solana.ts, 2 cores): co-signing 0.24 -> 0.05 ms, the decode and the
// signature check 0.49 ms -> all the checks 0.37 ms. Ed25519 is deterministic (RFC 8032): the fee payer's
// signature, which is also the transaction's id, is the same bytes either way.

/** DER prefixes that make a raw 32-byte Ed25519 key an SPKI public key and a PKCS#8 private key (RFC 8410). */
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

const addressEncoder = getAddressEncoder();
/** Buyers' keys, by address: an agent pays many times. A key never goes stale: no expiry, the oldest of 10,000 dropped first. */
const publicKeys = new TtlCache<KeyObject>(Number.POSITIVE_INFINITY, 10_000);

function publicKeyOf(signer: Address): KeyObject {
  let key = publicKeys.get(signer);
  if (!key) {
    key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, addressEncoder.encode(signer) as Uint8Array]), format: 'der', type: 'spki' });
    publicKeys.set(signer, key);
  }
  return key;
}

/** Whether `signature` is `signer`'s over `message`. False for a malformed key or signature, never a throw. */
export function verifySignatureOf(signer: Address, signature: ReadonlyUint8Array, message: ReadonlyUint8Array): boolean {
  try {
    return signature.length === 64 && verify(null, message as Uint8Array, publicKeyOf(signer), signature as Uint8Array);
  } catch {
    return false;
  }
}

/** Signs with the key of a 32-byte seed (the first half of a Solana 64-byte secret key). */
export function ed25519Signer(seed: Uint8Array): (message: ReadonlyUint8Array) => SignatureBytes {
  if (seed.length !== 32) throw new Error('an Ed25519 seed is 32 bytes');
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  return (message) => new Uint8Array(sign(null, message as Uint8Array, key)) as SignatureBytes;
}
