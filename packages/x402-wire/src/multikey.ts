/**
 * Ed25519 public keys in the spellings a verifier meets: raw bytes, hex, base64url, and the W3C
 * Multikey form used in DID documents (`publicKeyMultibase`: "z" + base58btc of 0xed 0x01 + 32 bytes).
 */

const ED25519_PUB_MULTICODEC = [0xed, 0x01] as const;
const BASE58_ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const BASE58_INDEX = new Map([...BASE58_ALPHABET].map((c, i) => [c, i]));

export function decodeBase58btc(text: string): Uint8Array | undefined {
  let value = 0n;
  for (const char of text) {
    const digit = BASE58_INDEX.get(char);
    if (digit === undefined) return undefined;
    value = value * 58n + BigInt(digit);
  }
  const bytes: number[] = [];
  while (value > 0n) {
    bytes.unshift(Number(value & 0xffn));
    value >>= 8n;
  }
  for (const char of text) {
    if (char !== '1') break;
    bytes.unshift(0); // each leading "1" is a leading zero byte
  }
  return Uint8Array.from(bytes);
}

export function encodeBase58btc(bytes: Uint8Array): string {
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  let text = '';
  while (value > 0n) {
    text = BASE58_ALPHABET[Number(value % 58n)] + text;
    value /= 58n;
  }
  for (const byte of bytes) {
    if (byte !== 0) break;
    text = '1' + text;
  }
  return text;
}

/** `publicKeyMultibase` for an Ed25519 public key. */
export function ed25519ToMultibase(publicKey: Uint8Array): string {
  return 'z' + encodeBase58btc(Uint8Array.from([...ED25519_PUB_MULTICODEC, ...publicKey]));
}

/** A 32-byte Ed25519 public key from any supported spelling, or undefined. */
export function parseEd25519PublicKey(key: Uint8Array | string): Uint8Array | undefined {
  if (key instanceof Uint8Array) return key.length === 32 ? key : undefined;
  const text = key.trim();
  if (/^(0x)?[0-9a-fA-F]{64}$/.test(text)) return Uint8Array.from(Buffer.from(text.replace(/^0x/, ''), 'hex'));
  if (text.startsWith('z')) {
    const bytes = decodeBase58btc(text.slice(1));
    if (bytes?.length === 34 && bytes[0] === ED25519_PUB_MULTICODEC[0] && bytes[1] === ED25519_PUB_MULTICODEC[1]) {
      return bytes.slice(2);
    }
  }
  const raw = decodeBase64Url(text);
  return raw?.length === 32 ? raw : undefined;
}

export function encodeBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url');
}

/** Strict base64url without padding; undefined for anything else. */
export function decodeBase64Url(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return undefined;
  return Uint8Array.from(Buffer.from(text, 'base64url'));
}
