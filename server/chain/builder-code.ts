import type { Hex } from 'viem';

// ERC-8021 builder codes (x402's `builder-code` extension): attribution appended to a settlement
// transaction's calldata, which contracts ignore. Schema 2: a CBOR map of the codes (`a`: the app, from
// the seller's 402 and echoed by the buyer; `w`: the wallet/facilitator; `s`: service codes), its length
// (2 bytes), the schema id (0x02) and the 16-byte marker 0x8021 repeated. Written from ERC-8021 and the
// extension's spec (specs/extensions/builder-code.md in coinbase/x402).

export const BUILDER_CODE_KEY = 'builder-code';
export const BUILDER_CODE_PATTERN = /^[a-z0-9_]{1,32}$/;
const MARKER = '80218021802180218021802180218021';
const SCHEMA_ID = '02';
/** At most 5 client and 5 server service codes are echoed; the facilitator's own is added after them. */
const MAX_ECHOED_SERVICE_CODES = 10;

export interface BuilderCodes { a?: string; w?: string; s?: string[] }

/** CBOR head of a major type with a length (all our lengths fit in two bytes). */
function head(major: number, length: number): string {
  const mt = major << 5;
  if (length <= 23) return (mt | length).toString(16).padStart(2, '0');
  if (length <= 0xff) return (mt | 24).toString(16) + length.toString(16).padStart(2, '0');
  return (mt | 25).toString(16) + length.toString(16).padStart(4, '0');
}
const text = (value: string) => head(3, Buffer.byteLength(value)) + Buffer.from(value, 'utf8').toString('hex');

/** The calldata suffix for these codes, or undefined when there is none to carry. */
export function builderCodeSuffix(codes: BuilderCodes): Hex | undefined {
  const entries: string[] = [];
  if (codes.a) entries.push(text('a') + text(codes.a));
  if (codes.w) entries.push(text('w') + text(codes.w));
  if (codes.s?.length) entries.push(text('s') + head(4, codes.s.length) + codes.s.map(text).join(''));
  if (entries.length === 0) return undefined;
  const cbor = head(5, entries.length) + entries.join('');
  return `0x${cbor}${(cbor.length / 2).toString(16).padStart(4, '0')}${SCHEMA_ID}${MARKER}`;
}

/**
 * The codes a settlement carries: the payload's `builder-code` extension (`a` on v2 payloads only, as the
 * extension says: the seller declared it and the buyer's client echoed it; `s` as sent, valid ones only),
 * our own wallet code `w` and service code appended to `s`. Malformed codes are dropped, never refused.
 */
export function settlementBuilderCodes(extensions: unknown, x402Version: number, own: { walletCode?: string; serviceCode?: string }): BuilderCodes {
  const info = (extensions as Record<string, { info?: unknown } | undefined> | null | undefined)?.[BUILDER_CODE_KEY]?.info;
  const client = typeof info === 'object' && info !== null && !Array.isArray(info) ? info as Record<string, unknown> : {};
  const valid = (v: unknown): v is string => typeof v === 'string' && BUILDER_CODE_PATTERN.test(v);
  const rawS = typeof client.s === 'string' ? [client.s] : Array.isArray(client.s) ? client.s : [];
  const s = rawS.filter(valid).slice(0, MAX_ECHOED_SERVICE_CODES);
  if (own.serviceCode && !s.includes(own.serviceCode)) s.push(own.serviceCode);
  return {
    ...(x402Version === 2 && valid(client.a) ? { a: client.a } : {}),
    ...(own.walletCode ? { w: own.walletCode } : {}),
    ...(s.length ? { s } : {}),
  };
}
