import { createHash, randomBytes } from 'node:crypto';

/**
 * API keys: a readable prefix naming the tier, then 32 random bytes. Only the SHA-256 of a key is stored;
 * keys carry 256 bits of entropy, so a fast hash is safe, and lookups go by the hash through a unique
 * index, which never compares secret bytes in a data-dependent way.
 */
export const KEY_PREFIXES = { platform: 'agp_', identity: 'agi_', seller: 'loid-' } as const;
export type KeyTier = keyof typeof KEY_PREFIXES;

export function generateApiKey(tier: KeyTier): { rawKey: string; hash: string; prefix: string } {
  const rawKey = KEY_PREFIXES[tier] + randomBytes(32).toString('base64url');
  return { rawKey, hash: hashApiKey(rawKey), prefix: displayPrefix(rawKey) };
}

/** How bearer secrets are stored (API keys, feed tokens, install links): their SHA-256 in hex, never the secret. */
export const sha256Hex = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('hex');
export const hashApiKey = sha256Hex;

/** The leading part of a key shown in lists (SPEC 2.3 `apiKeyPrefix`): the tier prefix and 8 characters. */
export const displayPrefix = (rawKey: string) => rawKey.slice(0, rawKey.indexOf('_') >= 0 && rawKey.indexOf('_') < 5 ? rawKey.indexOf('_') + 9 : 13);

export function tierOf(rawKey: string): KeyTier | undefined {
  return (Object.keys(KEY_PREFIXES) as KeyTier[]).find((tier) => rawKey.startsWith(KEY_PREFIXES[tier]));
}
